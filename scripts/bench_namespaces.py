"""What entering Heron's own namespaces costs (agent.sandbox.namespaces, the path without bwrap).

    python scripts/bench_namespaces.py [--runs 20] [--legacy-mounts]

Each round forks a throwaway process that calls `enter(plan)` then, as pid 1 inside,
`drop_capabilities()`, and reports the time each took (CLOCK_MONOTONIC is the same inside)
and the CPU pid 1 spent building the root, which the machine's load does not inflate.
Alternating with it, a baseline round forks the same way and reports from the grandchild: what
the fork that `enter` makes costs on its own. Two plans:

- narrow: what `python -I -S` needs read-only, a /dev, a /proc, a tmpfs /tmp, a workspace;
- whole: the issue's shape: the whole filesystem read-only, /dev, /proc, empty /run and /tmp,
  the workspace writable but its .git read-only.

Then the command line end to end (`python -I -S namespaces.py PLAN -- true`) against a bare
`python -I -S -c pass`. Prints medians in ms. `--legacy-mounts` remounts through
/proc/self/mountinfo as on kernels before 5.12.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.sandbox import namespaces

TIMES = struct.Struct("=qqq")
PYTHON = os.path.realpath(sys.executable)


def plans(workspace: Path) -> dict[str, list[list[Any]]]:
    narrow: list[list[Any]] = [["ro", "/usr", "/usr"]]
    for name in ("bin", "sbin", "lib", "lib64"):
        host = Path("/", name)
        if host.is_symlink():
            narrow.append(["symlink", os.readlink(host), f"/{name}"])
        elif host.is_dir():
            narrow.append(["ro", str(host), f"/{name}"])
    prefix = str(Path(PYTHON).parents[1])
    if not prefix.startswith("/usr/"):
        narrow.append(["ro", prefix, prefix])
    common = [["dev", "/dev"], ["proc", "/proc"], ["tmpfs", "/tmp"]]
    own = [["rw", str(workspace), str(workspace)]]
    whole = [["ro", "/", "/"], *common, ["tmpfs", "/run"], *own]
    whole.append(["ro", str(workspace / ".git"), str(workspace / ".git")])
    return {"narrow": [*narrow, *common, *own], "whole": whole}


def entered(plan: list[list[Any]]) -> tuple[float, float, float]:
    """ms spent in enter() and in drop_capabilities(), from a throwaway process, and the CPU
    pid 1 spent in enter() (building the root: not slowed by the machine's load)."""
    read, write = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(read)
        try:
            start = time.perf_counter_ns()
            namespaces.enter(plan)  # the helper becomes the monitor; this is pid 1 inside
            inside, cpu = time.perf_counter_ns(), time.process_time_ns()  # CPU since the fork
            namespaces.drop_capabilities()
            os.write(write, TIMES.pack(inside - start, time.perf_counter_ns() - inside, cpu))
        finally:
            os._exit(0)
    os.close(write)
    data = os.read(read, TIMES.size)
    os.close(read)
    os.waitpid(helper, 0)
    enter_ns, drop_ns, cpu_ns = TIMES.unpack(data)
    return enter_ns / 1e6, drop_ns / 1e6, cpu_ns / 1e6


def forked() -> float:
    """ms from a fork to the child running, the baseline of the fork inside enter()."""
    read, write = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(read)
        start = time.perf_counter_ns()
        child = os.fork()
        if child == 0:
            os.write(write, TIMES.pack(time.perf_counter_ns() - start, 0, 0))
            os._exit(0)
        os.waitpid(child, 0)
        os._exit(0)
    os.close(write)
    data = os.read(read, TIMES.size)
    os.close(read)
    os.waitpid(helper, 0)
    return TIMES.unpack(data)[0] / 1e6


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--legacy-mounts", action="store_true")
    args = parser.parse_args()
    reason = namespaces.available()
    if reason:
        sys.exit(f"no namespaces here: {reason}")
    if args.legacy_mounts:
        namespaces._use_mount_setattr = False
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / ".git").mkdir()
        for name, plan in plans(workspace).items():
            enters, drops, cpus, forks = [], [], [], []
            for _ in range(args.runs):
                enter_ms, drop_ms, cpu_ms = entered(plan)
                enters.append(enter_ms)
                drops.append(drop_ms)
                cpus.append(cpu_ms)
                forks.append(forked())
            print(
                f"{name:6} plan ({len(plan)} entries): enter() {statistics.median(enters):.2f} ms"
                f" (a fork alone: {statistics.median(forks):.2f} ms; CPU of pid 1 building the"
                f" root: {statistics.median(cpus):.2f} ms),"
                f" drop_capabilities() {statistics.median(drops):.3f} ms"
            )
        options = ["--legacy-mounts"] if args.legacy_mounts else []
        script = str(Path(namespaces.__file__).resolve())
        command = [PYTHON, "-I", "-S", script, *options, json.dumps(plans(workspace)["narrow"])]
        bare, cli = [], []
        for _ in range(args.runs):
            bare.append(wall([PYTHON, "-I", "-S", "-c", "pass"]))
            cli.append(wall([*command, "--", "/bin/true"]))
        print(
            f"command line, narrow plan, `true`: {statistics.median(cli):.1f} ms"
            f" against a bare Python start {statistics.median(bare):.1f} ms"
            f" (+{statistics.median(cli) - statistics.median(bare):.1f} ms)"
        )
    print(f"medians of {args.runs} runs; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
