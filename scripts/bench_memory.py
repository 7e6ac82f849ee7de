"""Heron's memory where a test once asserted a limit (tests now check only the behaviour, since
RSS figures move with the machine's load):

- `bash` printing 100 MB: growth of peak RSS (VmHWM) over the turn, beside `echo hi`;
- a noisy command (~2 MB/s for 8 s of progress snapshots): RSS growth while it runs;
- an editor that stops reading while a 60 MB answer streams: RSS growth after `--stall` s,
  and how long the exit takes once stdin closes.

Each run uses a fresh `heron` (a warm-up prompt first, so the model client is loaded); figures
are medians over `--runs`.

    python scripts/bench_memory.py [--runs 3] [--stall 8]

Targets (2-core machine): 100 MB output ≤ +50 MB peak, noisy command ≤ +3 MB, a stalled editor
≤ +40 MB and an exit ≤ 1.5 s. Asserts nothing but that the turns end.
"""

from __future__ import annotations

import argparse
import json
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

NO_CAPS = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
NOISY = (
    "for i in $(seq 80); do head -c 24000 /dev/zero | tr '\\0' a; echo; sleep 0.1; done;"
    " echo THE-END"
)


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field}")


def warm_agent(fake: FakeOpenAI, home: Path, workspace: str) -> tuple[AcpClient, str]:
    client = AcpClient(workspace)
    client.start(
        [_heron_executable(), "--mode", "full-access"],
        env=heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"}),
    )
    client.initialize(NO_CAPS)
    session = client.new_session(workspace)
    fake.script(text("warm up"))
    client.prompt(session, "hi")
    return client, session


def command_peak_growth_mb(fake: FakeOpenAI, home: Path, workspace: str, command: str) -> float:
    client, session = warm_agent(fake, home, workspace)
    try:
        before = status_kb(client.proc.pid, "VmHWM")
        fake.script(tool_calls(Call("bash", {"command": command}, id="b")), text("ok"))
        assert client.prompt(session, "run", timeout=300)["stopReason"] == "end_turn"
        return (status_kb(client.proc.pid, "VmHWM") - before) / 1024
    finally:
        client.kill()


def noisy_growth_mb(fake: FakeOpenAI, home: Path, workspace: str) -> float:
    client, session = warm_agent(fake, home, workspace)
    try:
        fake.script(tool_calls(Call("bash", {"command": NOISY}, id="n")), text("ok"))
        pending = client.prompt_async(session, "noise")
        client.wait_for_update(lambda u: u.get("content") and u.get("toolCallId") == "n", 60)
        before = status_kb(client.proc.pid, "VmRSS")
        assert pending.result(timeout=300)["stopReason"] == "end_turn"
        return (status_kb(client.proc.pid, "VmRSS") - before) / 1024
    finally:
        client.kill()


def stalled_editor(
    fake: FakeOpenAI, home: Path, workspace: str, stall: float
) -> tuple[float, float]:
    """(RSS growth in MB while nobody reads, seconds from stdin closing to the exit)."""
    fake.script(text("warm"), text(*["x" * 100_000] * 600))
    proc = subprocess.Popen(
        [_heron_executable()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"}),
    )
    assert proc.stdin and proc.stdout

    def send(rid: int, method: str, params: dict) -> None:
        line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        proc.stdin.write(json.dumps(line).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def answer(rid: int) -> dict:
        while (message := json.loads(proc.stdout.readline())).get("id") != rid:  # type: ignore[union-attr]
            pass
        return message

    try:
        send(1, "initialize", {"protocolVersion": 1})
        answer(1)
        send(2, "session/new", {"cwd": workspace, "mcpServers": []})
        session = answer(2)["result"]["sessionId"]
        send(
            3, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
        )
        answer(3)
        idle = status_kb(proc.pid, "VmRSS")
        prompt = [{"type": "text", "text": "a lot"}]
        send(4, "session/prompt", {"sessionId": session, "prompt": prompt})
        time.sleep(stall)  # a benchmark: the editor is away this long
        grown = (status_kb(proc.pid, "VmRSS") - idle) / 1024
        started = time.perf_counter()
        proc.stdin.close()
        proc.wait(timeout=60)
        return grown, time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stall", type=float, default=8.0)
    opts = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as workspace,
        tempfile.TemporaryDirectory() as home_dir,
        FakeOpenAI() as fake,
    ):
        home = Path(home_dir)
        (home / ".config").mkdir()
        big = "head -c 100000000 /dev/zero | tr '\\0' a; echo; echo THE-END"
        rows = {
            "echo hi: peak RSS growth (MB)": [
                command_peak_growth_mb(fake, home, workspace, "echo hi") for _ in range(opts.runs)
            ],
            "100 MB output: peak RSS growth (MB)": [
                command_peak_growth_mb(fake, home, workspace, big) for _ in range(opts.runs)
            ],
            "noisy command: RSS growth (MB)": [
                noisy_growth_mb(fake, home, workspace) for _ in range(opts.runs)
            ],
        }
        stalled = [stalled_editor(fake, home, workspace, opts.stall) for _ in range(opts.runs)]
        rows[f"editor away {opts.stall:g} s: RSS growth (MB)"] = [g for g, _ in stalled]
        rows["... then exit after stdin closes (s)"] = [t for _, t in stalled]
    print(f"memory, medians (max) over {opts.runs} runs")
    for label, values in rows.items():
        print(f"  {label:42} {statistics.median(values):7.2f}  ({max(values):.2f})")


if __name__ == "__main__":
    main()
