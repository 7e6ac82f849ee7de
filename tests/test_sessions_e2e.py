"""Sessions that last: the SQLite store behind session/load, resume, list, close and delete.

Every test drives the real `heron` over its pipes. Processes started by one test share the
test's HOME, hence one store ($XDG_DATA_HOME/heron/sessions.db), as two editor windows would.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acp_client import DEFAULT_CAPABILITIES, AcpClient, RpcError
from conftest import _heron_executable, heron_env
from fake_openai import Call, error, stall, text, tool_calls

FULL = ("--mode", "full-access")
CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
TURN_KINDS = (*CHUNKS, "tool_call", "tool_call_update", "plan")


def editor_view(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an editor shows for a stream of updates: the text chunks of one message joined
    (one `messageId`; the ids themselves are left out: tests/test_messages_ids_e2e.py checks
    them), each tool call in its final state where it was announced, the last plan. Other
    updates (usage, title) are not part of the conversation."""
    shown: list[dict[str, Any] | None] = []
    calls: dict[str, dict[str, Any]] = {}
    plan_at: int | None = None
    for update in copy.deepcopy(updates):
        kind = update["sessionUpdate"]
        last = shown[-1] if shown else None
        if kind in CHUNKS:
            message = update.pop("messageId", None)
            if (
                last is not None
                and last["sessionUpdate"] == kind
                and last.get("_message") == message
                and last["content"]["type"] == "text" == update["content"]["type"]
            ):
                last["content"]["text"] += update["content"]["text"]
            else:
                shown.append({**update, "_message": message})
        elif kind == "tool_call":
            calls[update["toolCallId"]] = update
            shown.append(update)
        elif kind == "tool_call_update":
            calls[update["toolCallId"]].update(
                {k: v for k, v in update.items() if k != "sessionUpdate"}
            )
        elif kind == "plan":
            if plan_at is not None:
                shown[plan_at] = None
            plan_at = len(shown)
            shown.append(update)
    return [{k: v for k, v in u.items() if k != "_message"} for u in shown if u is not None]


def user_chunk(content: dict[str, Any]) -> dict[str, Any]:
    return {"sessionUpdate": "user_message_chunk", "content": content}


def agent_chunk(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def turn_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] in TURN_KINDS]


def store_path(home: Path) -> Path:
    return home / ".local" / "share" / "heron" / "sessions.db"


def _stored_anywhere(home: Path, needle: str) -> bool:
    """Whether any text cell of the store holds `needle` (whatever the tables are called)."""
    if not store_path(home).exists():
        return False
    try:
        conn = sqlite3.connect(f"file:{store_path(home)}?mode=ro", uri=True)
        try:
            query = "SELECT name FROM sqlite_master WHERE type='table'"
            for (table,) in conn.execute(query).fetchall():
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    if any(isinstance(cell, str) and needle in cell for cell in row):
                        return True
        finally:
            conn.close()
    except sqlite3.Error:
        return False  # being created: ask again
    return False


def stop(client) -> None:
    """End the agent the way an editor does (stdin closes); its writes are flushed."""
    client.close_stdin()
    assert client.wait_exit(10) == 0


# -- capabilities --------------------------------------------------------------------------


def test_session_capabilities_are_advertised(heron):
    client = heron(initialize=False)
    caps = client.initialize()["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["sessionCapabilities"] == {
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "additionalDirectories": {},
        "fork": {},
    }


def restore_params(session_id: str, cwd: str) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": cwd, "mcpServers": []}


def test_a_session_is_stored_from_session_new_on(heron, fake_llm, workspace):
    """Never prompted, it is listed (untitled) and can be resumed or loaded, in another
    process as in this one (acpx: `sessions new`, then a prompt from a new process)."""
    client = heron()
    session_id = client.new_session(workspace)
    listed = client.request("session/list", {})["sessions"]
    assert [s["sessionId"] for s in listed] == [session_id]
    assert "title" not in listed[0] and listed[0]["cwd"] == workspace

    other = heron()
    assert set(other.request("session/resume", restore_params(session_id, workspace))) == {
        "configOptions",
        "modes",
        "_meta",  # the workspace's trust (agent.trust)
    }
    fake_llm.script(text("Hello from elsewhere."), text("And here."))
    assert other.prompt(session_id, "first words")["stopReason"] == "end_turn"
    stop(other)

    # The process that made it loads it too, and sees the turn the other process added.
    load = client.request_async("session/load", restore_params(session_id, workspace))
    load.result()
    assert editor_view(turn_updates(load.updates())) == [
        user_chunk({"type": "text", "text": "first words"}),
        agent_chunk("Hello from elsewhere."),
    ]
    assert client.prompt(session_id, "go on")["stopReason"] == "end_turn"
    roles = [m["role"] for m in fake_llm.requests[-1].body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


@pytest.mark.parametrize("damage", ["{broken", '"a string"'])
def test_a_failed_restore_leaves_the_live_session_live(
    heron, fake_llm, workspace, heron_home, damage
):
    fake_llm.script(text("one"), text("two"), text("three"))
    client = heron()
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "hello")["stopReason"] == "end_turn"
    assert client.prompt(session_id, "still there?")["stopReason"] == "end_turn"
    # Its stored row made unreadable: an error that says so, and the live session goes on.
    db = sqlite3.connect(store_path(heron_home), timeout=10)
    deadline = time.monotonic() + 10
    stored = "SELECT count(*) FROM history WHERE session_id = ?"
    while db.execute(stored, (session_id,)).fetchone()[0] < 4:  # the two turns, written
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with db:
        db.execute("UPDATE history SET message = ? WHERE session_id = ?", (damage, session_id))
    db.close()
    for method in ("session/load", "session/resume"):
        with pytest.raises(RpcError) as err:
            client.request(method, restore_params(session_id, workspace))
        assert err.value.code == -32602 and "cannot be read" in err.value.message
    assert client.prompt(session_id, "and now?")["stopReason"] == "end_turn"


# -- load ------------------------------------------------------------------------------------


def test_load_replays_exactly_what_the_editor_saw_and_the_model_continues(
    heron, fake_llm, workspace
):
    Path(workspace, "app.py").write_text("def main():\n    print('hi')\n")
    Path(workspace, "notes.md").write_text("some notes\n")
    todos = [
        {"content": "Fix the greeting", "status": "in_progress", "priority": "high"},
        {"content": "Run the tests", "status": "pending", "priority": "low"},
    ]
    done = [{**todos[0], "status": "completed"}, todos[1]]
    edit = {"path": "app.py", "old_string": "print('hi')", "new_string": "print('hello')"}
    fake_llm.script(
        tool_calls(Call("todo_write", {"todos": todos}, id="plan1"), text="Let me plan."),
        tool_calls(
            Call("edit_file", edit, id="edit1"),
            Call("read_file", {"path": "missing.txt"}, id="read1"),
        ),
        tool_calls(Call("todo_write", {"todos": done}, id="plan2")),
        text("Done: ", "the greeting ", "is fixed.", reasoning=["Checking ", "the diff."]),
        text("Second answer."),
    )
    live = heron(*FULL)
    session_id = live.new_session(workspace)
    link = {"type": "resource_link", "uri": f"file://{workspace}/notes.md", "name": "notes.md"}
    first = [{"type": "text", "text": "Fix the greeting\nin app.py"}, link]
    seen = [user_chunk(first[0]), user_chunk(link)]
    seen += live.prompt(session_id, first)["updates"]
    seen.append(user_chunk({"type": "text", "text": "And now?"}))
    seen += live.prompt(session_id, "And now?")["updates"]
    stop(live)

    fresh = heron(*FULL)
    load = fresh.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    assert set(load.result()) == {"configOptions", "modes", "_meta"}  # the pickers
    before = load.updates()
    replayed = turn_updates(before)
    # The conversation, then the session's state (issue 16: all of it before the answer).
    assert before[: len(replayed)] == replayed
    assert {u["sessionUpdate"] for u in before[len(replayed) :]} == {
        "available_commands_update",
        "session_info_update",
        "usage_update",
    }
    assert editor_view(replayed) == editor_view(seen)
    calls = {u["toolCallId"]: u for u in replayed if u["sessionUpdate"] == "tool_call"}
    assert calls["edit1"]["status"] == "completed"
    assert calls["edit1"]["content"][0]["type"] == "diff"
    assert calls["edit1"]["rawInput"] == edit
    assert calls["read1"]["status"] == "failed"
    plans = [u for u in replayed if u["sessionUpdate"] == "plan"]
    assert len(plans) == 1 and [e["status"] for e in plans[0]["entries"]] == [
        "completed",
        "pending",
    ]
    # Nothing arrives after the answer until the next prompt (a round trip gets that far).
    fresh.request("session/list", {})
    assert fresh.updates(session_id) == before

    # The model's history came back: the next request holds the whole conversation.
    fake_llm.script(text("Third answer."))
    assert fresh.prompt(session_id, "Third?")["stopReason"] == "end_turn"
    before = fake_llm.requests[-2].body["messages"]
    after = fake_llm.requests[-1].body["messages"]
    assert after[1:-1] == [*before[1:], {"role": "assistant", "content": "Second answer."}]
    assert after[-1] == {"role": "user", "content": "Third?"}


def test_load_of_an_unknown_session_is_invalid_params(heron, workspace):
    client = heron()
    with pytest.raises(RpcError) as err:
        client.request(
            "session/load", {"sessionId": "sess_nope", "cwd": workspace, "mcpServers": []}
        )
    assert err.value.code == -32602
    assert "unknown session" in err.value.message and "sess_nope" in err.value.message
    with pytest.raises(RpcError) as err:
        client.request(
            "session/resume", {"sessionId": "sess_nope", "cwd": workspace, "mcpServers": []}
        )
    assert err.value.code == -32602


def test_resume_restores_the_history_without_replaying(heron, fake_llm, workspace):
    fake_llm.script(text("I am Heron."), text("You asked who I am."))
    first = heron()
    session_id = first.new_session(workspace)
    first.prompt(session_id, "Who are you?")
    stop(first)

    second = heron()
    resume = second.request_async(
        "session/resume", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    assert set(resume.result()) == {"configOptions", "modes", "_meta"}  # the pickers
    # No replay: only the session's state (command list, title, context meter).
    assert turn_updates(resume.updates()) == []
    second.prompt(session_id, "What did I ask?")
    messages = fake_llm.requests[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "I am Heron."


def test_a_session_killed_mid_turn_loads_cleanly(heron, fake_llm, workspace, heron_home):
    Path(workspace, "a.txt").write_text("alpha\n")
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "a.txt"}, id="r1")),
        tool_calls(Call("bash", {"command": "sleep 30"}, id="b1")),
    )
    first = heron(*FULL)
    session_id = first.new_session(workspace)
    first.prompt_async(session_id, "Look around")
    first.wait_for_update(
        lambda u: u.get("toolCallId") == "b1" and u.get("status") == "in_progress"
    )
    # Killed once the bash announcement (after the read's result) is in the store.
    deadline = time.monotonic() + 30
    while not _stored_anywhere(heron_home, '"b1"'):
        assert time.monotonic() < deadline, "the bash call never reached the store"
        time.sleep(0.05)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(5)

    second = heron(*FULL)
    load = second.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    assert set(load.result()) == {"configOptions", "modes", "_meta"}  # the pickers
    calls = {u["toolCallId"]: u for u in load.updates() if u["sessionUpdate"] == "tool_call"}
    assert calls["r1"]["status"] == "completed"
    assert calls["b1"]["status"] == "failed"  # interrupted: replays as failed
    # The conversation goes on, and every tool call in the history has its answer.
    fake_llm.script(text("Resumed."))
    assert second.prompt(session_id, "Go on")["stopReason"] == "end_turn"
    messages = fake_llm.requests[-1].body["messages"]
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert answered == {"r1", "b1"}
    assert "alpha" in next(m["content"] for m in messages if m.get("tool_call_id") == "r1")


# -- title, list -----------------------------------------------------------------------------


def test_the_first_prompt_titles_the_session(heron, fake_llm, workspace):
    fake_llm.script(text("ok"), text("ok again"))
    client = heron()
    session_id = client.new_session(workspace)
    prompt = (
        "Please refactor the configuration loader so that environment variables win over "
        "the file\nand add tests"
    )
    turn = client.prompt(session_id, prompt)
    infos = [u for u in turn["updates"] if u["sessionUpdate"] == "session_info_update"]
    assert len(infos) == 1
    title = infos[0]["title"]
    assert title == "Please refactor the configuration loader so that…"
    listed = client.request("session/list", {})["sessions"]
    assert [(s["sessionId"], s["title"]) for s in listed] == [(session_id, title)]
    first_update = listed[0]["updatedAt"]
    second = client.prompt(session_id, "Another thing")
    assert not [u for u in second["updates"] if u["sessionUpdate"] == "session_info_update"]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        listed = client.request("session/list", {})["sessions"]
        if listed[0]["updatedAt"] != first_update:
            break
        time.sleep(0.05)
    assert listed[0]["updatedAt"] > first_update
    assert listed[0]["title"] == title


def seed_sessions(path: Path, count: int, cwd: str) -> list[str]:
    """Stored sessions written straight into the store with Heron's own schema."""
    from agent.store import db

    conn = db.connect(path)
    ids = []
    conn.execute("BEGIN IMMEDIATE")
    for n in range(count):
        session_id = f"sess_seed{n:05d}"
        stamp = f"2025-01-01T00:00:{n // 1000:02d}.{n % 1000:03d}000Z"
        db.upsert_session(
            conn, db.SessionRow(session_id, cwd, [], f"Seed {n}", stamp, stamp, "ask", "m")
        )
        ids.append(session_id)
    conn.execute("COMMIT")
    conn.close()
    return ids[::-1]  # newest first


def test_list_pages_newest_first_and_filters_by_cwd(
    heron, fake_llm, workspace, heron_home, tmp_path
):
    other = tmp_path / "other"
    other.mkdir()
    seeded = seed_sessions(store_path(heron_home), 120, str(other))
    fake_llm.script(text("ok"))
    client = heron()
    mine = client.new_session(workspace)
    client.prompt(mine, "hello")
    stop(client)

    client = heron()
    pages, cursor = [], None
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = client.request("session/list", params)
        pages.append(page["sessions"])
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert [len(p) for p in pages] == [50, 50, 21]
    listed = [s["sessionId"] for p in pages for s in p]
    assert listed == [mine, *seeded]
    assert pages[0][0]["cwd"] == workspace and pages[0][0]["title"] == "hello"

    only_mine = client.request("session/list", {"cwd": workspace})
    assert [s["sessionId"] for s in only_mine["sessions"]] == [mine]
    assert "nextCursor" not in only_mine
    nothing = client.request("session/list", {"cwd": str(tmp_path / "nowhere")})
    assert nothing == {"sessions": []}

    with pytest.raises(RpcError) as err:
        client.request("session/list", {"cursor": "not a cursor!"})
    assert err.value.code == -32602


# -- close, delete ---------------------------------------------------------------------------


def test_close_cancels_the_running_turn_and_keeps_the_session(heron, fake_llm, workspace):
    fake_llm.script(stall(text("Working on it")))
    client = heron()
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "Do a long thing")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    assert client.request("session/close", {"sessionId": session_id}) == {}
    assert pending.result(30) == {"stopReason": "cancelled"}
    assert fake_llm.client_gone.wait(5)
    # Closed: gone from memory...
    with pytest.raises(RpcError) as err:
        client.request("session/prompt", {"sessionId": session_id, "prompt": []})
    assert err.value.code == -32602
    # ...but kept in the store, with what was said so far.
    assert [s["sessionId"] for s in client.request("session/list", {})["sessions"]] == [session_id]
    load = client.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    assert set(load.result()) == {"configOptions", "modes", "_meta"}  # the pickers
    assert editor_view(load.updates()) == [
        user_chunk({"type": "text", "text": "Do a long thing"}),
        agent_chunk("Working on it"),
    ]
    # Closing twice, or an unknown session, is not an error.
    assert client.request("session/close", {"sessionId": session_id}) == {}
    assert client.request("session/close", {"sessionId": "sess_unknown"}) == {}


def test_delete_removes_the_session_from_the_store(heron, fake_llm, workspace):
    fake_llm.script(text("one"), text("two"))
    client = heron()
    keep = client.new_session(workspace)
    client.prompt(keep, "keep me")
    gone = client.new_session(workspace)
    client.prompt(gone, "delete me")
    assert client.request("session/delete", {"sessionId": gone}) == {}
    assert [s["sessionId"] for s in client.request("session/list", {})["sessions"]] == [keep]
    with pytest.raises(RpcError):
        client.request("session/load", {"sessionId": gone, "cwd": workspace, "mcpServers": []})
    assert client.request("session/delete", {"sessionId": "sess_never_was"}) == {}
    stop(client)
    again = heron()
    assert [s["sessionId"] for s in again.request("session/list", {})["sessions"]] == [keep]


# -- sharing and failures --------------------------------------------------------------------


def test_two_processes_share_one_store(heron, fake_llm, workspace):
    fake_llm.script(*[text(f"answer {n}", delay=0.005) for n in range(12)])
    a, b = heron(), heron()
    sessions = {a: a.new_session(workspace), b: b.new_session(workspace)}
    for n in range(6):
        pendings = [c.prompt_async(sessions[c], f"turn {n}") for c in (a, b)]
        for p in pendings:
            assert p.result(15)["stopReason"] == "end_turn"
    stop(a)
    stop(b)
    for client in (a, b):
        assert "locked" not in client.stderr and "not be saved" not in client.stderr
    c = heron()
    listed = {s["sessionId"] for s in c.request("session/list", {})["sessions"]}
    assert listed == set(sessions.values())
    for session_id in sessions.values():
        load = c.request_async(
            "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
        )
        load.result()
        users = [u for u in load.updates() if u["sessionUpdate"] == "user_message_chunk"]
        assert [u["content"]["text"] for u in users] == [f"turn {n}" for n in range(6)]


@pytest.mark.parametrize("broken", ["not-a-directory", "corrupt-file"])
def test_an_unusable_store_is_said_once_and_heron_keeps_working(
    heron, fake_llm, workspace, tmp_path, broken
):
    data = tmp_path / "data"
    if broken == "not-a-directory":
        data.write_text("a file where the data directory should be")
        data_dir = data / "heron"
    else:
        data.mkdir()
        (data / "sessions.db").write_bytes(b"this is not a database" * 100)
        data_dir = data
    fake_llm.script(text("first"), text("second"))
    client = heron(env={"HERON_DATA_DIR": str(data_dir)})
    session_id = client.new_session(workspace)
    first = client.prompt(session_id, "hello")
    assert first["stopReason"] == "end_turn"
    # (The command list and the endpoint's model list may arrive during the turn: both are
    # sent in the background.)
    background = ("availableCommands", "configOptions")
    kinds = [u["sessionUpdate"] for u in first["updates"] if not any(k in u for k in background)]
    said = "".join(u["content"]["text"] for u in first["updates"] if "content" in u)
    assert set(kinds) == {"agent_message_chunk", "session_info_update", "usage_update"}
    assert "will not be saved" in said and said.endswith("first")
    second = client.prompt(session_id, "again")
    assert second["stopReason"] == "end_turn"
    assert "will not be saved" not in json.dumps(second["updates"])
    # the conversation itself goes on in memory
    assert [m["role"] for m in fake_llm.requests[-1].body["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]
    assert "sessions will not be saved" in client.stderr
    assert client.request("session/list", {}) == {"sessions": []}
    if broken == "corrupt-file":
        assert (data / "sessions.db").read_bytes() == b"this is not a database" * 100


def test_data_dir_flag_places_the_store(heron, fake_llm, workspace, tmp_path):
    fake_llm.script(text("ok"))
    client = heron("--data-dir", str(tmp_path / "elsewhere"))
    client.prompt(client.new_session(workspace), "hi")
    stop(client)
    conn = sqlite3.connect(tmp_path / "elsewhere" / "sessions.db")
    assert conn.execute("SELECT title FROM sessions").fetchall() == [("hi",)]
    assert os.path.exists(tmp_path / "elsewhere" / "sessions.db")


# -- usage -----------------------------------------------------------------------------------


def usage_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "usage_update"]


def test_each_model_response_reports_usage_from_the_server(heron, fake_llm, workspace):
    fake_llm.script(
        tool_calls(
            Call("list_directory", {"path": "."}, id="l1"),
            usage={"prompt_tokens": 1200, "completion_tokens": 34, "total_tokens": 1234},
        ),
        text("done", usage={"prompt_tokens": 1500, "completion_tokens": 5, "total_tokens": 1505}),
    )
    client = heron()
    turn = client.prompt(client.new_session(workspace), "look")
    assert fake_llm.requests[0].body["stream_options"] == {"include_usage": True}
    # the fake model is in no table and /v1/models says nothing about its window
    assert usage_updates(turn["updates"]) == [
        {"sessionUpdate": "usage_update", "used": 1234, "size": 128000},
        {"sessionUpdate": "usage_update", "used": 1505, "size": 128000},
    ]


def test_the_context_window_setting_sets_the_size(heron, fake_llm, workspace):
    fake_llm.script(text("ok"))
    client = heron(env={"HERON_CONTEXT_WINDOW": "5000"})
    turn = client.prompt(client.new_session(workspace), "hi")
    [usage] = usage_updates(turn["updates"])
    assert usage["size"] == 5000 and usage["used"] > 0


# -- compaction ------------------------------------------------------------------------------


def compaction_notes(updates: list[dict[str, Any]]) -> list[str]:
    return [
        u["content"]["text"]
        for u in updates
        if u["sessionUpdate"] == "agent_message_chunk" and "Compacted" in u["content"]["text"]
    ]


def test_a_conversation_near_the_window_is_compacted_and_the_turn_goes_on(
    heron, fake_llm, workspace
):
    # Window 12000 tokens: compaction above 9600, of which the system prompt and the tool
    # schemas take about 2700. The request (~6700 tokens as the fake counts) fits; with the
    # reply (~3300) and the next question, the second request (~10000) does not.
    long_request = "Please read this carefully. " + "lorem ipsum " * 3330  # ~40000 chars
    reply = "Read it. " + "noted " * 3300  # ~20000 chars
    fake_llm.script(text(reply), text("SUMMARY: the user sent a long text."), text("Sure."))
    client = heron(env={"HERON_CONTEXT_WINDOW": "12000"})
    session_id = client.new_session(workspace)
    first = client.prompt(session_id, long_request)
    assert not compaction_notes(first["updates"])
    second = client.prompt(session_id, "Now what?")
    assert second["stopReason"] == "end_turn"
    assert len(compaction_notes(second["updates"])) == 1
    summarizer, main = fake_llm.requests[1].body, fake_llm.requests[2].body
    assert "tools" not in summarizer and "lorem ipsum" in summarizer["messages"][-1]["content"]
    messages = main["messages"]
    # The reply is larger than the part kept word for word (a share of the room left after
    # the system prompt and tools): summarized too; the summary and the question go as one
    # user message (roles alternate).
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"].endswith("SUMMARY: the user sent a long text.\n\nNow what?")
    assert "lorem ipsum" not in json.dumps(messages)
    stop(client)

    # The store keeps the compacted history; the replay still shows everything.
    fake_llm.script(text("Continuing."))
    again = heron(env={"HERON_CONTEXT_WINDOW": "12000"})
    load = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    users = [u for u in load.updates() if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == [long_request, "Now what?"]
    again.prompt(session_id, "Go on")
    resumed = fake_llm.requests[-1].body["messages"]
    assert "SUMMARY: the user sent a long text." in resumed[1]["content"]
    assert "lorem ipsum" not in json.dumps(resumed)


def test_a_request_rejected_for_its_length_is_compacted_and_retried(heron, fake_llm, workspace):
    fake_llm.script(
        text("First answer. " * 300),
        error(
            400,
            "This model's maximum context length is 4096 tokens. However, your messages "
            "resulted in 4200 tokens.",
            code="context_length_exceeded",
        ),
        text("SUMMARY of it."),
        text("Second answer."),
    )
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "First question")
    second = client.prompt(session_id, "Second question")
    assert second["stopReason"] == "end_turn"
    assert len(compaction_notes(second["updates"])) == 1
    retried = fake_llm.requests[3].body["messages"]
    # The summary and the request go as one user message (roles alternate).
    assert [m["role"] for m in retried] == ["system", "user"]
    assert retried[1]["content"].endswith("SUMMARY of it.\n\nSecond question")


def test_a_rejection_that_compaction_cannot_help_fails_the_turn_readably(
    heron, fake_llm, workspace
):
    fake_llm.script(error(400, "maximum context length exceeded", code="context_length_exceeded"))
    client = heron()
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "x" * 100)
    assert "context length" in err.value.message


# -- text the store cannot take, odd ids -----------------------------------------------------


def raw_request(client, rid: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request written as JSON with ASCII escapes, so that it can carry half a surrogate
    pair, as some clients' JSON does."""
    message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    client.send_raw(json.dumps(message).encode() + b"\n")
    return client.next_response_for(rid)


def test_one_unencodable_string_does_not_switch_the_store_off(heron, fake_llm, workspace):
    # A file name that is not UTF-8, listed by the model...
    Path(os.fsdecode(os.path.join(os.fsencode(workspace), b"caf\xe9.txt"))).write_text("x")
    fake_llm.script(
        tool_calls(Call("list_directory", {"path": "."}, id="ls")),
        text("Listed."),
        text("Half an emoji."),
        text("Still saving."),
    )
    client = heron()
    listed_here = client.new_session(workspace)
    assert client.prompt(listed_here, "What is here?")["stopReason"] == "end_turn"
    # ... half a surrogate pair in a prompt ...
    half = client.new_session(workspace)
    answer = raw_request(
        client,
        "half",
        "session/prompt",
        {"sessionId": half, "prompt": [{"type": "text", "text": "smile \ud83d please"}]},
    )
    assert answer["result"]["stopReason"] == "end_turn"
    # ... and a session/delete with such an id: refused, nothing is written for it.
    refused = raw_request(client, "odd", "session/delete", {"sessionId": "sess_\udc80"})
    assert refused["error"]["code"] == -32602
    # The model read the file name as text it can use, and got the prompt, repaired.
    read = json.dumps(fake_llm.requests[1].body["messages"], ensure_ascii=False)
    assert "caf\ufffd.txt" in read
    assert fake_llm.requests[2].body["messages"][-1]["content"] == "smile \ufffd please"
    # Every session goes on being saved.
    later = client.new_session(workspace)
    assert client.prompt(later, "after all that")["stopReason"] == "end_turn"
    stop(client)
    assert "will not be saved" not in client.stderr and "not being saved" not in client.stderr

    again = heron()
    titles = {s["sessionId"]: s.get("title") for s in again.request("session/list", {})["sessions"]}
    assert titles == {
        listed_here: "What is here?",
        half: "smile \ufffd please",
        later: "after all that",
    }
    load = again.request_async("session/load", restore_params(listed_here, workspace))
    load.result()
    calls = [u for u in load.updates() if u["sessionUpdate"] == "tool_call"]
    assert calls[0]["status"] == "completed"
    assert "caf\ufffd.txt" in json.dumps(calls[0], ensure_ascii=False)


# -- one session, two processes --------------------------------------------------------------


def test_a_session_deleted_by_another_process_stays_deleted(heron, fake_llm, workspace):
    fake_llm.script(text("one"), text("two"), text("three"))
    live = heron()
    session_id = live.new_session(workspace)
    assert live.prompt(session_id, "first")["stopReason"] == "end_turn"
    other = heron()
    assert other.request("session/delete", {"sessionId": session_id}) == {}
    # The live process is told once, in the chat, and keeps working, without saving it again.
    turns = [live.prompt(session_id, words)["updates"] for words in ("second", "third")]
    said = ["".join(u["content"].get("text", "") for u in t if "content" in u) for t in turns]
    assert sum(s.count("deleted by another Heron process") for s in said) == 1
    assert said[1].endswith("three")
    stop(live)
    assert other.request("session/list", {}) == {"sessions": []}
    with pytest.raises(RpcError):
        other.request("session/load", restore_params(session_id, workspace))


# -- a store that refuses a write ------------------------------------------------------------

# Runs `heron` with a file size limit (`ulimit -f`): a write beyond it fails with EFBIG.
WITH_FILE_SIZE_LIMIT = (
    "import os, resource, sys; "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]),) * 2); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def test_a_write_beyond_the_file_size_limit_names_its_cause_and_fails_alone(
    fake_llm, workspace, heron_home, tmp_path
):
    limit = 1 << 20
    client = AcpClient(workspace)
    client.start(
        [sys.executable, "-c", WITH_FILE_SIZE_LIMIT, str(limit), _heron_executable()],
        env=heron_env(fake_llm, heron_home, None),
        cwd=str(tmp_path),
    )
    try:
        client.initialize(DEFAULT_CAPABILITIES)
        fake_llm.script(text("big one"), text("small one"), text("small two"))
        big = client.new_session(workspace)
        huge = "x" * (limit + limit // 2)
        turn = client.prompt(big, f"Keep this: {huge}")
        said = "".join(
            u["content"]["text"]
            for u in turn["updates"]
            if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert "not being saved" in said and "file is too large" in said
        assert "rollback" not in said and "big one" in said
        # The other sessions are still saved.
        small = client.new_session(workspace)
        for words in ("small talk", "more small talk"):
            assert client.prompt(small, words)["stopReason"] == "end_turn"
        listed = {
            s["sessionId"]: s.get("title") for s in client.request("session/list", {})["sessions"]
        }
        assert listed == {big: None, small: "small talk"}
        load = client.request_async("session/load", restore_params(small, workspace))
        load.result()
        users = [u for u in load.updates() if u["sessionUpdate"] == "user_message_chunk"]
        assert [u["content"]["text"] for u in users] == ["small talk", "more small talk"]
        client.close_stdin()
        assert client.wait_exit(10) == 0
    finally:
        client.kill()
    client.assert_clean()


def test_a_loaded_session_keeps_its_first_day_in_the_system_prompt(
    heron, fake_llm, workspace, heron_home
):
    fake_llm.script(text("one"), text("two"))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    client.kill()
    conn = sqlite3.connect(store_path(heron_home), timeout=10)
    with conn:  # as if the session began on another day
        conn.execute(
            "UPDATE sessions SET created_at = '2024-02-03T12:00:00.000000Z' WHERE id = ?",
            (session_id,),
        )
    conn.close()
    again = heron()
    again.request("session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []})
    again.prompt(session_id, "and now?")
    first, last = (r.body["messages"][0]["content"] for r in fake_llm.requests)
    assert "2024-02-03" in last and "2024-02-03" not in first
