"""What the auto-mode sandbox adds to each command.

    python scripts/bench_sandbox.py [--runs 40] [--command 'true']

Starts the command as `bash` starts it (`bash -c CMD`, Heron's environment), unsandboxed and
through the sandbox launcher with a session's real rules (agent.sandbox.Sandbox), alternating
so both see the same load, and prints the median wall time of each round and the difference,
and the CPU time (user + system) each round cost, which a loaded machine moves less.
The launcher is Python (`-I -S`, stdlib only): its start is most of the difference.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.sandbox import Sandbox, available
from agent.sandbox.landlock import abi_version


def round_ms(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall ms, CPU ms of the command and everything it ran)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, check=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--command", default="true")
    args = parser.parse_args()
    if not available():
        sys.exit(f"no Landlock here (ABI {abi_version()}): nothing to measure")
    workspace = tempfile.mkdtemp(prefix="bench-sandbox-")
    sandbox = Sandbox(roots=lambda: [Path(workspace)], active=lambda: True)
    shell = [shutil.which("bash") or "/bin/sh", "-c", args.command]
    env = {**os.environ, "TERM": "dumb"}
    plain_env, boxed_env = env, {**env, **sandbox.env()}
    boxed = sandbox.launcher(shell)
    try:
        for _ in range(3):  # warm the page cache for both
            round_ms(shell, plain_env, workspace)
            round_ms(boxed, boxed_env, workspace)
        plain: list[tuple[float, float]] = []
        confined: list[tuple[float, float]] = []
        for _ in range(args.runs):
            plain.append(round_ms(shell, plain_env, workspace))
            confined.append(round_ms(boxed, boxed_env, workspace))
    finally:
        sandbox.close()
        shutil.rmtree(workspace, ignore_errors=True)
    print(f"Landlock ABI {abi_version()}, {args.runs} rounds of `bash -c {args.command!r}`")
    for what, index in (("wall", 0), ("CPU", 1)):
        a = statistics.median(r[index] for r in plain)
        b = statistics.median(r[index] for r in confined)
        print(
            f"{what:>4}: unsandboxed median {a:.1f} ms, sandboxed {b:.1f} ms, "
            f"added {b - a:.1f} ms per command (goal: < 5 ms)"
        )


if __name__ == "__main__":
    main()
