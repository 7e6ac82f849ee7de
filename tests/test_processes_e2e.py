"""Every process a command started dies with it: on cancel, when the command ends, when the
editor closes stdin, and when Heron gets SIGTERM, SIGINT or SIGHUP, including processes that
left the group (`setsid`), ignore hangups (`nohup`) or ignore SIGTERM. Also: a cancelled turn
answers at once even when SIGKILL is needed, and a noisy command keeps Heron's memory flat.

The real `heron` runs commands locally (no terminal capability). Each command exports a unique
tag; /proc is scanned for live processes carrying it.
"""

from __future__ import annotations

import platform
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls

NO_CAPS: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
FULL = ("--mode", "full-access")
TAG = "HERON_TEST_TAG"


def tagged(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment carries the tag."""
    found = []
    needle = f"{TAG}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in environ and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout}s")
        time.sleep(0.02)
    return value


def escaping_tree(tag: str, foreground: bool = True) -> str:
    """Four sleeps (the pgrep-proof marker is the exported tag): one in a new session, one
    under nohup, one in a subshell that ignores SIGTERM, and (foreground) the shell itself
    waiting on a SIGTERM-ignoring sleep. Without `foreground` they all hide their output, so the
    command ends at once and leaves them behind."""
    quiet = "" if foreground else " >/dev/null 2>&1"
    lines = [
        f"export {TAG}={tag}",
        f"setsid sleep 1000{quiet} &",
        f"nohup sleep 1000{quiet} &",
        f"(trap '' TERM; sleep 1000){quiet} &",
    ]
    lines += ["trap '' TERM", "echo started", "sleep 1000"] if foreground else ["echo started"]
    return "\n".join(lines)


def start_tree(heron: Any, fake_llm: Any, workspace: str) -> tuple[Any, str, Any, str]:
    """Heron running the escaping tree in a turn; returns (client, session, pending, tag)."""
    tag = uuid.uuid4().hex
    fake_llm.script(tool_calls(Call("bash", {"command": escaping_tree(tag)}, id="b")), text("x"))
    client = heron(*FULL, client_capabilities=NO_CAPS)
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "go")
    wait_for(lambda: len(tagged(tag)) >= 4, 60, "the whole tree to start")  # 4 sleeps
    return client, session_id, pending, tag


def assert_clean_stderr(client: Any) -> None:
    assert "Fatal Python error" not in client.stderr
    assert "Traceback" not in client.stderr


def test_cancel_kills_the_whole_tree_and_answers_at_once(heron, fake_llm, workspace):
    client, session_id, pending, tag = start_tree(heron, fake_llm, workspace)
    client.cancel(session_id)
    # The tree ignores SIGTERM (SIGKILL follows a 0.5 s grace); the answer does not wait for
    # it: scripts/bench_processes.py measures how fast it comes.
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}
    wait_for(lambda: not tagged(tag), 60, "every tagged process to die")
    assert_clean_stderr(client)


def test_background_jobs_die_when_the_command_ends(heron, fake_llm, workspace):
    tag = uuid.uuid4().hex
    command = escaping_tree(tag, foreground=False)
    fake_llm.script(tool_calls(Call("bash", {"command": command}, id="b")), text("ok"))
    client = heron(*FULL, client_capabilities=NO_CAPS)
    turn = client.prompt(client.new_session(workspace), "go")
    assert turn["stopReason"] == "end_turn"
    wait_for(lambda: not tagged(tag), 60, "every tagged process to die")
    result = next(m for m in fake_llm.requests[1].body["messages"] if m["role"] == "tool")
    assert result["content"].startswith("Exit code 0\n(stopped 3 background process(es)")
    assert_clean_stderr(client)


@pytest.mark.parametrize("how", ["setsid env -i", "double fork"])
def test_a_job_without_our_marker_or_group_still_dies_with_its_command(
    heron, fake_llm, workspace, how
):
    """`setsid env -i` clears the environment marker and leaves the process group; a double
    fork leaves its parent: the command's reaper keeps both in its tree."""
    marker = f"9999.{uuid.uuid4().int % 10**6:06d}"
    command = {
        "setsid env -i": f"setsid env -i sleep {marker} >/dev/null 2>&1 &",
        "double fork": f"(setsid sh -c 'env -i sleep {marker} &' >/dev/null 2>&1 &)",
    }[how]
    fake_llm.script(
        tool_calls(Call("bash", {"command": f"{command} echo started"}, id="b")), text("ok")
    )
    client = heron(*FULL, client_capabilities=NO_CAPS)
    assert client.prompt(client.new_session(workspace), "go")["stopReason"] == "end_turn"
    wait_for(lambda: not _running(marker), 60, "the escaped sleep to die")
    assert_clean_stderr(client)


def _running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_closing_stdin_kills_the_whole_tree(heron, fake_llm, workspace):
    client, _, _, tag = start_tree(heron, fake_llm, workspace)
    client.close_stdin()
    assert client.wait_exit(timeout=30) == 0
    wait_for(lambda: not tagged(tag), 60, "every tagged process to die")
    assert_clean_stderr(client)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=str)
def test_a_signal_kills_the_whole_tree_and_exits_quickly(heron, fake_llm, workspace, sig):
    client, _, _, tag = start_tree(heron, fake_llm, workspace)
    client.proc.send_signal(sig)
    assert client.wait_exit(timeout=30) == 128 + sig
    assert not tagged(tag)
    assert_clean_stderr(client)


def test_a_signal_before_any_session_exits_quietly(heron):
    client = heron(initialize=False)
    # In its first read, before the server is up (Linux /proc; elsewhere: whenever).
    number = {"x86_64": "0 ", "aarch64": "63 "}.get(platform.machine())
    deadline = time.monotonic() + 30
    while number and not Path(f"/proc/{client.proc.pid}/syscall").read_text().startswith(number):
        assert time.monotonic() < deadline, "never read its stdin"
        time.sleep(0.02)
    client.proc.send_signal(signal.SIGINT)
    assert client.wait_exit(timeout=30) == 128 + signal.SIGINT
    assert_clean_stderr(client)


def test_a_noisy_command_keeps_memory_flat(heron, fake_llm, workspace):
    """About 2 MB/s for 8 s: ~80 progress snapshots of ~96 kB each. Kept for replay one after
    the other, they would add ~8 MB; only the last one is kept now."""
    fake_llm.script(text("warm up"))
    client = heron(*FULL, client_capabilities=NO_CAPS)
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")  # loads the model client, so the baseline is realistic
    command = (
        "for i in $(seq 80); do head -c 24000 /dev/zero | tr '\\0' a; echo; sleep 0.1; done;"
        " echo THE-END"
    )
    fake_llm.script(tool_calls(Call("bash", {"command": command}, id="n")), text("ok"))
    pending = client.prompt_async(session_id, "noise")
    client.wait_for_update(lambda u: u.get("content") and u.get("toolCallId") == "n")
    assert pending.result(timeout=60)["stopReason"] == "end_turn"
    snapshots = [u for u in pending.updates() if u.get("toolCallId") == "n" and "status" not in u]
    assert len(snapshots) > 20  # the command was noisy for long enough to tell (~80 unloaded)
    # Memory stays flat (only the last snapshot is kept): scripts/bench_memory.py measures it.
