"""What the auto-mode sandbox adds to each command.

    python scripts/bench_sandbox.py [--runs 100] [--command 'true']

Starts `bash -c CMD` (Heron's environment) the three ways Heron can, alternating so all see
the same load, each round as the local runner does it (start, read the output to its end, wait
for the exit status):

- unsandboxed: `agent.tools.shell.start_unconfined`, as `bash` outside auto mode;
- zygote: through the session's confined zygote (`Sandbox.spawn`), as `bash` in auto mode;
  its one start per session (a Python start, ~10 ms) is outside the rounds;
- launcher: through the launcher script (`Sandbox.launcher`), a Python start per command,
  which is what the editor's terminal runs in auto mode.

Prints the median wall time of each and what each adds to the unsandboxed one, and the CPU
time (user + system) a round costs on average: Heron's own, the command's, and for the
zygote its share (read from /proc in clock ticks, hence the average over many rounds).
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
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.processes.tree import forget
from agent.sandbox import Sandbox, available
from agent.sandbox.landlock import abi_version
from agent.tools.shell import start_unconfined

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def cpu_ms() -> float:
    """Heron's own CPU and that of its waited-for children, in ms."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (mine.ru_utime + mine.ru_stime + kids.ru_utime + kids.ru_stime) * 1000


def zygote_cpu_ms(sandbox: Sandbox) -> float:
    """The zygote's CPU and that of the commands it collected, in ms (0 before it starts)."""
    zygote = sandbox._zygote
    process = zygote._process if zygote else None
    if process is None:
        return 0.0
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) * TICK_MS  # utime stime cutime cstime


async def plain_round(argv: list[str], env: dict[str, str], cwd: str) -> None:
    proc = await start_unconfined(argv, env, cwd)  # as `bash` starts it outside auto mode
    assert proc.stdout is not None
    async for _ in proc.stdout:
        pass
    await proc.wait()
    await proc.aclose()
    forget(proc.pid)


async def zygote_round(sandbox: Sandbox, argv: list[str], env: dict[str, str], cwd: str) -> None:
    proc = await sandbox.spawn(argv, env, Path(cwd))
    try:
        while True:
            await proc.receive()
    except anyio.EndOfStream:
        pass
    assert await proc.wait() == 0
    await proc.aclose()


async def measure(args: argparse.Namespace) -> None:
    workspace = tempfile.mkdtemp(prefix="bench-sandbox-")
    sandbox = Sandbox(roots=lambda: [Path(workspace)], active=lambda: True)
    shell = [shutil.which("bash") or "/bin/sh", "-c", args.command]
    env = {**os.environ, "TERM": "dumb"}
    boxed_env = {**env, **sandbox.env()}
    rounds = {
        "unsandboxed": lambda: plain_round(shell, env, workspace),
        "zygote": lambda: zygote_round(sandbox, shell, boxed_env, workspace),
        "launcher": lambda: plain_round(sandbox.launcher(shell), boxed_env, workspace),
    }
    wall: dict[str, list[float]] = {name: [] for name in rounds}
    cpu = dict.fromkeys(rounds, 0.0)
    try:
        for _ in range(3):  # warm the page cache, start the zygote
            for run in rounds.values():
                await run()
        for _ in range(args.runs):
            for name, run in rounds.items():
                cpu_before, zygote_before = cpu_ms(), zygote_cpu_ms(sandbox)
                start = time.perf_counter()
                await run()
                wall[name].append((time.perf_counter() - start) * 1000)
                cpu[name] += cpu_ms() - cpu_before + zygote_cpu_ms(sandbox) - zygote_before
    finally:
        sandbox.close()
        shutil.rmtree(workspace, ignore_errors=True)
    print(f"Landlock ABI {abi_version()}, {args.runs} rounds of `bash -c {args.command!r}`")
    base_wall = statistics.median(wall["unsandboxed"])
    base_cpu = cpu["unsandboxed"] / args.runs
    for name in rounds:
        median, mean_cpu = statistics.median(wall[name]), cpu[name] / args.runs
        added = "" if name == "unsandboxed" else (
            f", added {median - base_wall:+.1f} ms wall, {mean_cpu - base_cpu:+.1f} ms CPU"
        )  # fmt: skip
        print(f"{name:>12}: wall median {median:.1f} ms, CPU mean {mean_cpu:.1f} ms{added}")
    print("goal: under 5 ms added per command")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--command", default="true")
    args = parser.parse_args()
    if not available():
        sys.exit(f"no Landlock here (ABI {abi_version()}): nothing to measure")
    anyio.run(measure, args)


if __name__ == "__main__":
    main()
