"""`heron sessions` wall time, on an empty store and on one of 10,000 sessions.

    python scripts/bench_sessions_cli.py [--runs 9] [--sessions 10000]

Prints the median and max of each, beside `python -c pass` in the same run. Measures what a
user at a terminal waits for: the whole process, start-up included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent.store import db


def heron() -> str:
    beside = Path(sys.executable).parent / "heron"
    found = str(beside) if beside.exists() else shutil.which("heron")
    if not found:
        sys.exit("heron is not installed: pip install -e . first")
    return found


def fill(path: Path, count: int) -> None:
    conn = db.connect(path)
    conn.execute("BEGIN IMMEDIATE")
    for i in range(count):
        row = db.SessionRow(
            id=f"sess_{i:032x}",
            cwd=f"/home/u/p{i % 50}",
            additional_dirs=[],
            title=f"Fix the failing test number {i} in the parser",
            created_at="2026-11-01T00:00:00.000000Z",
            updated_at=f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00.{i:06d}Z",
            mode="ask",
            model="gpt-4.1",
        )
        db.upsert_session(conn, row)
    conn.execute("COMMIT")
    conn.close()


def timed(command: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        empty, full = Path(tmp, "empty"), Path(tmp, "full")
        full.mkdir()
        fill(full / "sessions.db", args.sessions)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HERON_"))}
        env["HOME"] = tmp  # no user config file
        cases = [
            ("python -c pass", [sys.executable, "-c", "pass"], empty),
            ("heron sessions (empty store)", [heron(), "sessions"], empty),
            (f"heron sessions ({args.sessions} sessions)", [heron(), "sessions"], full),
            ("  --json", [heron(), "sessions", "--json"], full),
            ("  --limit 20", [heron(), "sessions", "--limit", "20"], full),
            ("  --cwd (1 folder in 50)", [heron(), "sessions", "--cwd", "/home/u/p7"], full),
        ]
        print(f"{'':40} median     max   ({args.runs} runs)")
        for name, command, data in cases:
            median, worst = timed(command, env | {"HERON_DATA_DIR": str(data)}, args.runs)
            print(f"{name:40} {median * 1000:6.0f} ms {worst * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
