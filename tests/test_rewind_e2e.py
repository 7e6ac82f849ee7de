"""Issue 28 §4 through the real `heron`: `/rewind` and `/rewind N` (the conversation and the
files, under /undo's rule), undone by `/undo`; `_session/rewind` and `_session/rewind_files`
on claude-agent-acp's shapes, addressed by message id; busy while a turn runs; all or nothing
when the store cannot take it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import Call, text, tool_calls

FULL = ("--mode", "full-access")


def said(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def two_turns(heron: Any, fake_llm: Any, workspace: str) -> tuple[Any, str]:
    """Turn 1 writes a.txt; turn 2 edits it and creates b.txt."""
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "a.txt", "content": "one\n"}, id="w1")),
        text("Wrote a.txt."),
        tool_calls(
            Call("edit_file", {"path": "a.txt", "old_string": "one", "new_string": "two"}, id="e1"),
            Call("write_file", {"path": "b.txt", "content": "bee\n"}, id="w2"),
        ),
        text("Changed a.txt, added b.txt."),
    )
    client = heron(*FULL)
    session_id = client.new_session(workspace)
    client.prompt(session_id, "Create a.txt")
    client.prompt(session_id, "Now make it two\nand add b.txt")
    assert Path(workspace, "a.txt").read_text() == "two\n"
    return client, session_id


def test_rewind_lists_the_messages(heron, fake_llm, workspace):
    client, session_id = two_turns(heron, fake_llm, workspace)
    listing = said(client.prompt(session_id, "/rewind")["updates"])
    assert "1. Create a.txt — 2 messages ago" in listing
    assert "2. Now make it two — the last one" in listing
    assert len(fake_llm.requests) == 4  # no model request


def test_rewind_takes_back_the_conversation_and_the_files(heron, fake_llm, workspace):
    client, session_id = two_turns(heron, fake_llm, workspace)
    answer = said(client.prompt(session_id, "/rewind 2")["updates"])
    assert Path(workspace, "a.txt").read_text() == "one\n"
    assert not Path(workspace, "b.txt").exists()
    assert "just before message 2" in answer
    assert answer.endswith("Now make it two\nand add b.txt")  # to send it again
    # The model's history is back to the end of turn 1.
    fake_llm.script(text("Fresh start."))
    client.prompt(session_id, "Something else")
    messages = fake_llm.requests[-1].body["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == ["Create a.txt", "Something else"]
    assert messages[-2] == {"role": "assistant", "content": "Wrote a.txt."}
    # A load replays turn 1, the /rewind exchange, the new turn: not turn 2.
    again = heron(*FULL)
    load = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    prompts = [
        u["content"]["text"] for u in load.updates() if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert prompts == ["Create a.txt", "/rewind 2", "Something else"]


def test_a_file_the_user_edited_is_named_and_left_alone(heron, fake_llm, workspace):
    client, session_id = two_turns(heron, fake_llm, workspace)
    Path(workspace, "a.txt").write_text("mine now\n")  # the user's edit
    answer = said(client.prompt(session_id, "/rewind 2")["updates"])
    assert Path(workspace, "a.txt").read_text() == "mine now\n"
    assert not Path(workspace, "b.txt").exists()  # Heron's own file still went
    assert "a.txt changed since the turn" in answer and "Left as they are" in answer


def test_undo_right_after_a_rewind_brings_everything_back(heron, fake_llm, workspace):
    client, session_id = two_turns(heron, fake_llm, workspace)
    client.prompt(session_id, "/rewind 2")
    answer = said(client.prompt(session_id, "/undo")["updates"])
    assert "Brought back the conversation" in answer
    assert Path(workspace, "a.txt").read_text() == "two\n"
    assert Path(workspace, "b.txt").read_text() == "bee\n"
    fake_llm.script(text("Still here."))
    client.prompt(session_id, "Go on")
    users = [m["content"] for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["Create a.txt", "Now make it two\nand add b.txt", "Go on"]
    # And it holds after a load: the whole conversation is there again.
    again = heron(*FULL)
    load = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    prompts = [
        u["content"]["text"] for u in load.updates() if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert prompts[:2] == ["Create a.txt", "Now make it two\nand add b.txt"]


def test_rewind_asks_before_it_writes_and_a_no_changes_nothing(heron, fake_llm, workspace):
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "a.txt", "content": "one\n"}, id="w1")),
        text("Done."),
    )
    client = heron()  # ask mode: the restore is asked like an edit
    session_id = client.new_session(workspace)
    client.prompt(session_id, "Create a.txt")
    client.permission = "reject_once"
    answer = said(client.prompt(session_id, "/rewind 1")["updates"])
    assert "Nothing was rewound" in answer
    assert Path(workspace, "a.txt").read_text() == "one\n"
    fake_llm.script(text("ok"))
    client.permission = "allow_once"
    client.prompt(session_id, "next")
    users = [m["content"] for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["Create a.txt", "next"]


def test_a_rewind_the_store_cannot_take_changes_nothing(heron, fake_llm, workspace, heron_home):
    client, session_id = two_turns(heron, fake_llm, workspace)
    db = heron_home / ".local" / "share" / "heron" / "sessions.db"
    # Another process saved turns meanwhile: the stored session is not this one's to rewrite.
    conn = sqlite3.connect(db, timeout=10)
    with conn:
        conn.execute("UPDATE sessions SET revision = revision + 100 WHERE id = ?", (session_id,))
    conn.close()
    answer = said(client.prompt(session_id, "/rewind 2")["updates"])
    assert "Nothing was rewound" in answer and "another Heron process" in answer
    assert Path(workspace, "a.txt").read_text() == "two\n"
    assert Path(workspace, "b.txt").exists()


def user_ids(client: Any, session_id: str, workspace: str, heron: Any) -> dict[str, str]:
    """The user messages' ids, as a client learns them: from a load."""
    other = heron(*FULL)
    load = other.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    other.kill()
    return {
        u["content"]["text"]: u["messageId"]
        for u in load.updates()
        if u["sessionUpdate"] == "user_message_chunk"
    }


def test_claude_style_rewind_and_rewind_files(heron, fake_llm, workspace):
    client, session_id = two_turns(heron, fake_llm, workspace)
    init = client.initialize()
    assert init["_meta"]["sessionRewind"] == {"version": 1, "method": "_session/rewind"}
    assert init["_meta"]["sessionRewindFiles"]["dryRun"] is True
    ids = user_ids(client, session_id, workspace, heron)
    second = "Now make it two\nand add b.txt"
    point = {
        "messageId": ids[second],
        "messageFingerprint": "sha256:" + hashlib.sha256(second.encode()).hexdigest(),
        "messageOccurrence": 1,
    }
    preview = client.request(
        "_session/rewind_files", {"sessionId": session_id, "beforeMessage": point, "dryRun": True}
    )
    assert preview["canRewind"] is True and preview["dryRun"] is True
    assert sorted(preview["filesChanged"]) == [
        os.path.join(workspace, "a.txt"),
        os.path.join(workspace, "b.txt"),
    ]
    assert Path(workspace, "a.txt").read_text() == "two\n"  # a preview writes nothing
    done = client.request(
        "_session/rewind_files", {"sessionId": session_id, "beforeMessage": point, "dryRun": False}
    )
    assert done["canRewind"] is True and Path(workspace, "a.txt").read_text() == "one\n"
    assert client.request("_session/rewind", {"sessionId": session_id, "beforeMessage": point}) == {
        "rewound": True,
        "sessionId": session_id,
    }
    fake_llm.script(text("ok"))
    client.prompt(session_id, "again")
    users = [m["content"] for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["Create a.txt", "again"]


def test_claude_style_rewind_refuses_what_it_cannot_find(heron, fake_llm, workspace):
    client, session_id = two_turns(heron, fake_llm, workspace)
    ids = user_ids(client, session_id, workspace, heron)
    bad = [
        {"messageId": "nope"},
        {"messageId": ids["Create a.txt"], "messageFingerprint": "sha256:" + "0" * 64},
        {"messageId": ids["Create a.txt"], "messageFingerprint": "md5:abc"},
    ]
    for point in bad:
        with pytest.raises(RpcError) as err:
            client.request("_session/rewind", {"sessionId": session_id, "beforeMessage": point})
        assert err.value.code == -32602
    answer = client.request(
        "_session/rewind", {"sessionId": "sess_gone", "beforeMessage": {"messageId": "x"}}
    )
    assert answer == {"rewound": False, "reason": "session_not_found"}
    with pytest.raises(RpcError):
        client.request("_session/rewind_files", {"sessionId": session_id, "beforeMessage": bad[0]})


def test_a_rewind_while_a_turn_runs_is_busy(heron, fake_llm, workspace):
    fake_llm.script(
        text("First."),
        tool_calls(Call("write_file", {"path": "c.txt", "content": "c\n"}, id="w1")),
        text("Done."),
    )
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "Hello")
    ids = user_ids(client, session_id, workspace, heron)
    client.permission_gate = threading.Event()
    pending = client.prompt_async(session_id, "Write c.txt")
    client.wait_for_agent_request("session/request_permission", timeout=30)
    point = {"messageId": ids["Hello"]}
    assert client.request("_session/rewind", {"sessionId": session_id, "beforeMessage": point}) == {
        "rewound": False,
        "reason": "busy",
    }
    files = client.request(
        "_session/rewind_files", {"sessionId": session_id, "beforeMessage": point, "dryRun": True}
    )
    assert files["canRewind"] is False and files["reason"] == "busy"
    client.permission_gate.set()
    assert pending.result(30)["stopReason"] == "end_turn"
