"""Auto mode's zygote (agent.sandbox.zygote): the one confined process per session that starts
its commands (under bubblewrap where it is installed: Heron's child is then bwrap). What it must
not change: a zygote killed mid-session is replaced and the next command is still confined;
Stop still kills a sandboxed command's whole tree; no zygote or command is left after
session/close, after Heron exits, or after Heron is killed."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls
from test_permissions_e2e import asked
from test_processes_e2e import (
    NO_CAPS,
    TAG,
    assert_clean_stderr,
    escaping_tree,
    tagged,
    wait_for,
)
from test_tools_e2e import tool_result

from agent.sandbox.support import detect

pytestmark = pytest.mark.skipif(detect().path is None, reason=f"no sandbox: {detect().missing}")

AUTO = ("--mode", "auto")


@pytest.fixture(autouse=True)
def temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sessions' private TMPDIRs go here, not in /tmp."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))


def bash(command: str, call_id: str = "b") -> Any:
    return tool_calls(Call("bash", {"command": command}, id=call_id))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def zygotes(heron_pid: int) -> list[int]:
    """Heron's live children running the zygote."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == heron_pid and b"zygote_server.py" in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_killed_zygote_is_replaced_and_the_next_command_is_still_confined(
    heron, fake_llm, workspace, tmp_path
):
    outside = tmp_path / "escaped.txt"
    fake_llm.script(
        bash("echo one"),
        text("first"),
        bash(f"echo two > inside.txt; echo x > {outside}", "c"),
        text("second"),
    )
    client = heron(*AUTO, client_capabilities=NO_CAPS)
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "go")["stopReason"] == "end_turn"
    (first,) = zygotes(client.proc.pid)
    os.kill(first, signal.SIGKILL)  # as a crash, or a command killing its parent, would
    wait_for(lambda: not alive(first), 60, "the zygote to die")

    assert client.prompt(session_id, "again")["stopReason"] == "end_turn"
    assert asked(client) == []
    assert Path(workspace, "inside.txt").read_text() == "two\n"
    assert not outside.exists()
    (second,) = zygotes(client.proc.pid)
    assert second != first
    assert_clean_stderr(client)


def test_stop_kills_a_sandboxed_commands_whole_tree(heron, fake_llm, workspace):
    tag = uuid.uuid4().hex
    fake_llm.script(bash(escaping_tree(tag)), text("x"))
    client = heron(*AUTO, client_capabilities=NO_CAPS)
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "go")
    wait_for(lambda: len(tagged(tag)) >= 4, 60, "the whole tree to start")  # 4 sleeps
    client.cancel(session_id)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}
    wait_for(lambda: not tagged(tag), 60, "every tagged process to die")
    assert len(zygotes(client.proc.pid)) == 1  # the session's zygote serves on
    assert_clean_stderr(client)


def test_concurrent_sessions_each_run_in_their_own_sandbox(heron, fake_llm, tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    # The first session's command runs while the second session's zygote serves; neither may
    # write the other's folder.
    wait = f"echo x > {second}/mine; touch started; while [ ! -e go ]; do sleep 0.05; done"
    fake_llm.script(
        bash(wait),
        bash(f"echo r > ready; echo x > {first}/theirs; touch {first}/go", "c"),
        text("one"),
        text("two"),
    )
    client = heron(*AUTO, client_capabilities=NO_CAPS)
    one, two = client.new_session(str(first)), client.new_session(str(second))
    pending = client.prompt_async(one, "go")
    wait_for(lambda: (first / "started").exists(), 60, "the first command to run")
    assert client.prompt(two, "go")["stopReason"] == "end_turn"
    assert len(zygotes(client.proc.pid)) == 2  # both serving at once
    (first / "go").touch()  # the second could not: release the first from here
    assert pending.result(timeout=30)["stopReason"] == "end_turn"
    assert (second / "ready").exists() and not (second / "mine").exists()
    assert not (first / "theirs").exists()


def test_the_zygote_exits_with_its_session(heron, fake_llm, workspace):
    fake_llm.script(bash("echo one"), text("x"))
    client = heron(*AUTO, client_capabilities=NO_CAPS)
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "go")["stopReason"] == "end_turn"
    (zygote,) = zygotes(client.proc.pid)
    client.request("session/close", {"sessionId": session_id})
    wait_for(lambda: not alive(zygote), 60, "the zygote to exit")
    assert_clean_stderr(client)


@pytest.mark.parametrize("end", ["exit", "killed"])
def test_no_zygote_or_command_is_left_when_heron_ends(heron, fake_llm, workspace, end):
    tag = uuid.uuid4().hex
    fake_llm.script(bash(f"export {TAG}={tag}; echo started; sleep 1000"), text("x"))
    client = heron(*AUTO, client_capabilities=NO_CAPS)
    client.prompt_async(client.new_session(workspace), "go")
    wait_for(lambda: tagged(tag), 60, "the command to start")
    (zygote,) = zygotes(client.proc.pid)
    if end == "exit":
        client.close_stdin()
        assert client.wait_exit(30) == 0
    else:
        client.proc.kill()  # no cleanup of its own: the zygote sees its socket end
        client.proc.wait(timeout=30)
    wait_for(lambda: not tagged(tag), 60, "the command to die")
    wait_for(lambda: not alive(zygote), 60, "the zygote to exit")


def test_a_command_inherits_no_descriptor_of_the_zygote(heron, fake_llm, workspace):
    """Its reply socket in a command's hands would let it forge its exit status."""
    fake_llm.script(bash("ls /proc/$$/fd; true"), text("x"))  # the shell's own (no exec)
    client = heron(*AUTO, client_capabilities=NO_CAPS)
    assert client.prompt(client.new_session(workspace), "go")["stopReason"] == "end_turn"
    assert tool_result(fake_llm.requests[1], "b") == "Exit code 0\n0\n1\n2\n"
