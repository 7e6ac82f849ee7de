"""The sandbox's parts on their own: the launcher's refusals, a session's rules, the policy of
auto mode. What a confined command can and cannot do is tested end to end in
test_sandbox_e2e.py."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from agent.permissions.policy import Decision, PermissionMemory, decide
from agent.sandbox import Sandbox, blocked_hint, landlock, zygote
from agent.sandbox.zygote import ZygoteError
from agent.tools.base import ToolContext
from agent.tools.files import WriteFile
from agent.tools.shell import Bash


def test_the_launcher_never_runs_a_command_it_cannot_confine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setattr(landlock, "_abi", 0)  # as on a kernel without Landlock
    assert landlock.main(["--write", str(tmp_path), "--", "touch", str(marker)]) == 126
    assert not marker.exists()


@pytest.mark.parametrize("argv", [[], ["--"], ["--read"], ["--bogus", "x", "--", "true"]])
def test_the_launcher_rejects_a_bad_command_line(argv: list[str]) -> None:
    assert landlock.main(argv) == 2


@pytest.mark.skipif(landlock.abi_version() < 1, reason="no Landlock in this kernel")
def test_heron_sandbox_confines_what_it_runs(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    script = f"echo ok > {inside}/a && cat {inside}/a; echo x > {outside}"
    heron = Path(sys.executable).parent / "heron"
    run = subprocess.run(
        [str(heron), "sandbox", "--read", "/usr", "--write", str(inside), "--", "sh", "-c", script],
        capture_output=True,
        text=True,
    )
    assert run.stdout == "ok\n"
    assert "Permission denied" in run.stderr and not outside.exists()


def test_a_session_writes_its_roots_and_a_private_tmpdir_removed_at_close(tmp_path: Path) -> None:
    sandbox = Sandbox(roots=lambda: [tmp_path], active=lambda: True)
    tmpdir = Path(sandbox.env()["TMPDIR"])
    assert tmpdir.is_dir() and tmpdir != Path("/tmp")
    assert sandbox.writes() == [str(tmp_path), str(tmpdir)]
    argv = sandbox.launcher(["bash", "-c", "true"])
    assert argv[-4:] == ["--", "bash", "-c", "true"] and argv[1:3] == ["-I", "-S"]
    sandbox.close()
    assert not tmpdir.exists()


def test_reads_never_open_the_home_folder_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path.home()
    monkeypatch.setenv("PATH", f"{home}:/:{home}/.local/bin:/usr/bin")
    reads = Sandbox(roots=lambda: [], active=lambda: True).reads()
    assert str(home) not in reads and "/" not in reads
    assert f"{home}/.local/bin" in reads and "/usr/bin" in reads
    assert not any(p.endswith((".ssh", ".config/heron", ".cargo")) for p in reads)


def test_the_model_is_told_only_about_failures_that_look_like_a_denial() -> None:
    assert blocked_hint("sh: cannot create /x: Permission denied", 2)
    assert '"sandbox": false' in blocked_hint("Operation not permitted", 1)
    assert blocked_hint("Permission denied", 0) == ""
    assert blocked_hint("No such file or directory", 1) == ""


def _decide(tool: Any, raw: dict[str, Any], ws: Path, mode: str = "auto") -> Decision:
    ctx = ToolContext(
        cwd=ws, session_id="s", files=None, client_request=None, client_terminal=False
    )  # type: ignore[arg-type]
    return decide(mode, tool, tool.parse_args(raw), ctx, PermissionMemory(), [ws]).decision


@pytest.mark.skipif(landlock.abi_version() < 1, reason="no Landlock in this kernel")
def test_auto_runs_sandboxed_commands_and_workspace_edits_and_asks_the_rest(
    tmp_path: Path,
) -> None:
    assert _decide(Bash(), {"command": "rm -rf x"}, tmp_path) is Decision.ALLOW
    assert _decide(Bash(), {"command": "ls", "sandbox": False}, tmp_path) is Decision.ASK
    assert _decide(Bash(), {"command": "ls", "cwd": "/"}, tmp_path) is Decision.ASK
    assert _decide(Bash(), {"command": "ls"}, tmp_path, mode="ask") is Decision.ASK
    assert _decide(WriteFile(), {"path": "a", "content": ""}, tmp_path) is Decision.ALLOW
    assert _decide(WriteFile(), {"path": ".git/x", "content": ""}, tmp_path) is Decision.ASK
    assert _decide(WriteFile(), {"path": "/etc/x", "content": ""}, tmp_path) is Decision.ASK


def test_auto_without_a_sandbox_asks_for_commands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HERON_SANDBOX", "off")
    assert _decide(Bash(), {"command": "ls"}, tmp_path) is Decision.ASK


def test_the_session_is_told_once_when_the_network_is_not_confined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent.turn.updates import Updates

    monkeypatch.setattr(landlock, "_abi", 3)  # files confined, TCP not (ABI < 4)
    sandbox = Sandbox(roots=lambda: [], active=lambda: True)
    notice = sandbox.notice()
    assert notice is not None and "network" in notice.text and notice.severity == "warning"
    said: list[dict[str, Any]] = []

    async def nothing() -> Any:
        return 0

    updates = Updates(lambda u, record=False: said.append(u), list, nothing, nothing, list)
    updates.note(sandbox.notice())
    updates.note(sandbox.notice())  # the one place that tells notes: once per session
    assert ["network" in u["content"]["text"] for u in said] == [True]


# ---------------------------------------------------------------------------------------------
# The zygote (agent.sandbox.zygote): what the end-to-end tests cannot reach easily


def _run(command: str, sandbox: Sandbox, cwd: Path) -> Any:
    """Start `bash -c command` through the session's zygote; (process, output, exit code)."""

    async def run() -> tuple[Any, bytes, int | None]:
        env = {**os.environ, **sandbox.env()}
        process = await sandbox.spawn(["/bin/bash", "-c", command], env, cwd)
        output = b""
        try:
            while True:
                output += await process.receive()
        except anyio.EndOfStream:
            pass
        code = await process.wait()
        await process.aclose()
        return process, output, code

    return run


confining = pytest.mark.skipif(landlock.abi_version() < 1, reason="no Landlock in this kernel")


def _zygote_pid(sandbox: Sandbox) -> int:
    assert sandbox._zygote is not None and sandbox._zygote._process is not None
    return sandbox._zygote._process.pid


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return True
    return state in (b"Z", b"X")


def _wait_until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within 30 s"
        time.sleep(0.02)


@confining
def test_the_zygote_reports_a_command_it_cannot_start_and_serves_on(tmp_path: Path) -> None:
    sandbox = Sandbox(roots=lambda: [tmp_path], active=lambda: True)

    async def main() -> None:
        await _run("true", sandbox, tmp_path)()
        first = _zygote_pid(sandbox)
        with pytest.raises(ZygoteError) as failed:
            await _run("true", sandbox, tmp_path / "missing")()
        assert failed.value.errno == errno.ENOENT
        _, output, code = await _run("echo fine", sandbox, tmp_path)()
        assert (output, code, _zygote_pid(sandbox)) == (b"fine\n", 0, first)

    try:
        anyio.run(main)
    finally:
        sandbox.close()


@confining
def test_a_stopped_zygote_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command may SIGSTOP its zygote (same Landlock domain): the next command must not hang
    on it forever, and the one after runs on a new zygote."""
    sandbox = Sandbox(roots=lambda: [tmp_path], active=lambda: True)

    async def main() -> None:
        await _run("true", sandbox, tmp_path)()
        stopped = _zygote_pid(sandbox)
        os.kill(stopped, signal.SIGSTOP)  # as `kill -STOP $PPID` in a command would
        monkeypatch.setattr(zygote, "REPLY_TIMEOUT", 0.5)  # it cannot answer at all
        with pytest.raises(ZygoteError, match="did not answer"):
            await _run("true", sandbox, tmp_path)()
        monkeypatch.setattr(zygote, "REPLY_TIMEOUT", 30.0)
        _, output, code = await _run("echo again", sandbox, tmp_path)()
        assert (output, code) == (b"again\n", 0)
        assert _zygote_pid(sandbox) != stopped
        assert _gone(stopped)

    try:
        anyio.run(main)
    finally:
        sandbox.close()


@confining
def test_new_rules_get_a_new_zygote_and_the_old_one_ends_after_its_commands(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    roots = [first]
    sandbox = Sandbox(roots=lambda: list(roots), active=lambda: True)
    waiting = "touch started; while [ ! -e go ]; do sleep 0.02; done; echo went"

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            results: list[Any] = []

            async def slow() -> None:
                results.append(await _run(waiting, sandbox, first)())

            tasks.start_soon(slow)
            while not (first / "started").exists():  # running, on the first zygote
                await anyio.sleep(0.02)
            old = _zygote_pid(sandbox)
            roots.append(second)  # an additional directory: new rules
            _, output, code = await _run("echo x > two.txt && touch ../one/go", sandbox, second)()
            assert (output, code) == (b"", 0) and (second / "two.txt").exists()
            assert _zygote_pid(sandbox) != old
        ((_, output, code),) = results
        assert (output, code) == (b"went\n", 0)  # the retired zygote still told its status
        await anyio.to_thread.run_sync(_wait_until, lambda: _gone(old), "the old zygote to exit")

    try:
        anyio.run(main)
    finally:
        sandbox.close()
