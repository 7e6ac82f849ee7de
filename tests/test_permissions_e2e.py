"""Permissions end to end: what each mode asks, refuses or runs, and each answer of the editor.

The real `heron` executable, a scripted model and the test editor of `acp_client`; helpers are
shared with `test_tools_e2e.py`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls
from test_tools_e2e import (
    assert_lifecycle,
    client_methods,
    for_call,
    last,
    run_turn,
    statuses,
    texts,
    tool_result,
    tool_results,
)

ASK = ("--mode", "ask")
REJECTED = "Rejected by the user: the call was not run. Do not retry it; ask or take another way."


def asked(client: Any) -> list[dict[str, Any]]:
    """The `session/request_permission` params the agent sent, in order."""
    return [r.params for r in client.agent_requests if r.method == "session/request_permission"]


def asked_ids(client: Any) -> list[str]:
    return [p["toolCall"]["toolCallId"] for p in asked(client)]


def bash(command: str, call_id: str) -> Any:
    return tool_calls(Call("bash", {"command": command}, id=call_id))


def allow_always_if_offered(params: dict[str, Any]) -> dict[str, Any]:
    kinds = {o["kind"]: o["optionId"] for o in params["options"]}
    return {"outcome": "selected", "optionId": kinds.get("allow_always", kinds["allow_once"])}


def edit(path: str, old: str, new: str, call_id: str) -> Call:
    return Call("edit_file", {"path": path, "old_string": old, "new_string": new}, id=call_id)


# -------------------------------------------------------------------------- 2. diff before asking


@pytest.mark.parametrize(
    ("tool", "args", "before", "title"),
    [
        ("edit_file", {"path": "app.py", "old_string": "1", "new_string": "2"}, "x = 1\n", "Edit"),
        ("write_file", {"path": "app.py", "content": "x = 2\n"}, None, "Create"),
    ],
)
def test_the_diff_is_shown_before_permission_and_written_only_after_allow(
    heron, fake_llm, workspace, tool, args, before, title
):
    path = Path(workspace, "app.py")
    if before is not None:
        path.write_text(before)
    diff = {"type": "diff", "path": str(path), "oldText": before, "newText": "x = 2\n"}
    fake_llm.script(tool_calls(Call(tool, args, id="c")), text("ok"))
    client = heron(*ASK)
    seen_when_asked: list[Any] = []

    def look_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        # Everything the agent sent before this request has been read by now.
        shown = [u.get("content") for u in for_call(client.updates(), "c")]
        seen_when_asked.append((shown, path.read_text() if path.exists() else None))
        return {"outcome": "selected", "optionId": "allow_once"}

    client.permission = look_then_allow
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "go")

    ((shown, on_disk),) = seen_when_asked
    assert [diff] in shown, "the diff was not shown before permission was asked"
    assert on_disk == before, "the file changed before permission was given"
    (request,) = asked(client)
    assert request["sessionId"] == session_id
    assert request["toolCall"] == {
        "toolCallId": "c",
        "title": f"{title} app.py",
        "kind": "edit",
        "status": "pending",
        "content": [diff],
        "locations": [{"path": str(path), "line": 1}],
        "rawInput": args,
    }
    assert [(o["optionId"], o["kind"]) for o in request["options"]] == [
        ("allow_once", "allow_once"),
        ("allow_always", "allow_always"),
        ("reject_once", "reject_once"),
        ("reject_always", "reject_always"),
    ]
    assert statuses(turn["updates"], "c") == ["pending", "in_progress", "completed"]
    assert path.read_text() == "x = 2\n"


# --------------------------------------------------------------------------------- 3. each answer


def test_allow_once_runs_and_asks_again_next_time(heron, fake_llm, workspace):
    client, turn = run_turn(
        heron, fake_llm, workspace, bash("ls", "b1"), bash("ls -a", "b2"), text("ok"), args=ASK
    )
    assert asked_ids(client) == ["b1", "b2"]
    for call_id in ("b1", "b2"):
        assert statuses(turn["updates"], call_id) == ["pending", "in_progress", "completed"]
    assert turn["stopReason"] == "end_turn"


def test_allow_always_remembers_the_command_prefix_for_the_session(heron, fake_llm, workspace):
    Path(workspace, "f.txt").write_text("x")
    fake_llm.script(bash("ls", "b1"), bash("ls -a", "b2"), bash("pwd", "b3"), text("ok"))
    client = heron(*ASK)
    client.permission = "allow_always"
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "go")
    # `ls -a` is the same program as the allowed `ls`; `pwd` is another one
    assert asked_ids(client) == ["b1", "b3"]
    # `ls` is read-only: "always" covers it with any arguments, and says so
    assert [o["name"] for o in asked(client)[0]["options"]][
        1
    ] == "Always allow `ls` (safe options, paths in the workspace)"
    for call_id in ("b1", "b2", "b3"):
        assert statuses(turn["updates"], call_id) == ["pending", "in_progress", "completed"]
    assert tool_result(fake_llm.requests[2], "b2") == "Exit code 0\n.\n..\nf.txt\n"
    # remembered for the rest of the session, not beyond it
    fake_llm.script(bash("ls -l", "b4"), text("ok"))
    client.prompt(session_id, "again")
    assert asked_ids(client) == ["b1", "b3"]
    fake_llm.script(bash("ls", "b5"), text("ok"))
    client.prompt(client.new_session(workspace), "other session")
    assert asked_ids(client) == ["b1", "b3", "b5"]


def test_reject_once_fails_the_call_and_the_turn_goes_on(heron, fake_llm, workspace):
    path = Path(workspace, "a.txt")
    path.write_text("keep me\n")
    change = edit("a.txt", "keep", "lose", "e1")
    again = edit("a.txt", "keep", "lose", "e2")
    fake_llm.script(tool_calls(change), tool_calls(again), text("understood"))
    client = heron(*ASK)
    client.permission = "reject_once"
    turn = client.prompt(client.new_session(workspace), "go")
    assert turn["stopReason"] == "end_turn"
    assert asked_ids(client) == ["e1", "e2"]  # rejecting once is not remembered
    for call_id in ("e1", "e2"):
        assert statuses(turn["updates"], call_id) == ["pending", "failed"]
        # The user reads their own words; the model's instructions stay the model's.
        assert texts(last(turn["updates"], call_id)) == "You rejected this edit; it was not run."
    assert tool_result(fake_llm.requests[1], "e1") == REJECTED
    assert tool_result(fake_llm.requests[2], "e2") == REJECTED
    assert path.read_text() == "keep me\n"


def test_reject_always_refuses_the_same_call_without_asking(heron, fake_llm, workspace):
    fake_llm.script(bash("ls", "b1"), bash("ls -a", "b2"), bash("pwd", "b3"), text("ok"))
    client = heron(*ASK)
    client.permission = "reject_always"
    turn = client.prompt(client.new_session(workspace), "go")
    assert asked_ids(client) == ["b1", "b3"]  # b2 was refused without asking
    for call_id in ("b1", "b2", "b3"):
        assert statuses(turn["updates"], call_id) == ["pending", "failed"]
    assert tool_result(fake_llm.requests[1], "b1") == REJECTED
    assert "always reject" in tool_result(fake_llm.requests[2], "b2")
    assert turn["stopReason"] == "end_turn"


def test_a_cancelled_permission_answer_cancels_the_turn(heron, fake_llm, workspace):
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "new.txt", "content": "x"}, id="w")), text("no")
    )
    client = heron(*ASK)
    client.permission = "cancelled"
    turn = client.prompt(client.new_session(workspace), "go")
    assert turn["stopReason"] == "cancelled"
    assert asked_ids(client) == ["w"]
    assert statuses(turn["updates"], "w") == ["pending", "failed"]
    assert "Cancelled" in texts(last(turn["updates"], "w"))
    assert not Path(workspace, "new.txt").exists()
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("editor_answers", [True, False], ids=["answered", "left-open"])
def test_session_cancel_while_permission_is_pending(heron, fake_llm, workspace, editor_answers):
    path = Path(workspace, "a.txt")
    path.write_text("original\n")
    fake_llm.script(tool_calls(edit("a.txt", "original", "changed", "e")), text("no"))
    client = heron(*ASK)
    client.permission_gate = threading.Event()  # the user has not decided yet
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "go")
    client.wait_for_agent_request("session/request_permission")
    # An editor answers the open question `cancelled`; the agent must not need that answer.
    client.cancel(session_id, answer_pending_permissions=editor_answers)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}
    updates = pending.updates()
    assert statuses(updates, "e") == ["pending", "failed"]
    assert "Cancelled" in texts(last(updates, "e"))
    client.permission_gate.set()  # a late "allow" must not run it either
    # the session goes on, and the model learns the call did not run
    fake_llm.script(text("ok"))
    assert client.prompt(session_id, "next")["stopReason"] == "end_turn"
    assert path.read_text() == "original\n"
    assert tool_result(fake_llm.requests[-1], "e") == "Cancelled by the user."


@pytest.mark.parametrize("switch", ["session/set_mode", "session/set_config_option"])
def test_read_only_picked_while_permission_is_asked_refuses_the_allowed_call(
    heron, fake_llm, workspace, switch
):
    """The mode is checked when the call would run: an "allow" given after the user switched
    to read-only (from the editor's picker) runs nothing."""
    path = Path(workspace, "a.txt")
    path.write_text("original\n")
    fake_llm.script(tool_calls(edit("a.txt", "original", "changed", "e")), text("ok"))
    client = heron(*ASK)
    client.permission_gate = threading.Event()  # the question stays open
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "go")
    client.wait_for_agent_request("session/request_permission")
    if switch == "session/set_mode":
        client.request(switch, {"sessionId": session_id, "modeId": "read-only"})
    else:
        params = {"sessionId": session_id, "configId": "mode", "value": "read-only"}
        client.request(switch, params)
    client.permission_gate.set()  # ... and then the user clicks "allow"
    assert pending.result(timeout=10)["stopReason"] == "end_turn"
    assert statuses(pending.updates(), "e")[-1] == "failed"
    assert path.read_text() == "original\n"
    assert "read-only" in tool_result(fake_llm.requests[1], "e")


# --------------------------------------------------------------------------------------- 4. modes


def test_read_only_refuses_changes_without_asking_but_reads(heron, fake_llm, workspace):
    path = Path(workspace, "a.txt")
    path.write_text("text\n")
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(
            edit("a.txt", "text", "changed", "e"),
            Call("bash", {"command": "touch made-by-bash"}, id="b"),
            Call("fetch", {"url": "http://127.0.0.1:9/page"}, id="f"),
            Call("delete_path", {"path": "a.txt"}, id="d"),
            Call("read_file", {"path": "a.txt"}, id="r"),
        ),
        text("ok"),
        args=("--mode", "read-only"),
    )
    assert asked(client) == []
    for call_id in ("e", "b", "f", "d"):
        assert statuses(turn["updates"], call_id) == ["pending", "failed"]
        reason = tool_result(fake_llm.requests[1], call_id)
        assert "read-only mode" in reason and "Tell the user" in reason  # for the model
        shown = texts(last(turn["updates"], call_id))
        assert shown.startswith("Not run: the session is in read-only mode")
        assert "Tell the user" not in shown
    assert statuses(turn["updates"], "r") == ["pending", "in_progress", "completed"]
    assert tool_result(fake_llm.requests[1], "r") == "     1\ttext"
    assert path.read_text() == "text\n"
    assert sorted(os.listdir(workspace)) == ["a.txt"]


def test_ask_mode_asks_for_edits_and_commands_not_reads(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("one\n")
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(
            Call("read_file", {"path": "a.txt"}, id="r"),
            Call("grep", {"pattern": "one"}, id="g"),
            edit("a.txt", "one", "two", "e"),
            Call("bash", {"command": "cat a.txt"}, id="b"),
        ),
        text("ok"),
        args=(),  # ask is the default
    )
    assert asked_ids(client) == ["e", "b"]
    for call_id in ("r", "g", "e", "b"):
        assert statuses(turn["updates"], call_id) == ["pending", "in_progress", "completed"]
    assert tool_result(fake_llm.requests[1], "b") == "Exit code 0\ntwo\n"


def test_accept_edits_runs_edits_unasked_but_asks_for_commands(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("one\n")
    Path(workspace, "old.txt").write_text("old\n")
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(
            edit("a.txt", "one", "two", "e"),
            Call("write_file", {"path": "sub/new.txt", "content": "new\n"}, id="w"),
            Call("delete_path", {"path": "old.txt"}, id="d"),
            Call("bash", {"command": "echo hi"}, id="b"),
        ),
        text("ok"),
        args=("--mode", "accept-edits"),
    )
    assert asked_ids(client) == ["d", "b"]  # deleting is not an edit
    assert Path(workspace, "a.txt").read_text() == "two\n"
    assert Path(workspace, "sub", "new.txt").read_text() == "new\n"
    assert not Path(workspace, "old.txt").exists()
    for call_id in ("e", "w", "d", "b"):
        assert statuses(turn["updates"], call_id) == ["pending", "in_progress", "completed"]


def test_full_access_asks_nothing(heron, fake_llm, workspace, tmp_path):
    Path(workspace, "a.txt").write_text("one\n")
    outside = tmp_path / "outside.txt"
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(
            edit("a.txt", "one", "two", "e"),
            Call("bash", {"command": "echo hi"}, id="b"),
            Call("write_file", {"path": str(outside), "content": "out\n"}, id="w"),
            Call("delete_path", {"path": "a.txt"}, id="d"),
        ),
        text("ok"),
        args=("--mode", "full-access"),
    )
    assert asked(client) == []
    for call_id in ("e", "b", "w", "d"):
        assert statuses(turn["updates"], call_id) == ["pending", "in_progress", "completed"]
    assert outside.read_text() == "out\n" and not Path(workspace, "a.txt").exists()


@pytest.mark.parametrize(
    ("mode", "tool", "args"),
    [
        ("accept-edits", "write_file", {"path": "{outside}", "content": "x\n"}),
        ("accept-edits", "write_file", {"path": "../outside.txt", "content": "x\n"}),
        ("accept-edits", "edit_file", {"path": "{outside}", "old_string": "o", "new_string": "x"}),
        ("ask", "read_file", {"path": "{outside}"}),
        ("read-only", "read_file", {"path": "{outside}"}),
        ("ask", "list_directory", {"path": "{outside_dir}"}),
        ("ask", "grep", {"pattern": "x", "path": "{outside_dir}"}),
    ],
)
def test_a_path_outside_the_workspace_asks(heron, fake_llm, workspace, tmp_path, mode, tool, args):
    outside = tmp_path / "outside.txt"
    if tool != "write_file":  # over a file it has not read, a write is refused before asking
        outside.write_text("o\n")
    args = {
        k: v.format(outside=outside, outside_dir=tmp_path) if isinstance(v, str) else v
        for k, v in args.items()
    }
    fake_llm.script(tool_calls(Call(tool, args, id="c")), text("ok"))
    client = heron("--mode", mode)
    client.permission = "reject_once"
    turn = client.prompt(client.new_session(workspace), "go")
    assert asked_ids(client) == ["c"]
    assert statuses(turn["updates"], "c") == ["pending", "failed"]
    assert outside.read_text() == "o\n" if tool != "write_file" else not outside.exists()


def test_allow_always_inside_does_not_cover_outside(heron, fake_llm, workspace, tmp_path):
    outside = tmp_path / "outside.txt"
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "a.txt", "content": "two\n"}, id="w1")),
        tool_calls(Call("write_file", {"path": "b.txt", "content": "b\n"}, id="w2")),
        tool_calls(Call("write_file", {"path": str(outside), "content": "x\n"}, id="w3")),
        text("ok"),
    )
    client = heron(*ASK)
    client.permission = allow_always_if_offered
    client.prompt(client.new_session(workspace), "go")
    assert asked_ids(client) == ["w1", "w3"]
    assert outside.read_text() == "x\n"


@pytest.mark.parametrize("tool", ["write_file", "read_file"])
def test_a_symlink_out_of_the_workspace_counts_as_outside(
    heron, fake_llm, workspace, tmp_path, tool
):
    secret_dir = tmp_path / "elsewhere"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text("secret\n")
    Path(workspace, "link").symlink_to(secret_dir)
    if tool == "write_file":  # a new file: over one not read, the write is refused unasked
        call = Call("write_file", {"path": "link/new.txt", "content": "pwned\n"}, id="c")
        mode = "accept-edits"
    else:
        call = Call("read_file", {"path": "link/secret.txt"}, id="c")
        mode = "ask"
    fake_llm.script(tool_calls(call), text("ok"))
    client = heron("--mode", mode)
    client.permission = "reject_once"
    turn = client.prompt(client.new_session(workspace), "go")
    assert asked_ids(client) == ["c"], "a path through a symlink to outside ran unasked"
    assert statuses(turn["updates"], "c") == ["pending", "failed"]
    assert (secret_dir / "secret.txt").read_text() == "secret\n"
    assert not (secret_dir / "new.txt").exists()


def test_ask_mode_permission_requests_carry_the_call(heron, fake_llm, workspace):
    client, turn = run_turn(heron, fake_llm, workspace, bash("echo hi", "b"), text("ok"), args=ASK)
    (request,) = asked(client)
    described = for_call(turn["updates"], "b")[1]
    assert request["toolCall"] == {
        "toolCallId": "b",
        "title": described["title"],
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": "echo hi"},
    }
    assert [o["name"] for o in request["options"]] == [
        "Allow",
        "Always allow `echo` (safe options, paths in the workspace)",
        "Reject",
        "Always reject `echo` (safe options, paths in the workspace)",
    ]
    assert_lifecycle(
        turn["updates"],
        "b",
        name="bash",
        kind="execute",
        title="Run `echo hi`",
        raw_input={"command": "echo hi"},
        locations=None,
    )
    assert client_methods(client) == ["session/request_permission"]
    assert tool_results(fake_llm.requests[1]) == [("b", "Exit code 0\nhi\n")]


def test_always_allow_offered_for_a_path_outside_the_workspace_is_honoured(
    heron, fake_llm, workspace, tmp_path
):
    outside = tmp_path / "outside.txt"
    outside.write_text("o\n")
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("read_file", {"path": str(outside)}, id="r1")),
        tool_calls(Call("read_file", {"path": str(outside)}, id="r2")),
        text("ok"),
        args=ASK,
        permission=allow_always_if_offered,
    )
    assert statuses(turn["updates"], "r2")[-1] == "completed"
    offered = {o["kind"] for o in asked(client)[0]["options"]}
    if "allow_always" in offered:  # a promise to keep; offering only "once" is fine too
        assert asked_ids(client) == ["r1"], "'Always allow' was chosen, yet asked again"
