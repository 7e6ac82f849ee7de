"""MCP figures against the fake OpenAI server and tests/mcp_servers/tools_server.py (stdio):

- `session/new` answer time with 0 and with 3 stdio servers (target: the same; it never waits);
- time from the first `session/prompt` (sent right after `session/new`) to the first model
  request, with 0 and 3 servers (the prompt waits for them to start: SDK import + start-up);
- per-call overhead of an MCP tool (`echo`) against a built-in one (`read_file`), per round;
- with `--bounds`: Heron's peak RSS (VmHWM) after a server writes `--stderr-mb` MB to stderr
  without a newline, and after a `--result-mb` MB text result, against a same-run baseline
  (a session whose server answered one `echo`).

    python scripts/bench_mcp.py [--runs 5] [--rounds 20]
    python scripts/bench_mcp.py --bounds [--stderr-mb 300] [--result-mb 30]

Prints medians; asserts nothing.
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

SERVER = str(Path(__file__).resolve().parents[1] / "tests" / "mcp_servers" / "tools_server.py")


def servers(n: int, markers: str) -> list[dict[str, object]]:
    env = [{"name": "MARKER_DIR", "value": markers}]
    return [
        {"name": f"s{i}", "command": sys.executable, "args": [SERVER], "env": env} for i in range(n)
    ]


def start(fake: FakeOpenAI, home: Path, workspace: str) -> AcpClient:
    client = AcpClient(workspace)
    client.start(
        [_heron_executable(), "--mode", "full-access"],
        env=heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"}),
    )
    client.initialize()
    return client


def session_new_ms(fake: FakeOpenAI, home: Path, workspace: str, markers: str, n: int) -> float:
    client = start(fake, home, workspace)
    try:
        started = time.perf_counter()
        client.new_session(workspace, servers(n, markers))
        return (time.perf_counter() - started) * 1000
    finally:
        client.kill()


def first_request_ms(fake: FakeOpenAI, home: Path, workspace: str, markers: str, n: int) -> float:
    client = start(fake, home, workspace)
    try:
        sid = client.new_session(workspace, servers(n, markers))
        seen = len(fake.requests)
        fake.script(text("hi"))
        started = time.perf_counter()
        pending = client.prompt_async(sid, "hi")
        while len(fake.requests) == seen:
            time.sleep(0.001)
        elapsed = (time.perf_counter() - started) * 1000
        pending.result(30)
        return elapsed
    finally:
        client.kill()


def per_call_ms(client: AcpClient, sid: str, fake: FakeOpenAI, call: Call, rounds: int) -> float:
    fake.script(*[tool_calls(call) for _ in range(rounds)], text("done"))
    started = time.perf_counter()
    client.prompt(sid, "go", timeout=120)
    return (time.perf_counter() - started) * 1000 / rounds


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_after(fake: FakeOpenAI, home: Path, ws: str, mk: str, call: Call) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of a fresh Heron whose one server answered `call`."""
    client = start(fake, home, ws)
    try:
        sid = client.new_session(ws, servers(1, mk))
        fake.script(tool_calls(call), text("done"))
        started = time.perf_counter()
        client.prompt(sid, "go", timeout=600)
        elapsed = time.perf_counter() - started
        assert client.proc is not None
        return peak_rss_mb(client.proc.pid), elapsed
    finally:
        client.kill()


def bounds(stderr_mb: int, result_mb: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home, workspace, markers = Path(tmp, "home"), Path(tmp, "ws"), Path(tmp, "markers")
        for path in (home / ".config", workspace, markers):
            path.mkdir(parents=True)
        ws, mk = str(workspace), str(markers)
        cases = [
            ("baseline: echo", Call("mcp__s0__echo", {"text": "x"})),
            (
                f"{stderr_mb} MB of stderr, no newline",
                Call("mcp__s0__shout", {"megabytes": stderr_mb}),
            ),
            (f"{result_mb} MB text result", Call("mcp__s0__flood", {"megabytes": result_mb})),
        ]
        for label, call in cases:
            figures = [rss_after(fake, home, ws, mk, call) for _ in range(runs)]
            rss = statistics.median(f[0] for f in figures)
            secs = statistics.median(f[1] for f in figures)
            print(f"peak RSS, {label}: median {rss:.0f} MB (turn {secs:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--bounds", action="store_true", help="peak RSS for huge MCP output")
    parser.add_argument("--stderr-mb", type=int, default=300)
    parser.add_argument("--result-mb", type=int, default=30)
    opts = parser.parse_args()
    if opts.bounds:
        bounds(opts.stderr_mb, opts.result_mb, opts.runs)
        return
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home, workspace, markers = Path(tmp, "home"), Path(tmp, "ws"), Path(tmp, "markers")
        for path in (home / ".config", workspace, markers):
            path.mkdir(parents=True)
        (workspace / "a.txt").write_text("hello\n")
        ws, mk = str(workspace), str(markers)
        for n in (0, 3):
            runs = [session_new_ms(fake, home, ws, mk, n) for _ in range(opts.runs)]
            print(f"session/new, {n} stdio servers: median {statistics.median(runs):.1f} ms")
        for n in (0, 3):
            runs = [first_request_ms(fake, home, ws, mk, n) for _ in range(opts.runs)]
            median = statistics.median(runs)
            print(f"first prompt → first model request, {n} servers: median {median:.0f} ms")
        client = start(fake, home, ws)
        try:
            sid = client.new_session(ws, servers(1, mk))
            fake.script(text("warm"))
            client.prompt(sid, "warm up", timeout=60)
            builtin = Call("read_file", {"path": "a.txt"})
            mcp = Call("mcp__s0__echo", {"text": "x"})
            b = [per_call_ms(client, sid, fake, builtin, opts.rounds) for _ in range(3)]
            m = [per_call_ms(client, sid, fake, mcp, opts.rounds) for _ in range(3)]
            print(f"per call, built-in read_file: median {statistics.median(b):.1f} ms")
            print(f"per call, MCP echo (stdio):   median {statistics.median(m):.1f} ms")
        finally:
            client.kill()


if __name__ == "__main__":
    main()
