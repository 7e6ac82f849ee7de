"""What auto mode's sandbox adds to each command and to each session, per sandbox path.

    python scripts/bench_sandbox.py [--runs 100] [--sessions 10] [--command 'true']

Starts `bash -c CMD` (Heron's environment) every way Heron can, alternating so all see the same
load, each round as the local runner does it (start, read the output to its end, wait for the
exit status):

- direct: `agent.tools.shell.start_unconfined`, a plain spawn from Heron (the baseline);
- reaper: through the session's unconfined zygote, as `bash` runs outside auto mode (below a
  reaper of its own, so that what it leaves behind dies with it);
- zygote/PATH: through the session's confined zygote on each sandbox path this machine has
  (bwrap, userns: Heron's own namespaces, landlock: Landlock alone), as `bash` in auto mode;
- terminal/PATH: what the editor's terminal runs in auto mode: `bash -c CMD` with BASH_ENV,
  which execs the launcher (a Python start; under bubblewrap a second one inside it).

Prints the median wall time of each round and what it adds to `direct`, the mean CPU time
(Heron's, the commands', and the zygote's share, read from /proc in clock ticks: hence the
mean over many rounds), and the session start per path: the first command of a new session,
which starts the zygote (median over --sessions).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.processes.tree import forget
from agent.sandbox import Sandbox
from agent.sandbox.support import PATHS, Layers, _problem, landlock_abi
from agent.tools.shell import start_unconfined

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def cpu_ms() -> float:
    """Heron's own CPU and that of its waited-for children, in ms."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (mine.ru_utime + mine.ru_stime + kids.ru_utime + kids.ru_stime) * 1000


def zygote_cpu_ms(sandboxes: list[Sandbox]) -> float:
    """The zygotes' CPU and that of the reapers and commands they collected, in ms."""
    total = 0.0
    for sandbox in sandboxes:
        for zygote in (sandbox._zygote, sandbox._unconfined):
            if zygote is None or zygote._process is None:
                continue
            for pid in _tree(zygote._process.pid):
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                total += sum(int(f) for f in fields[11:15]) * TICK_MS
    return total


def _tree(pid: int) -> list[int]:
    """`pid` and the zygote processes below it (bwrap's, a monitor's), not the commands."""
    found = [pid]
    while True:
        try:
            children = Path(f"/proc/{found[-1]}/task/{found[-1]}/children").read_text().split()
        except OSError:
            return found
        servers = [int(c) for c in children if b"zygote_server" in _cmdline(int(c))]
        if not servers:
            return found
        found.append(servers[0])


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def drain(proc: object) -> None:
    receive = proc.stdout.receive if hasattr(proc.stdout, "receive") else proc.receive  # type: ignore[attr-defined]
    try:
        while True:
            await receive()
    except (anyio.EndOfStream, anyio.ClosedResourceError):
        pass


async def direct_round(argv: list[str], env: dict[str, str], cwd: str) -> None:
    proc = await start_unconfined(argv, env, cwd)  # a plain spawn, as before the reapers
    await drain(proc)
    await proc.wait()
    await proc.aclose()
    forget(proc.pid)


async def zygote_round(
    sandbox: Sandbox, argv: list[str], env: dict[str, str], cwd: str, confined: bool
) -> None:
    proc = await sandbox.spawn(argv, env, Path(cwd), confined)
    await drain(proc)
    assert await proc.wait() == 0
    await proc.aclose()


async def terminal_round(sandbox: Sandbox, command: str, env: dict[str, str], cwd: str) -> None:
    program, args, extra = sandbox.terminal(command, shutil.which("bash") or "/bin/bash")
    await direct_round([program, *args], {**env, **extra}, cwd)


def sandbox_for(path: str | None, workspace: str) -> Sandbox:
    layers = None if path is None else Layers(path, landlock_abi(), True)
    return Sandbox(roots=lambda: [Path(workspace)], active=lambda: True, layers=layers)


async def session_start(path: str, workspace: str, shell: list[str], env: dict[str, str]) -> float:
    """Wall ms of a new session's first command (its zygote's start included)."""
    sandbox = sandbox_for(path, workspace)
    try:
        start = time.perf_counter()
        await zygote_round(sandbox, shell, {**env, **sandbox.env()}, workspace, True)
        return (time.perf_counter() - start) * 1000
    finally:
        sandbox.close()


async def measure(args: argparse.Namespace) -> None:
    workspace = tempfile.mkdtemp(prefix="bench-sandbox-")
    shell = [shutil.which("bash") or "/bin/sh", "-c", args.command]
    env = {**os.environ, "TERM": "dumb"}
    paths = [p for p in PATHS if _problem(p, landlock_abi()) is None]
    outside = sandbox_for(None, workspace)
    boxes = {path: sandbox_for(path, workspace) for path in paths}
    rounds: dict[str, Callable[[], Awaitable[None]]] = {
        "direct": lambda: direct_round(shell, env, workspace),
        "reaper": lambda: zygote_round(outside, shell, env, workspace, False),
    }
    for path, box in boxes.items():
        boxed = {**env, **box.env()}
        rounds[f"zygote/{path}"] = lambda b=box, e=boxed: zygote_round(b, shell, e, workspace, True)
        rounds[f"terminal/{path}"] = lambda b=box, e=boxed: terminal_round(
            b, args.command, e, workspace
        )
    wall: dict[str, list[float]] = {name: [] for name in rounds}
    cpu = dict.fromkeys(rounds, 0.0)
    sandboxes = [outside, *boxes.values()]
    try:
        for _ in range(3):  # warm the page cache, start the zygotes
            for run in rounds.values():
                await run()
        for _ in range(args.runs):
            for name, run in rounds.items():
                cpu_before, zygotes_before = cpu_ms(), zygote_cpu_ms(sandboxes)
                start = time.perf_counter()
                await run()
                wall[name].append((time.perf_counter() - start) * 1000)
                cpu[name] += cpu_ms() - cpu_before + zygote_cpu_ms(sandboxes) - zygotes_before
        starts = {path: [] for path in paths}
        for _ in range(args.sessions):
            for path in paths:
                starts[path].append(await session_start(path, workspace, shell, env))
    finally:
        for sandbox in sandboxes:
            sandbox.close()
        shutil.rmtree(workspace, ignore_errors=True)
    print(f"Landlock ABI {landlock_abi()}, {args.runs} rounds of `bash -c {args.command!r}`")
    base_wall = statistics.median(wall["direct"])
    base_cpu = cpu["direct"] / args.runs
    for name in rounds:
        median, mean_cpu = statistics.median(wall[name]), cpu[name] / args.runs
        added = "" if name == "direct" else (
            f", added {median - base_wall:+.1f} ms wall, {mean_cpu - base_cpu:+.1f} ms CPU"
        )  # fmt: skip
        print(f"{name:>18}: wall median {median:.1f} ms, CPU mean {mean_cpu:.1f} ms{added}")
    for path, times in starts.items():
        median = statistics.median(times)
        print(f"{'start/' + path:>18}: a session's first command {median:.1f} ms (median)")
    print("goal: at most 5 ms added per command on a warm zygote")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--command", default="true")
    anyio.run(measure, parser.parse_args())


if __name__ == "__main__":
    main()
