"""/undo and the file tools never write over what the user typed (issue 21, section 1).

- A turn edits a file twice and the user changes it in between (on disk, or in the editor's
  unsaved buffer): /undo takes back the turn's writes one at a time, newest first, and stops at
  the user's change, which stays; the file is named in the answer.
- A file the turn left that changed since (even back to one of the turn's own earlier texts)
  is left as it is: only the text the turn wrote last is reverted.
- An unsaved editor buffer of a file that is not on disk is user data: write_file over it is an
  overwrite (title, question, diff, the read-first rule), and /undo of a delete never writes
  over such a buffer once the user typed into it.

The real `heron` over its pipes, the fake model and the test editor (tests/acp_client.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls
from undo_helpers import diffs, final, undo

FULL = ("--mode", "full-access")
FS_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
NO_FS = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}


def edit(path: str, old: str, new: str, call_id: str | None = None) -> Call:
    return Call("edit_file", {"path": path, "old_string": old, "new_string": new}, id=call_id)


def tool_result(fake_llm, call_id: str) -> str:
    for request in reversed(fake_llm.requests):
        for m in request.body["messages"]:
            if m["role"] == "tool" and m["tool_call_id"] == call_id:
                return m["content"]
    raise AssertionError(f"no tool result for {call_id}")


# -- /undo between a turn's edits --------------------------------------------------------------


@pytest.mark.parametrize("where", ["disk", "editor"])
def test_a_line_the_user_typed_between_two_edits_of_a_turn_survives_undo(
    heron, fake_llm, workspace, where
):
    a = Path(workspace, "a.txt")
    a.write_text("one\ntwo\n")
    client = heron(*FULL, client_capabilities=FS_CAPS if where == "editor" else NO_FS)
    sid = client.new_session(workspace)
    typed = "ONE\ntwo\nthe user's line\n"

    def user_types_then_second_edit(body: dict[str, Any]) -> Any:
        # The first edit is done (the model is asked again only after its result).
        if where == "disk":
            a.write_text(typed)
        else:
            client.buffers[str(a)] = typed  # unsaved, in the editor only
        return tool_calls(edit("a.txt", "two", "TWO"))

    fake_llm.script(
        tool_calls(edit("a.txt", "one", "ONE")), user_types_then_second_edit, text("done")
    )
    assert client.prompt(sid, "change things")["stopReason"] == "end_turn"
    now = a.read_text() if where == "disk" else client.buffers[str(a)]
    assert now == "ONE\nTWO\nthe user's line\n"

    message, calls = undo(fake_llm, client, sid)
    now = a.read_text() if where == "disk" else client.buffers[str(a)]
    # The second edit is taken back; the first stays, since taking it back would need the
    # text from before the user's change: the user's line is never erased.
    assert now == typed
    assert "a.txt changed" in message and "not reverted" in message
    assert diffs(final(calls)) == [
        {"type": "diff", "path": str(a), "oldText": "ONE\nTWO\nthe user's line\n", "newText": typed}
    ]
    # Nothing is left to take back: a second /undo does not touch the user's text either.
    message, _ = undo(fake_llm, client, sid)
    assert message.startswith("Nothing to undo")
    assert (a.read_text() if where == "disk" else client.buffers[str(a)]) == typed


def test_only_the_text_the_turn_wrote_last_is_reverted(heron, fake_llm, workspace):
    """A file set back (by the user) to an intermediate text of the turn is the user's
    choice: /undo compares with the turn's last write and leaves it."""
    a = Path(workspace, "a.txt")
    a.write_text("v1\n")
    client = heron(*FULL)
    sid = client.new_session(workspace)

    def user_changes(body: dict[str, Any]) -> Any:
        a.write_text("v2 user\n")
        return tool_calls(edit("a.txt", "v2 user", "v3"))

    fake_llm.script(tool_calls(edit("a.txt", "v1", "v2")), user_changes, text("done"))
    client.prompt(sid, "change things")
    assert a.read_text() == "v3\n"
    a.write_text("v2\n")  # what the turn's first edit wrote, not what it left
    message, _ = undo(fake_llm, client, sid)
    assert a.read_text() == "v2\n"
    assert "a.txt changed since the turn; not reverted" in message


def test_two_edits_in_a_row_still_go_back_together_in_one_write(heron, fake_llm, workspace):
    a = Path(workspace, "a.txt")
    a.write_text("x = 1\n")
    client = heron(*FULL, client_capabilities=FS_CAPS)
    sid = client.new_session(workspace)
    fake_llm.script(
        tool_calls(edit("a.txt", "x = 1", "x = 2")),
        tool_calls(edit("a.txt", "x = 2", "x = 3")),
        text("done"),
    )
    client.prompt(sid, "change things")
    writes = len(client.fs_writes)
    message, calls = undo(fake_llm, client, sid)
    assert a.read_text() == "x = 1\n"
    assert client.fs_writes[writes:] == [(str(a), "x = 1\n")]
    assert diffs(final(calls)) == [
        {"type": "diff", "path": str(a), "oldText": "x = 3\n", "newText": "x = 1\n"}
    ]
    assert "not reverted" not in message


# -- unsaved buffers of files not on disk -----------------------------------------------------


@pytest.mark.parametrize("mode", ["ask", "accept-edits"])
def test_write_file_over_an_unsaved_buffer_not_on_disk_is_an_overwrite(
    heron, fake_llm, workspace, mode
):
    path = Path(workspace, "draft.md")  # never saved: only the editor has it
    client = heron("--mode", mode, client_capabilities=FS_CAPS)
    client.buffers[str(path)] = "the user's unsaved draft\n"
    sid = client.new_session(workspace)
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "draft.md", "content": "model\n"}, id="w")),
        text("done"),
    )
    turn = client.prompt(sid, "write it")
    assert turn["stopReason"] == "end_turn"
    assert client.buffers[str(path)] == "the user's unsaved draft\n"
    assert not path.exists()
    assert "not read it" in tool_result(fake_llm, "w")
    shown = final([u for u in turn["updates"] if u.get("toolCallId") == "w"])
    assert shown["status"] == "failed"
    assert shown["title"].startswith("Write draft.md"), shown["title"]
    # Refused before the question (issue 27): the user is not asked to approve a write that
    # would not happen. The editor still sees the diff against the buffer.
    assert [r for r in client.agent_requests if r.method == "session/request_permission"] == []
    described = [u for u in turn["updates"] if u.get("toolCallId") == "w" and u.get("content")]
    assert diffs(described[0]) == [
        {
            "type": "diff",
            "path": str(path),
            "oldText": "the user's unsaved draft\n",
            "newText": "model\n",
        }
    ]

    # Read first, and it is an ordinary overwrite, shown against the buffer.
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "draft.md"}, id="r")),
        tool_calls(Call("write_file", {"path": "draft.md", "content": "model\n"}, id="w2")),
        text("done"),
    )
    turn = client.prompt(sid, "read, then write it")
    assert client.buffers[str(path)] == "model\n"
    assert tool_result(fake_llm, "w2").startswith("Wrote draft.md")
    shown = final([u for u in turn["updates"] if u.get("toolCallId") == "w2"])
    assert diffs(shown)[0]["oldText"] == "the user's unsaved draft\n"


def test_undo_of_a_delete_never_writes_over_a_buffer_the_user_typed_into(
    heron, fake_llm, workspace
):
    ws = Path(workspace)
    typed, kept = ws / "typed.txt", ws / "kept.txt"
    typed.write_text("typed before\n")
    kept.write_text("kept before\n")
    client = heron(*FULL, client_capabilities=FS_CAPS)
    sid = client.new_session(workspace)
    fake_llm.script(
        tool_calls(
            Call("delete_path", {"path": "typed.txt"}), Call("delete_path", {"path": "kept.txt"})
        ),
        text("done"),
    )
    client.prompt(sid, "delete them")
    assert not typed.exists() and not kept.exists()
    # The editor kept both open: one as it was, one the user typed into (unsaved).
    client.buffers[str(kept)] = "kept before\n"
    client.buffers[str(typed)] = "typed before\nand the user's new line\n"
    writes = len(client.fs_writes)
    message, calls = undo(fake_llm, client, sid)
    assert client.buffers[str(typed)] == "typed before\nand the user's new line\n"
    assert not typed.exists()
    assert "typed.txt" in message and "not re-created" in message
    # The untouched buffer holds just what was deleted: re-creating it loses nothing.
    assert kept.read_text() == "kept before\n"
    assert [p for p, _ in client.fs_writes[writes:]] == [str(kept)]
    assert final(calls)["status"] == "completed"


def test_an_editor_answering_empty_text_for_missing_files_still_creates_them(
    heron, fake_llm, workspace
):
    """Some clients answer fs/read_text_file for a missing file with "" instead of an error:
    an empty buffer of a file not on disk holds nothing to keep, so the file is new."""
    path = Path(workspace, "new.txt")
    client = heron(*FULL, client_capabilities=FS_CAPS)
    served = client.handlers["fs/read_text_file"]

    def empty_for_missing(params: dict[str, Any]) -> Any:
        if not Path(params["path"]).exists() and params["path"] not in client.buffers:
            return {"content": ""}
        return served(params)

    client.handlers["fs/read_text_file"] = empty_for_missing
    sid = client.new_session(workspace)
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "new.txt", "content": "hi\n"}, id="w")),
        text("done"),
    )
    turn = client.prompt(sid, "write it")
    assert tool_result(fake_llm, "w").startswith("Created new.txt")
    assert path.read_text() == "hi\n"
    shown = final([u for u in turn["updates"] if u.get("toolCallId") == "w"])
    assert shown["title"].startswith("Create new.txt")


def test_move_path_never_moves_over_an_unsaved_buffer_not_on_disk(heron, fake_llm, workspace):
    src, dst = Path(workspace, "src.txt"), Path(workspace, "draft.txt")
    src.write_text("the agent's file\n")
    client = heron(*FULL, client_capabilities=FS_CAPS)
    client.buffers[str(dst)] = "the user's unsaved draft\n"
    sid = client.new_session(workspace)
    fake_llm.script(
        tool_calls(Call("move_path", {"source": "src.txt", "destination": "draft.txt"}, id="m")),
        text("done"),
    )
    client.prompt(sid, "move it")
    assert "unsaved text" in tool_result(fake_llm, "m")
    assert src.read_text() == "the agent's file\n" and not dst.exists()
    assert client.buffers[str(dst)] == "the user's unsaved draft\n"
