"""Heron's memory while read_file reads a 500 MB file on the local disk, beside a baseline.

For each run a fresh `heron` (so the peak RSS, VmHWM, belongs to that run) answers one warm-up
prompt, then one prompt whose model calls read_file once: on a 1 KB file (baseline) or on the
big file (real bytes, not sparse: text lines all the way). Prints the median growth of peak RSS
and the median time of the read turn.

    python scripts/bench_files.py [--size-mb 500] [--runs 3] [--dir /var/tmp]

Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, text, tool_calls

NO_FS = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def one_run(fake: FakeOpenAI, home: Path, workspace: str, name: str) -> tuple[float, float]:
    """(peak RSS growth in MB, read turn in ms)."""
    client = AcpClient(workspace)
    client.start(
        [_heron_executable(), "--mode", "full-access"],
        env=heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"}),
    )
    try:
        client.initialize(NO_FS)
        session = client.new_session(workspace)
        fake.script(text("warm up"))
        client.prompt(session, "hi")
        before = peak_rss_kb(client.proc.pid)
        fake.script(tool_calls(Call("read_file", {"path": name}, id="r")), text("done"))
        started = time.perf_counter()
        result = client.prompt(session, "read", timeout=300)
        elapsed = (time.perf_counter() - started) * 1000
        assert result["stopReason"] == "end_turn", result
        return (peak_rss_kb(client.proc.pid) - before) / 1024, elapsed
    finally:
        client.kill()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default="/var/tmp", help="where the big file goes (local disk)")
    opts = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(dir=opts.dir) as workspace,
        tempfile.TemporaryDirectory() as home_dir,
        FakeOpenAI() as fake,
    ):
        home = Path(home_dir)
        (home / ".config").mkdir()
        Path(workspace, "small.txt").write_text("a short line\n" * 80)
        line = b"x" * 99 + b"\n"
        block = line * 10_000  # 1 MB
        with open(Path(workspace, "big.txt"), "wb") as f:
            for _ in range(opts.size_mb):
                f.write(block)
        figures = {}
        for name in ("small.txt", "big.txt"):
            runs = [one_run(fake, home, workspace, name) for _ in range(opts.runs)]
            figures[name] = (
                statistics.median(r[0] for r in runs),
                statistics.median(r[1] for r in runs),
            )
    print(f"read_file, {opts.runs} runs each, medians (big file: {opts.size_mb} MB in {opts.dir})")
    for name, label in (("small.txt", "baseline (1 KB file)"), ("big.txt", "big file")):
        rss, ms = figures[name]
        print(f"  {label:24} peak RSS growth {rss:7.1f} MB   read turn {ms:8.1f} ms")


if __name__ == "__main__":
    main()
