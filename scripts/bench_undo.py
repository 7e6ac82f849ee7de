"""/undo figures against the fake OpenAI server (no model time):

- what keeping prior states costs an edit: a model round with one edit_file call on a 100 KB
  file, beside a round with one read_file call of the same file (same I/O, nothing kept);
- /undo of a turn that changed 1 file and 50 files (100 KB each): prompt → answer;
- session/load of 20 turns of 5 deletes each (10 MB of prior states) beside 20 turns of 5
  reads (no undo history);
- a baseline in the same run: `python -c pass`.

    python scripts/bench_undo.py [--runs 5] [--rounds-only]

Prints medians; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, text, tool_calls

BODY = "".join(f"line {i} of a file that is about a hundred kilobytes long\n" for i in range(1800))
# A small read keeps the history short (a long one would be compacted: a model request).


def start(fake: FakeOpenAI, home: Path, workspace: str) -> AcpClient:
    client = AcpClient(workspace)
    env = heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"})
    client.start([_heron_executable(), "--mode", "full-access"], env=env)
    client.initialize()
    return client


def ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


def rounds_ms(client: AcpClient, sid: str, fake: FakeOpenAI, calls: list[Call]) -> float:
    fake.script(*[tool_calls(c) for c in calls], text("done"))
    started = time.perf_counter()
    assert client.prompt(sid, "go", timeout=300)["stopReason"] == "end_turn"
    return ms(started) / (len(calls) + 1)


def undo_ms(client: AcpClient, sid: str) -> float:
    started = time.perf_counter()
    assert client.prompt(sid, "/undo", timeout=300)["stopReason"] == "end_turn"
    return ms(started)


def edits(files: list[str], old: str, new: str) -> list[Call]:
    return [Call("edit_file", {"path": f, "old_string": old, "new_string": new}) for f in files]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--rounds-only",
        action="store_true",
        help="only the edit/read rounds (they also run on a Heron without /undo, to compare)",
    )
    args = parser.parse_args()
    baseline = []
    for _ in range(args.runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        baseline.append(ms(started))
    print(f"baseline `python -c pass`: median {statistics.median(baseline):.1f} ms")
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home = Path(tmp, "home")
        (home / ".config").mkdir(parents=True)
        workspace = os.path.join(tmp, "ws")
        os.mkdir(workspace)
        names = [f"f{i}.txt" for i in range(50)]
        for name in names:
            Path(workspace, name).write_text(BODY)
        client = start(fake, home, workspace)
        try:
            sid = client.new_session(workspace)
            read_call = Call("read_file", {"path": "f0.txt", "limit": 5})
            read = rounds_ms(client, sid, fake, [read_call] * 20)
            flip = [
                c
                for i in range(10)
                for c in edits(["f0.txt"], *(("line 1 ", "LINE 1 "), ("LINE 1 ", "line 1 "))[i % 2])
            ]
            edit = rounds_ms(client, sid, fake, flip)
            print(
                f"model round with one read_file (5 lines of 100 KB): {read:.1f} ms; "
                f"with one edit_file (100 KB, prior state kept): {edit:.1f} ms"
            )
            if args.rounds_only:
                return
            sid = client.new_session(workspace)  # a short history: no compaction below
            one, many, turn = [], [], []
            for _ in range(args.runs):
                rounds_ms(client, sid, fake, edits(["f0.txt"], "line 2 ", "LINE 2 "))
                one.append(undo_ms(client, sid))
                fake.script(tool_calls(*edits(names, "line 3 ", "LINE 3 ")), text("done"))
                started = time.perf_counter()
                client.prompt(sid, "go", timeout=300)
                turn.append(ms(started))
                many.append(undo_ms(client, sid))
            print(
                f"/undo of 1 file: median {statistics.median(one):.1f} ms; of 50 files (100 KB "
                f"each): median {statistics.median(many):.1f} ms, beside the turn that made "
                f"those 50 edits: median {statistics.median(turn):.1f} ms (both send every "
                "diff twice, 20 MB, and the harness schema-checks it)"
            )
            kept = client.new_session(workspace)
            bare = client.new_session(workspace)
            for i in range(20):
                gone = [Call("delete_path", {"path": f"d{i}_{k}.txt"}) for k in range(5)]
                for k in range(5):
                    Path(workspace, f"d{i}_{k}.txt").write_text(BODY)
                fake.script(tool_calls(*gone), text("ok"))
                client.prompt(kept, "go", timeout=300)
                reads = [Call("read_file", {"path": "f0.txt", "limit": 1}) for _ in range(5)]
                fake.script(tool_calls(*reads), text("ok"))
                client.prompt(bare, "go", timeout=300)
        finally:
            client.close_stdin()
            client.wait_exit(30)
        client.assert_clean()
        loads: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(args.runs):
            for label, session in (("with", kept), ("without", bare)):
                client = start(fake, home, workspace)
                started = time.perf_counter()
                client.request(
                    "session/load",
                    {"sessionId": session, "cwd": workspace, "mcpServers": []},
                    timeout=60,
                )
                loads[label].append(ms(started))
                client.kill()
                client.assert_clean()
        print(
            "session/load of 20 turns of 5 deletes (10 MB of prior states kept): median "
            f"{statistics.median(loads['with']):.1f} ms; of 20 turns of 5 reads: "
            f"{statistics.median(loads['without']):.1f} ms"
        )


if __name__ == "__main__":
    main()
