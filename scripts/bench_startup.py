"""Cold-start figures, as an editor sees them, against the fake OpenAI server on loopback:

- spawn → `initialize` answered;
- spawn → `session/new` answered (sent as soon as `initialize` is answered);
- a first prompt sent 1 s after `session/new`: its first chunk's latency (prompt sent → first
  `agent_message_chunk`) minus that of a warm prompt (the next one, same process);
- a first prompt sent right after `session/new`: spawn → its first chunk;
- idle RSS, 1 s after `session/new` (the model client warmed up by then).

    python scripts/bench_startup.py [--runs 20] [--heron PATH [--heron PATH]]

Each figure is the median and max over `--runs` rounds (two spawns each), printed beside
`python -c pass` (the same interpreter, interleaved with the spawns). `--heron A --heron B`
compares two builds, interleaved round by round, so that both see the same machine load.
Targets (2-core machine): initialize ≤ 50 ms, session/new ≤ 150 ms, first prompt after 1 s ≤
warm + 30 ms, immediate first chunk ≤ 700 ms, idle RSS ≤ 70 MB. Asserts nothing but that the
protocol answers are right.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import _heron_executable, heron_env
from fake_openai import FakeOpenAI, text


class Agent:
    """One spawned `heron`, driven with plain blocking pipe reads (no client threads that
    would add their own latency to what is measured)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stdin and self.proc.stdout
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self.ids = iter(range(1, 1 << 30))

    def since_spawn(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def send(self, method: str, params: dict[str, Any]) -> int:
        request_id = next(self.ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()
        return request_id

    def read_until(self, want: Any) -> dict[str, Any]:
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError("heron closed its stdout")
            message = json.loads(line)
            if "error" in message:
                raise RuntimeError(f"heron answered an error: {message}")
            if want(message):
                return message

    def answer(self, request_id: int) -> dict[str, Any]:
        message = self.read_until(lambda m: m.get("id") == request_id and "method" not in m)
        return message["result"]

    def first_chunk(self) -> None:
        self.read_until(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
            )
        )

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def close(self) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def open_session(agent: Agent, cwd: str) -> tuple[str, float, float]:
    """(session id, ms to the initialize answer, ms to the session/new answer), from spawn."""
    initialize = agent.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    agent.answer(initialize)
    initialized = agent.since_spawn()
    new = agent.send("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = agent.answer(new)["sessionId"]
    return session_id, initialized, agent.since_spawn()


def prompt_to_first_chunk(agent: Agent, fake: FakeOpenAI, session_id: str) -> tuple[float, float]:
    """(ms from sending a prompt to its first chunk, ms from spawn to it); waits for the
    turn's end."""
    fake.script(text("hello", " there"))
    started = time.perf_counter()
    prompt = agent.send(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
    )
    agent.first_chunk()
    elapsed = (time.perf_counter() - started) * 1000
    since_spawn = agent.since_spawn()
    assert agent.answer(prompt) == {"stopReason": "end_turn"}
    return elapsed, since_spawn


def python_pass() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - started) * 1000


FIGURES = (
    "spawn → initialize answered",
    "spawn → session/new answered",
    "first prompt 1 s after session/new: first chunk",
    "warm prompt: first chunk",
    "first prompt 1 s after session/new − warm",
    "spawn → first chunk, prompt right after session/new",
    "idle RSS 1 s after session/new (MB)",
)


def one_round(command: list[str], env: dict[str, str], fake: FakeOpenAI, cwd: str) -> list[float]:
    """One value of each of FIGURES: two spawns."""
    # An editor that opens a thread, then the user types for a while.
    agent = Agent(command, env)
    session_id, initialized, opened = open_session(agent, cwd)
    time.sleep(1.0)
    rss = agent.rss_mb()
    first, _ = prompt_to_first_chunk(agent, fake, session_id)
    warm, _ = prompt_to_first_chunk(agent, fake, session_id)
    agent.close()
    # A prompt that comes with the thread (e.g. a client given the prompt on its command line).
    agent = Agent(command, env)
    session_id, _, _ = open_session(agent, cwd)
    _, immediate = prompt_to_first_chunk(agent, fake, session_id)
    agent.close()
    return [initialized, opened, first, warm, first - warm, immediate, rss]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--heron",
        action="append",
        help="a heron executable (default: the venv's); repeat to compare builds, interleaved",
    )
    args = parser.parse_args()
    commands = [[path] for path in args.heron or [_heron_executable()]]
    baseline: list[float] = []
    figures = [[[] for _ in FIGURES] for _ in commands]
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home = Path(tmp, "home")
        (home / ".config").mkdir(parents=True)
        cwd = os.path.join(tmp, "ws")
        os.mkdir(cwd)
        env = heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"})
        for command in commands:
            # One unmeasured spawn warms the page cache and writes the .pyc files (and the
            # session store exists from then on, as it does for anyone who used Heron before).
            agent = Agent(command, env)
            session_id, _, _ = open_session(agent, cwd)
            prompt_to_first_chunk(agent, fake, session_id)
            agent.close()
        for _ in range(args.runs):
            baseline.append(python_pass())
            for command, values in zip(commands, figures, strict=True):
                for column, value in zip(values, one_round(command, env, fake, cwd), strict=True):
                    column.append(value)
    print(
        f"{args.runs} rounds, {os.cpu_count()} cores, load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; ms unless said otherwise"
    )
    width = max(map(len, FIGURES))
    print(
        f"  {'python -c pass':<{width}}  median {statistics.median(baseline):7.1f}  "
        f"max {max(baseline):7.1f}"
    )
    for command, values in zip(commands, figures, strict=True):
        if len(commands) > 1:
            print(f"{command[0]}:")
        for name, column in zip(FIGURES, values, strict=True):
            print(
                f"  {name:<{width}}  median {statistics.median(column):7.1f}  "
                f"max {max(column):7.1f}"
            )


if __name__ == "__main__":
    main()
