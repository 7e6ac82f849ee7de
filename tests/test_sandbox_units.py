"""The sandbox's parts on their own: the layers chosen, the mount plan, the watch, the launcher's
refusals, the policy of auto mode, the zygote's failures. What a confined command can and
cannot do is tested end to end in test_sandbox_attacks_e2e.py and test_sandbox_e2e.py."""

from __future__ import annotations

import errno
import marshal
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
from agent.sandbox import Sandbox, blocked_for_user, blocked_hint, launcher, support, zygote
from agent.sandbox.gitmeta import places
from agent.sandbox.plan import Root, identity, mount_plan, protected_paths
from agent.sandbox.rules import Limits
from agent.sandbox.watch import TOO_BIG, changed_note, changed_paths, fingerprint
from agent.sandbox.zygote import ZygoteError
from agent.tools.base import ToolContext
from agent.tools.files import WriteFile
from agent.tools.shell import Bash
from agent.turn.updates import Updates

confining = pytest.mark.skipif(
    support.detect().path is None, reason=f"no sandbox here: {support.detect().missing}"
)


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _root(path: Path) -> Root:
    real, device, inode = identity(path) or ("", 0, 0)
    return Root(real, device, inode, -1)


# ---------------------------------------------------------------------------------------------
# Which layers, and what they say


@pytest.fixture
def fresh_detection(monkeypatch: pytest.MonkeyPatch) -> Any:
    support.detect.cache_clear()
    yield monkeypatch
    support.detect.cache_clear()


def test_off_unknown_and_too_old_are_refused_with_the_reason(fresh_detection: Any) -> None:
    fresh_detection.setenv("HERON_SANDBOX", "off")
    assert support.detect().path is None and "HERON_SANDBOX=off" in support.detect().missing
    support.detect.cache_clear()
    fresh_detection.setenv("HERON_SANDBOX", "chroot")
    assert "not one of auto, off, bwrap, userns, landlock" in support.detect().missing
    support.detect.cache_clear()
    fresh_detection.setenv("HERON_SANDBOX", "landlock")
    fresh_detection.setenv("HERON_LANDLOCK_ABI", "5")
    layers = support.detect()
    assert layers.path is None and "Landlock ABI 6 is needed" in layers.missing
    assert "bubblewrap" in layers.missing  # what to do about it


def test_the_landlock_abi_can_be_lowered_never_raised(fresh_detection: Any) -> None:
    real = support.abi_version()
    fresh_detection.setenv("HERON_LANDLOCK_ABI", "2")
    assert support.landlock_abi() == min(2, real)
    fresh_detection.setenv("HERON_LANDLOCK_ABI", "99")
    assert support.landlock_abi() == real


def test_describe_names_the_layers() -> None:
    layers = support.Layers("bwrap", 7, True)
    assert layers.describe() == "namespaces (bubblewrap) + Landlock ABI 7 + seccomp"
    assert support.Layers("landlock", 6, True).describe() == "Landlock ABI 6 + seccomp"
    assert support.Layers(None, 0, False, "why").describe() == "no sandbox: why"


def test_limits_count_the_users_processes_only_without_a_user_namespace() -> None:
    limits = Limits(processes=100, memory_mb=256, file_mb=1)
    assert limits.rlimits(namespaced=True) == {
        "nproc": 100,
        "data": 256 * 1024 * 1024,
        "fsize": 1024 * 1024,
    }
    assert limits.rlimits(namespaced=False)["nproc"] > 100
    assert Limits(processes=0, memory_mb=0, file_mb=0).rlimits(namespaced=True) == {}


# ---------------------------------------------------------------------------------------------
# The plan: what a command sees


def test_git_metadata_wherever_it_lies(tmp_path: Path) -> None:
    main, sub, home = tmp_path / "main", tmp_path / "sub", tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    for repo in (main, sub):
        _git("init", "-q", str(repo), cwd=tmp_path)
        _git(
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "--allow-empty",
            "-qm",
            "0",
            cwd=repo,
        )
    _git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=main)
    wt = tmp_path / "wt"
    _git("config", "core.hooksPath", ".husky", cwd=wt)
    _git("config", "include.path", "../shared.gitconfig", cwd=wt)
    _git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "lib", cwd=wt)
    found = places(str(wt), str(home))
    gitdir = str(main / ".git" / "worktrees" / "wt")
    assert gitdir in found.readable and str(main / ".git") in found.readable  # it names wt back
    assert str(wt / ".husky") in found.protect  # core.hooksPath of the repository
    assert str(wt / ".githooks") in found.protect  # … and the user's relative one
    assert str(main / "shared.gitconfig") in found.protect  # included by the common config
    assert str(wt / "lib" / ".git") in found.protect  # a submodule's .git file
    protected = protected_paths([_root(wt)], home)
    assert str(wt / ".git") in protected and str(wt / ".husky") in protected
    assert str(main / ".git") not in protected  # outside the roots: read-only anyway


def test_a_git_file_that_does_not_name_the_work_tree_back_is_not_followed(tmp_path: Path) -> None:
    """A command may write `.git` (or a submodule's) naming any folder, `~/.ssh` say."""
    ws, secret = tmp_path / "ws", tmp_path / "home" / ".ssh"
    ws.mkdir()
    secret.mkdir(parents=True)
    (ws / ".git").write_text(f"gitdir: {secret}\n")
    found = places(str(ws), str(tmp_path / "home"))
    assert str(secret) not in found.readable and str(secret) not in found.protect


def test_a_symlinked_git_folder_is_protected_where_it_leads(tmp_path: Path) -> None:
    ws, real_git = tmp_path / "ws", tmp_path / "ws" / "elsewhere"
    real_git.mkdir(parents=True)
    (ws / ".git").symlink_to(real_git)
    assert str(real_git) in protected_paths([_root(ws)], tmp_path / "home")


def test_the_plan_hides_the_home_folder_and_never_binds_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".cargo" / "registry").mkdir(parents=True)
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".ssh").mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    path_env = f"{home}:/:{home}/.local/bin:/usr/bin"
    plan = mount_plan([_root(ws)], str(tmp_path / "tmp"), home, path_env)
    assert not any(op[0] == "rw" and str(op[2]).startswith(str(home)) for op in plan)
    binds = [op for op in plan if op[0] in ("ro", "rw")]
    targets = [str(op[2]) for op in binds]
    assert str(home) not in targets and "/" not in targets
    assert str(home / ".cargo" / "registry") in targets and f"{home}/.local/bin" in targets
    assert not any(".ssh" in t for t in targets)
    assert ["tmpfs", "/run"] in plan and ["dev", "/dev"] in plan and ["proc", "/proc"] in plan
    assert ["rw", str(tmp_path / "tmp"), "/tmp"] in plan
    assert plan.index(["rw-fd", -1, str(ws)]) > max(
        i for i, op in enumerate(plan) if op[0] == "ro" and not str(op[1]).startswith(str(ws))
    )  # the workspace after the system: nothing shadows it


# ---------------------------------------------------------------------------------------------
# The watch: what changed for git and Heron


def test_the_watch_sees_config_hooks_and_heron_changes_not_the_index(tmp_path: Path) -> None:
    _git("init", "-q", str(tmp_path), cwd=tmp_path)
    before = fingerprint([tmp_path])
    (tmp_path / ".git" / "index.lock").write_text("x")  # what every git status does
    (tmp_path / ".git" / "index.lock").rename(tmp_path / ".git" / "index")
    assert changed_note(changed_paths(before, fingerprint([tmp_path]))) == ""
    (tmp_path / ".git" / "hooks" / "pre-commit").write_text("evil")
    (tmp_path / ".heron").mkdir()
    note = changed_note(changed_paths(before, fingerprint([tmp_path])))
    assert ".git/hooks/pre-commit" in note and ".heron" in note


def test_a_tree_too_large_to_watch_always_counts_as_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.sandbox import watch

    (tmp_path / ".heron").mkdir()
    for i in range(30):
        (tmp_path / ".heron" / f"f{i}").write_text("x")
    monkeypatch.setattr(watch, "LIMIT", 10)
    first = fingerprint([tmp_path])
    assert TOO_BIG in changed_note(changed_paths(first, fingerprint([tmp_path])))


# ---------------------------------------------------------------------------------------------
# Words


def test_the_model_is_told_only_about_failures_that_look_like_a_denial() -> None:
    assert blocked_hint("sh: cannot create /x: Permission denied", 2)
    assert '"sandbox": false' in blocked_hint("Operation not permitted", 1)
    assert blocked_hint("touch: cannot touch '/etc/x': Read-only file system", 1)
    assert blocked_hint("Permission denied", 0) == ""
    assert blocked_hint("No such file or directory", 1) == ""


def test_the_user_is_told_what_was_blocked_in_their_words() -> None:
    shown = blocked_for_user(
        f"bash: line 1: {Path.home()}/x: Read-only file system\n"
        "touch: cannot touch '/etc/y': Permission denied"
    )
    assert "(at ~/x, /etc/y)" in shown and "sandbox" in shown
    assert '"sandbox": false' not in shown


# ---------------------------------------------------------------------------------------------
# The policy


def _decide(tool: Any, raw: dict[str, Any], ws: Path, mode: str = "auto") -> Decision:
    ctx = ToolContext(
        cwd=ws,
        session_id="s",
        files=None,  # type: ignore[arg-type]
        client_request=None,  # type: ignore[arg-type]
        client_terminal=False,
        sandbox=Sandbox(roots=lambda: [ws], active=lambda: mode == "auto"),
    )
    return decide(mode, tool, tool.parse_args(raw), ctx, PermissionMemory(), [ws]).decision


@confining
def test_auto_runs_sandboxed_commands_and_workspace_edits_and_asks_the_rest(
    tmp_path: Path,
) -> None:
    assert _decide(Bash(), {"command": "ls -l"}, tmp_path) is Decision.ALLOW
    assert _decide(Bash(), {"command": "rm -f x && make"}, tmp_path) is Decision.ALLOW
    assert _decide(Bash(), {"command": "rm -rf x"}, tmp_path) is Decision.ASK  # discards work
    assert _decide(Bash(), {"command": "ls", "sandbox": False}, tmp_path) is Decision.ASK
    assert _decide(Bash(), {"command": "ls", "cwd": "/"}, tmp_path) is Decision.ASK
    assert _decide(Bash(), {"command": "ls"}, tmp_path, mode="ask") is Decision.ASK
    assert _decide(WriteFile(), {"path": "a", "content": ""}, tmp_path) is Decision.ALLOW
    assert _decide(WriteFile(), {"path": ".git/x", "content": ""}, tmp_path) is Decision.ASK
    assert _decide(WriteFile(), {"path": "/etc/x", "content": ""}, tmp_path) is Decision.ASK


def test_auto_without_a_sandbox_asks_for_commands(fresh_detection: Any, tmp_path: Path) -> None:
    fresh_detection.setenv("HERON_SANDBOX", "off")
    assert _decide(Bash(), {"command": "ls"}, tmp_path) is Decision.ASK


def test_the_session_is_told_once_why_auto_asks(fresh_detection: Any) -> None:
    fresh_detection.setenv("HERON_SANDBOX", "off")
    sandbox = Sandbox(roots=lambda: [], active=lambda: True)
    notice = sandbox.notice()
    assert notice is not None and notice.severity == "warning"
    assert "asks before each command" in notice.text and "HERON_SANDBOX=off" in notice.text
    said: list[dict[str, Any]] = []

    async def nothing() -> Any:
        return 0

    updates = Updates(lambda u, record=False: said.append(u), list, nothing, nothing, list)
    updates.note(sandbox.notice())
    updates.note(sandbox.notice())  # the one place that tells notes: once per session
    assert ["asks before each command" in u["content"]["text"] for u in said] == [True]


# ---------------------------------------------------------------------------------------------
# The launcher (the editor's terminal)


@pytest.mark.parametrize("argv", [[], ["cfg"], ["cfg", "--"], ["cfg", "x", "ls"]])
def test_the_launcher_rejects_a_bad_command_line(argv: list[str]) -> None:
    assert launcher.main(argv) == 2


def test_the_launcher_never_runs_a_command_it_cannot_confine(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    config = tmp_path / "config.json"
    ws = tmp_path / "ws"
    ws.mkdir()
    real, device, inode = identity(ws) or ("", 0, 0)
    layers = {"seccomp": "no-such-profile", "landlock": None, "plan": None}
    config.write_bytes(
        marshal.dumps({"path": "landlock", "roots": [[real, device, inode]], "confinement": layers})
    )
    run = subprocess.run(
        [sys.executable, "-I", "-S", launcher.__file__, str(config), "--", "touch", str(marker)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 126 and not marker.exists()
    assert "the command was not run" in run.stderr


def test_the_launcher_refuses_a_root_that_is_not_the_one_the_session_had(tmp_path: Path) -> None:
    ws, other = tmp_path / "ws", tmp_path / "other"
    ws.mkdir()
    other.mkdir()
    real, device, inode = identity(ws) or ("", 0, 0)
    ws.rename(tmp_path / "was")
    ws.symlink_to(other)
    config = tmp_path / "config.json"
    config.write_bytes(
        marshal.dumps({"path": "landlock", "roots": [[real, device, inode]], "confinement": {}})
    )
    run = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            launcher.__file__,
            str(config),
            "--",
            "touch",
            str(other / "x"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 126 and not (other / "x").exists()


@confining
def test_heron_sandbox_runs_a_command_as_auto_mode_would(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    script = f"echo ok > a && cat a; echo x > {outside}/b"
    heron = Path(sys.executable).parent / "heron"
    run = subprocess.run(
        [str(heron), "sandbox", "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=inside,
    )
    assert run.stdout == "ok\n" and (inside / "a").exists()
    assert not (outside / "b").exists()
    assert "heron sandbox:" in run.stderr and "seccomp" in run.stderr
    helped = subprocess.run([str(heron), "sandbox", "-h"], capture_output=True, text=True)
    assert helped.returncode == 0 and "auto mode" in helped.stdout


# ---------------------------------------------------------------------------------------------
# The zygote (agent.sandbox.zygote): what the end-to-end tests cannot reach easily


def _run(command: str, sandbox: Sandbox, cwd: Path, confined: bool = True) -> Any:
    """Start `bash -c command` through the session's zygote; (process, output, exit code)."""

    async def run() -> tuple[Any, bytes, int | None]:
        env = {**os.environ, **(sandbox.env() if confined else {})}
        process = await sandbox.spawn(["/bin/bash", "-c", command], env, cwd, confined)
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


def _run_then_close(main: Any, sandbox: Sandbox) -> None:
    """Run `main`, then end the sandbox and collect its zygotes inside the same event loop (as
    Heron does at exit: none may end after the loop closed)."""

    async def run() -> None:
        try:
            await main()
        finally:
            sandbox.close()
            await zygote.stop_all()

    anyio.run(run)


def _server_pid(sandbox: Sandbox) -> int:
    """The zygote itself: below bubblewrap or its own monitor, the first Python process of the
    innermost pid namespace (its reapers, forks of it, come after it)."""
    assert sandbox._zygote is not None and sandbox._zygote._process is not None
    chain, pid = [], sandbox._zygote._process.pid
    while pid:
        chain.append(pid)
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pid = next((int(c) for c in children if b"zygote_server" in _cmdline(int(c))), 0)
    depth = {p: len(_status(p).get("NSpid", "").split()) for p in chain}
    deepest = max(depth.values())
    return next(
        p for p in chain if depth[p] == deepest and b"python" in _cmdline(p).split(b"\0")[0]
    )


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


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
        first = _server_pid(sandbox)
        with pytest.raises(ZygoteError) as failed:
            await _run("true", sandbox, tmp_path / "missing")()
        assert failed.value.errno == errno.ENOENT
        _, output, code = await _run("echo fine", sandbox, tmp_path)()
        assert (output, code, _server_pid(sandbox)) == (b"fine\n", 0, first)

    _run_then_close(main, sandbox)


@confining
def test_a_stopped_zygote_is_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command may SIGSTOP its zygote (same sandbox, under bubblewrap): the next command must
    not hang on it forever, and the one after runs on a new zygote."""
    sandbox = Sandbox(roots=lambda: [tmp_path], active=lambda: True)

    async def main() -> None:
        await _run("true", sandbox, tmp_path)()
        stopped = _server_pid(sandbox)
        os.kill(stopped, signal.SIGSTOP)
        monkeypatch.setattr(zygote, "REPLY_TIMEOUT", 0.5)  # it cannot answer at all
        with pytest.raises(ZygoteError, match="did not answer"):
            await _run("true", sandbox, tmp_path)()
        monkeypatch.setattr(zygote, "REPLY_TIMEOUT", 30.0)
        _, output, code = await _run("echo again", sandbox, tmp_path)()
        assert (output, code) == (b"again\n", 0)
        assert _server_pid(sandbox) != stopped
        await anyio.to_thread.run_sync(_wait_until, lambda: _gone(stopped), "the old zygote to go")

    _run_then_close(main, sandbox)


@confining
def test_new_roots_get_a_new_zygote_and_the_old_one_ends_after_its_commands(
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
            old = _server_pid(sandbox)
            roots.append(second)  # an additional directory: new rules
            _, output, code = await _run("echo x > two.txt && touch ../one/go", sandbox, second)()
            assert (output, code) == (b"", 0) and (second / "two.txt").exists()
            assert _server_pid(sandbox) != old
        ((_, output, code),) = results
        assert (output, code) == (b"went\n", 0)  # the retired zygote still told its status
        await anyio.to_thread.run_sync(_wait_until, lambda: _gone(old), "the old zygote to exit")

    _run_then_close(main, sandbox)


def test_a_command_outside_the_sandbox_gets_a_reaper_too(tmp_path: Path) -> None:
    """`setsid env -i` leaves the group and the environment: it stays below the reaper."""
    sandbox = Sandbox(roots=lambda: [tmp_path], active=lambda: False)

    async def main() -> None:
        process, output, code = await _run("echo $$", sandbox, tmp_path, confined=False)()
        assert code == 0 and int(output) == process.pid
        assert process.reaper and process.reaper != process.pid

    _run_then_close(main, sandbox)
