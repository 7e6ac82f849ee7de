"""Slash-command figures: what the command list costs `session/new`, and what checking the
command folders costs each prompt.

    python scripts/bench_commands.py [--runs 20] [--heron PATH]

Prints medians:
- `session/new` request → answer, and answer → `available_commands_update`, in a project with
  20 command files (the list is sent after the answer, so the first figure must not move;
  compare with `--baseline --heron PATH` for a build without commands; the second figure
  includes the 50 ms Heron waits on purpose, so the list never competes with the answer);
- `/help` prompt → answer (a scan of the folders, no model request);
- one scan of a folder of N command files, first (read) and again (stat only), in process;
beside `os.stat` of one file, for scale.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.commands.files import CommandFolder


def heron_command(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    beside = Path(sys.executable).parent / "heron"
    found = str(beside) if beside.exists() else shutil.which("heron")
    if not found:
        sys.exit("heron is not installed: pip install -e . first")
    return [found]


def make_commands(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"cmd{i:03}.md").write_text(
            f"---\ndescription: Command {i}\nhint: what\n---\nDo thing {i} with $ARGUMENTS.\n"
        )


class Agent:
    def __init__(self, command: list[str], home: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HERON_"))}
        env |= {
            "OPENAI_API_KEY": "sk-bench",
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # never contacted by /help
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_DATA_HOME": f"{home}/.local/share",
        }
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.ids = iter(range(1, 1_000_000))

    def send(self, method: str, params: dict) -> int:
        rid = next(self.ids)
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return rid

    def read_until(self, predicate) -> dict:
        assert self.proc.stdout
        while True:
            message = json.loads(self.proc.stdout.readline())
            if predicate(message):
                return message

    def answer(self, rid: int) -> dict:
        return self.read_until(lambda m: m.get("id") == rid)

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def is_listing(message: dict) -> bool:
    update = (message.get("params") or {}).get("update") or {}
    return update.get("sessionUpdate") == "available_commands_update"


def one_run(command: list[str], cwd: str, home: str, baseline: bool) -> tuple[float, float, float]:
    """The second session/new and the second /help of a process: the first ones also wait
    for Heron's own imports (the rest of Heron, then the model client)."""
    agent = Agent(command, home)
    rid = agent.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    agent.read_until(lambda m: m.get("id") == rid)
    for _ in range(2):
        started = time.perf_counter()
        rid = agent.send("session/new", {"cwd": cwd, "mcpServers": []})
        answer = agent.answer(rid)
        answered = listed = time.perf_counter()
        if baseline:
            continue
        agent.read_until(is_listing)
        listed = time.perf_counter()
    session_id = answer["result"]["sessionId"]
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "/help"}]}
    asked = helped = 0.0
    for _ in range(0 if baseline else 2):
        asked = time.perf_counter()
        agent.answer(agent.send("session/prompt", prompt))
        helped = time.perf_counter()
    agent.close()
    return answered - started, listed - answered, helped - asked


def scan_figures(count: int, repeats: int) -> tuple[float, float]:
    first, again = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            make_commands(Path(tmp), count)
            folder = CommandFolder(Path(tmp), "project", confine=Path(tmp))
            t = time.perf_counter()
            folder.scan()
            first.append(time.perf_counter() - t)
            t = time.perf_counter()
            folder.scan()
            again.append(time.perf_counter() - t)
    return statistics.median(first) * 1000, statistics.median(again) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--heron")
    parser.add_argument(
        "--baseline", action="store_true", help="a build without commands: session/new only"
    )
    args = parser.parse_args()
    command = heron_command(args.heron)
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryDirectory() as home:
        make_commands(Path(cwd) / ".heron" / "commands", 20)
        one_run(command, cwd, home, args.baseline)  # warm the page cache and .pyc files
        runs = [one_run(command, cwd, home, args.baseline) for _ in range(args.runs)]
    labels = ("session/new → answer", "answer → available_commands_update", "/help → answer")
    for index, label in enumerate(labels[:1] if args.baseline else labels):
        values = sorted(run[index] * 1000 for run in runs)
        print(
            f"{label}: median {statistics.median(values):.2f} ms "
            f"(min {values[0]:.2f}, max {values[-1]:.2f}, {args.runs} runs, 20 command files)"
        )
    for count in (0, 20, 200):
        first, again = scan_figures(count, 15)
        print(f"scan of {count} command files: first {first:.2f} ms, again {again:.2f} ms")
    with tempfile.NamedTemporaryFile() as f:
        stats = []
        for _ in range(1000):
            t = time.perf_counter()
            os.stat(f.name)
            stats.append(time.perf_counter() - t)
    print(f"for scale, one os.stat: median {statistics.median(stats) * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
