"""/undo: each one reverts the newest turn whose file changes are not undone yet.

Every test drives the real `heron` over its pipes against the fake model; every message is
schema-checked by the harness. /undo never asks the model: the fake gets no request for it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Any

from fake_openai import Call, text, tool_calls
from undo_helpers import diffs, final, undo

FULL = ("--mode", "full-access")
FS_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}


def edit(path: str, old: str, new: str, call_id: str | None = None) -> Call:
    return Call("edit_file", {"path": path, "old_string": old, "new_string": new}, id=call_id)


def turn(fake_llm, client, session_id: str, *calls: Call) -> dict[str, Any]:
    """One agent turn that makes `calls` (in one response) and then says done."""
    fake_llm.script(tool_calls(*calls), text("done"))
    result = client.prompt(session_id, "change things")
    assert result["stopReason"] == "end_turn"
    return result


def stop(client) -> None:
    client.close_stdin()
    assert client.wait_exit(10) == 0


# -- reverting turns, newest first ---------------------------------------------------------


def test_each_undo_reverts_one_turn_newest_first(heron, fake_llm, workspace):
    app, new = Path(workspace, "app.py"), Path(workspace, "docs", "new.md")
    app.write_text("v = 1\n")
    os.chmod(app, 0o640)
    client = heron(*FULL)
    sid = client.new_session(workspace)
    turn(
        fake_llm,
        client,
        sid,
        edit("app.py", "v = 1", "v = 2"),
        Call("write_file", {"path": "docs/new.md", "content": "# New\n"}),
    )
    turn(fake_llm, client, sid, edit("app.py", "v = 2", "v = 3"), edit("app.py", "v = 3", "v = 4"))
    assert app.read_text() == "v = 4\n"

    message, calls = undo(fake_llm, client, sid)
    assert app.read_text() == "v = 2\n"  # only the second turn (both of its edits) went back
    assert new.read_text() == "# New\n"
    call = final(calls)
    assert calls[0]["sessionUpdate"] == "tool_call"
    assert call["kind"] == "edit" and call["status"] == "completed"
    assert diffs(call) == [
        {"type": "diff", "path": str(app), "oldText": "v = 4\n", "newText": "v = 2\n"}
    ]
    assert "app.py" in message and "/undo again" in message

    message, calls = undo(fake_llm, client, sid)
    assert app.read_text() == "v = 1\n"
    assert stat.S_IMODE(app.stat().st_mode) == 0o640  # the file kept its mode
    assert not new.exists() and not new.parent.exists()  # created file (and folder) gone
    assert {d["path"] for d in diffs(final(calls))} == {str(app), str(new)}
    assert "/undo again" not in message

    message, calls = undo(fake_llm, client, sid)
    assert calls == []
    assert message.startswith("Nothing to undo")
    assert app.read_text() == "v = 1\n"


def test_undo_history_comes_back_in_a_new_process(heron, fake_llm, workspace):
    ws = Path(workspace)
    (ws / "app.py").write_text("old\n")
    (ws / "gone.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(ws / "gone.sh", 0o751)
    (ws / "blob.bin").write_bytes(b"\x00\x01\xff binary")
    (ws / "link").symlink_to("app.py")
    (ws / "dir" / "sub").mkdir(parents=True)
    (ws / "dir" / "sub" / "x.txt").write_text("x\n")
    (ws / "from.txt").write_text("moving\n")
    live = heron(*FULL)
    sid = live.new_session(workspace)
    turn(
        fake_llm,
        live,
        sid,
        edit("app.py", "old", "new"),
        Call("delete_path", {"path": "gone.sh"}),
        Call("delete_path", {"path": "blob.bin"}),
        Call("delete_path", {"path": "link"}),
        Call("delete_path", {"path": "dir"}),
        Call("move_path", {"source": "from.txt", "destination": "to/moved.txt"}),
    )
    assert not (ws / "gone.sh").exists() and not (ws / "dir").exists()
    stop(live)

    fresh = heron(*FULL)
    fresh.request("session/load", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
    message, calls = undo(fake_llm, fresh, sid)
    assert final(calls)["status"] == "completed", message
    assert (ws / "app.py").read_text() == "old\n"
    assert (ws / "gone.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert stat.S_IMODE((ws / "gone.sh").stat().st_mode) == 0o751
    assert (ws / "blob.bin").read_bytes() == b"\x00\x01\xff binary"
    assert os.readlink(ws / "link") == "app.py"
    assert (ws / "dir" / "sub" / "x.txt").read_text() == "x\n"
    assert (ws / "from.txt").read_text() == "moving\n"
    assert not (ws / "to").exists()
    assert {
        "type": "diff",
        "path": str(ws / "gone.sh"),
        "oldText": None,
        "newText": "#!/bin/sh\necho hi\n",
    } in diffs(final(calls))
    stop(fresh)

    # ... and that the turn was undone is saved too: a third process has nothing left to undo
    third = heron(*FULL)
    third.request("session/resume", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
    message, calls = undo(fake_llm, third, sid)
    assert message.startswith("Nothing to undo") and calls == []


# -- never losing anyone's edit --------------------------------------------------------------


def test_a_file_changed_since_is_reported_and_kept_and_the_rest_reverted(
    heron, fake_llm, workspace
):
    a, b, c = (Path(workspace, n) for n in ("a.txt", "b.txt", "c.txt"))
    a.write_text("a1\n")
    b.write_text("b1\n")
    client = heron(*FULL)
    sid = client.new_session(workspace)
    turn(
        fake_llm,
        client,
        sid,
        edit("a.txt", "a1", "a2"),
        edit("b.txt", "b1", "b2"),
        Call("write_file", {"path": "c.txt", "content": "agent\n"}),
    )
    b.write_text("b2\nthe user's line\n")  # the user edits after the turn
    c.write_text("user took over\n")
    message, calls = undo(fake_llm, client, sid)
    assert a.read_text() == "a1\n"
    assert b.read_text() == "b2\nthe user's line\n"  # not overwritten
    assert c.read_text() == "user took over\n"  # not deleted
    assert "b.txt changed since" in message and "c.txt changed since" in message
    call = final(calls)
    assert [d["path"] for d in diffs(call)] == [str(a)]
    texts = [x["content"]["text"] for x in call["content"] if x["type"] == "content"]
    assert any("b.txt changed since" in t for t in texts)
    # The model is told what happened, in its next request.
    fake_llm.script(text("ok"))
    client.prompt(sid, "next")
    told = [m for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user"]
    assert any("/undo" in m["content"] and "b.txt changed since" in m["content"] for m in told)


def test_a_path_taken_again_is_not_overwritten_by_a_restore_or_move_back(
    heron, fake_llm, workspace
):
    ws = Path(workspace)
    (ws / "del.txt").write_text("old\n")
    (ws / "src.txt").write_text("src\n")
    client = heron(*FULL)
    sid = client.new_session(workspace)
    turn(
        fake_llm,
        client,
        sid,
        Call("delete_path", {"path": "del.txt"}),
        Call("move_path", {"source": "src.txt", "destination": "dst.txt"}),
    )
    (ws / "del.txt").write_text("the user's new file\n")
    (ws / "src.txt").write_text("the user's src\n")
    message, _ = undo(fake_llm, client, sid)
    assert (ws / "del.txt").read_text() == "the user's new file\n"
    assert (ws / "src.txt").read_text() == "the user's src\n"
    assert (ws / "dst.txt").read_text() == "src\n"
    assert "del.txt exists again" in message and "src.txt exists again" in message


def test_a_file_too_big_to_keep_is_said_and_the_rest_reverted(heron, fake_llm, workspace):
    ws = Path(workspace)
    (ws / "big.txt").write_text("x" * (1 << 20) + "more\n")
    (ws / "small.txt").write_text("small\n")
    client = heron(*FULL)
    sid = client.new_session(workspace)
    turn(
        fake_llm,
        client,
        sid,
        Call("delete_path", {"path": "big.txt"}),
        Call("delete_path", {"path": "small.txt"}),
    )
    message, _ = undo(fake_llm, client, sid)
    assert (ws / "small.txt").read_text() == "small\n"
    assert not (ws / "big.txt").exists()
    assert "big.txt was not re-created: it was too big to keep" in message


# -- permission --------------------------------------------------------------------------------


def test_ask_mode_asks_and_a_rejection_leaves_every_file_as_it_is(heron, fake_llm, workspace):
    a = Path(workspace, "a.txt")
    a.write_text("one\n")
    client = heron()  # ask mode; the harness allows once by default
    sid = client.new_session(workspace)
    turn(fake_llm, client, sid, edit("a.txt", "one", "two"))
    asked = len([r for r in client.agent_requests if r.method == "session/request_permission"])

    client.permission = "reject_once"
    message, calls = undo(fake_llm, client, sid)
    questions = [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert len(questions) == asked + 1
    question = questions[-1].params["toolCall"]
    assert question["kind"] == "edit"
    assert question["content"] == [
        {"type": "diff", "path": str(a), "oldText": "two\n", "newText": "one\n"}
    ]
    assert a.read_text() == "two\n"
    assert final(calls)["status"] == "failed"
    assert message.startswith("Nothing was undone") and "rejected" in message

    client.permission = "allow_once"  # the turn is still there to undo
    undo(fake_llm, client, sid)
    assert a.read_text() == "one\n"


def test_accept_edits_mode_undoes_without_asking(heron, fake_llm, workspace):
    a = Path(workspace, "a.txt")
    a.write_text("one\n")
    client = heron("--mode", "accept-edits")
    sid = client.new_session(workspace)
    turn(fake_llm, client, sid, edit("a.txt", "one", "two"))
    undo(fake_llm, client, sid)
    assert a.read_text() == "one\n"
    assert not [r for r in client.agent_requests if r.method == "session/request_permission"]


def test_read_only_mode_refuses_to_undo(heron, fake_llm, workspace, heron_home):
    a = Path(workspace, "a.txt")
    a.write_text("one\n")
    client = heron(*FULL)
    sid = client.new_session(workspace)
    turn(fake_llm, client, sid, edit("a.txt", "one", "two"))
    stop(client)
    # No mode picker yet: the stored session's mode says read-only.
    db = heron_home / ".local" / "share" / "heron" / "sessions.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET mode = 'read-only' WHERE id = ?", (sid,))
    conn.close()
    reader = heron()
    reader.request("session/resume", {"sessionId": sid, "cwd": workspace, "mcpServers": []})
    message, calls = undo(fake_llm, reader, sid)
    assert message.startswith("Nothing was undone") and "read-only" in message
    assert final(calls)["status"] == "failed"
    assert a.read_text() == "two\n"


# -- through the editor ------------------------------------------------------------------------


def test_with_the_editors_fs_undo_writes_through_it(heron, fake_llm, workspace):
    a, b = Path(workspace, "a.txt"), Path(workspace, "b.txt")
    a.write_text("on disk\n")
    client = heron(*FULL, client_capabilities=FS_CAPS)
    client.buffers[str(a)] = "unsaved buffer\n"
    sid = client.new_session(workspace)
    c = Path(workspace, "c.txt")
    c.write_text("c on disk\n")
    client.buffers[str(c)] = "c buffer\n"
    turn(
        fake_llm,
        client,
        sid,
        edit("a.txt", "unsaved", "edited"),
        Call("write_file", {"path": "b.txt", "content": "new\n"}),
        edit("c.txt", "c buffer", "c by the agent"),
    )
    assert client.buffers[str(a)] == "edited buffer\n"
    client.buffers[str(c)] = "c by the agent\nand the user typing, unsaved\n"
    writes = len(client.fs_writes)
    message, calls = undo(fake_llm, client, sid)
    assert client.fs_writes[writes:] == [(str(a), "unsaved buffer\n")]  # the buffer, through fs
    assert client.buffers[str(a)] == "unsaved buffer\n"
    assert not b.exists()  # ACP cannot delete: the disk
    assert {d["path"] for d in diffs(final(calls))} == {str(a), str(b)}
    # The user's unsaved typing in the editor counts as a change: c.txt is left alone.
    assert client.buffers[str(c)] == "c by the agent\nand the user typing, unsaved\n"
    assert "c.txt changed since" in message


# -- shell commands ----------------------------------------------------------------------------


def test_a_turn_that_ran_commands_says_their_changes_are_not_tracked(heron, fake_llm, workspace):
    a, out = Path(workspace, "a.txt"), Path(workspace, "out.txt")
    a.write_text("one\n")
    client = heron(*FULL)
    sid = client.new_session(workspace)
    turn(
        fake_llm,
        client,
        sid,
        edit("a.txt", "one", "two"),
        Call("bash", {"command": "echo made > out.txt"}),
    )
    assert out.exists()
    message, _ = undo(fake_llm, client, sid)
    assert a.read_text() == "one\n"
    assert out.read_text() == "made\n"  # not tracked, not touched
    assert "shell commands" in message and "not tracked" in message


def test_commands_in_a_later_turn_are_mentioned_when_an_earlier_one_is_undone(
    heron, fake_llm, workspace
):
    a = Path(workspace, "a.txt")
    a.write_text("one\n")
    client = heron(*FULL)
    sid = client.new_session(workspace)
    turn(fake_llm, client, sid, edit("a.txt", "one", "two"))
    turn(fake_llm, client, sid, Call("bash", {"command": "true"}))
    message, _ = undo(fake_llm, client, sid)
    assert a.read_text() == "one\n"
    assert "Later turns ran shell commands" in message


def test_a_file_changed_while_permission_is_asked_is_not_overwritten(heron, fake_llm, workspace):
    a, b = Path(workspace, "a.txt"), Path(workspace, "b.txt")
    a.write_text("a1\n")
    b.write_text("b1\n")
    client = heron()
    sid = client.new_session(workspace)
    turn(fake_llm, client, sid, edit("a.txt", "a1", "a2"), edit("b.txt", "b1", "b2"))

    def user_saves_then_allows(params: dict[str, Any]) -> dict[str, Any]:
        b.write_text("b2 and the user's edit\n")  # after the preview, before the answer
        return {"outcome": "selected", "optionId": "allow_once"}

    client.permission = user_saves_then_allows
    message, calls = undo(fake_llm, client, sid)
    assert b.read_text() == "b2 and the user's edit\n"
    assert a.read_text() == "a1\n"
    assert "b.txt changed since" in message
    assert [d["path"] for d in diffs(final(calls))] == [str(a)]


# -- combinations within one turn --------------------------------------------------------------


def test_a_folder_moved_then_edited_inside_goes_back_in_one_undo(heron, fake_llm, workspace):
    ws = Path(workspace)
    (ws / "pkg").mkdir()
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "pkg" / "keep.py").write_text("keep\n")
    (ws / "blob.bin").write_bytes(b"\x00\xfe binary\n")
    client = heron()  # ask: the question shows what will happen, computed without writing
    sid = client.new_session(workspace)
    turn(
        fake_llm,
        client,
        sid,
        edit("pkg/mod.py", "x = 1", "x = 2"),
        Call("move_path", {"source": "pkg", "destination": "lib/pkg2"}),
        edit("lib/pkg2/mod.py", "x = 2", "x = 3"),
        Call("write_file", {"path": "blob.bin", "content": "text now\n", "overwrite_binary": True}),
    )
    assert (ws / "lib" / "pkg2" / "mod.py").read_text() == "x = 3\n"
    asked = len(client.agent_requests)
    message, calls = undo(fake_llm, client, sid)
    question = next(
        r for r in client.agent_requests[asked:] if r.method == "session/request_permission"
    )
    shown = question.params["toolCall"]["content"]
    texts = [c["content"]["text"] for c in shown if c["type"] == "content"]
    assert "changed since" not in " ".join(texts), texts  # the preview followed the move back
    assert {
        "type": "diff",
        "path": str(ws / "pkg" / "mod.py"),
        "oldText": "x = 2\n",
        "newText": "x = 1\n",
    } in shown
    assert (ws / "pkg" / "mod.py").read_text() == "x = 1\n", message
    assert (ws / "pkg" / "keep.py").read_text() == "keep\n"
    assert not (ws / "lib").exists()
    assert (ws / "blob.bin").read_bytes() == b"\x00\xfe binary\n"
    assert final(calls)["status"] == "completed"


def test_cancel_while_undo_asks_changes_nothing_and_the_turn_stays_undoable(
    heron, fake_llm, workspace
):
    a = Path(workspace, "a.txt")
    a.write_text("one\n")
    client = heron()
    sid = client.new_session(workspace)
    turn(fake_llm, client, sid, edit("a.txt", "one", "two"))
    client.permission_gate = threading.Event()  # the question stays open
    asked = len(client.agent_requests)
    pending = client.prompt_async(sid, "/undo")
    deadline = time.monotonic() + 10
    while not any(r.method == "session/request_permission" for r in client.agent_requests[asked:]):
        assert time.monotonic() < deadline, "/undo did not ask"
        time.sleep(0.05)
    client.cancel(sid)
    assert pending.result(10) == {"stopReason": "cancelled"}
    assert a.read_text() == "two\n"
    client.permission_gate = None
    undo(fake_llm, client, sid)
    assert a.read_text() == "one\n"


def test_when_nothing_can_be_reverted_nothing_is_asked_and_the_next_undo_moves_on(
    heron, fake_llm, workspace
):
    a, b = Path(workspace, "a.txt"), Path(workspace, "b.txt")
    a.write_text("a1\n")
    b.write_text("b1\n")
    client = heron()  # ask mode
    sid = client.new_session(workspace)
    turn(fake_llm, client, sid, edit("a.txt", "a1", "a2"))
    turn(fake_llm, client, sid, edit("b.txt", "b1", "b2"))
    b.write_text("the user's b\n")
    asked = len(client.agent_requests)
    message, calls = undo(fake_llm, client, sid)
    assert not [r for r in client.agent_requests[asked:] if r.method.startswith("session/req")]
    assert b.read_text() == "the user's b\n"
    assert "b.txt changed since" in message and "/undo again" in message
    assert final(calls)["status"] == "failed"
    undo(fake_llm, client, sid)
    assert a.read_text() == "a1\n"
    assert b.read_text() == "the user's b\n"
