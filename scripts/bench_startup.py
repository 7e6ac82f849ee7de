"""Start-up figures: spawn → `initialize` answer, and idle memory after `session/new`.

    python scripts/bench_startup.py [--runs 20] [--heron PATH]

Prints the median and spread over the runs. Targets: ≤ 50 ms and ≤ 60 MB on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def heron_command(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    beside = Path(sys.executable).parent / "heron"
    found = str(beside) if beside.exists() else shutil.which("heron")
    if not found:
        sys.exit("heron is not installed: pip install -e . first")
    return [found]


def one_run(command: list[str], cwd: str) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HERON_"))}
    env["OPENAI_API_KEY"] = "sk-bench"
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"  # never contacted
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    new_session = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []},
    }
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(initialize).encode() + b"\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    elapsed = time.perf_counter() - started
    assert answer.get("id") == 1 and "result" in answer, answer
    proc.stdin.write(json.dumps(new_session).encode() + b"\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    assert answer.get("id") == 2 and "result" in answer, answer
    time.sleep(0.3)  # let any background work settle before reading idle memory
    rss_kb = 0
    with open(f"/proc/{proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    proc.stdin.close()
    proc.wait(timeout=5)
    return elapsed, rss_kb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--heron")
    args = parser.parse_args()
    command = heron_command(args.heron)
    with tempfile.TemporaryDirectory() as cwd:
        one_run(command, cwd)  # warm the OS page cache and .pyc files
        runs = [one_run(command, cwd) for _ in range(args.runs)]
    times = sorted(t * 1000 for t, _ in runs)
    rss = sorted(r / 1024 for _, r in runs)
    print(
        f"spawn → initialize answer: median {statistics.median(times):.1f} ms "
        f"(min {times[0]:.1f}, max {times[-1]:.1f}, {args.runs} runs)"
    )
    print(
        f"idle RSS after session/new: median {statistics.median(rss):.1f} MB "
        f"(min {rss[0]:.1f}, max {rss[-1]:.1f})"
    )
    baseline = []
    for _ in range(10):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        baseline.append((time.perf_counter() - t) * 1000)
    print(f"for scale, `python -c pass`: median {statistics.median(baseline):.1f} ms")


if __name__ == "__main__":
    main()
