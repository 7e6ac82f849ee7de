"""Turn figures against the fake OpenAI server (no network, no model time):

- time to first chunk: `session/prompt` sent → first `agent_message_chunk` received (cold once,
  then warm over --prompts prompts);
- flood: one answer of 2000 one-word deltas sent at once (--runs times): wall time, Heron's CPU
  per delta beside the fake server's own time to send a delta, and how many notifications
  carried the text (Heron merges deltas that arrive faster than they can be written);
- a warm 200-delta turn, and one 20,000-delta answer (linear cost: about 10× the flood);
- tool-call overhead: one model round that calls `read_file` (or a local `bash true`), per round;
- a 60-turn conversation (one read_file round per turn): ms per turn, first 10 against last 10;
- cancel latency during `sleep 60`.

    python scripts/bench_turn.py [--runs 10] [--prompts 20] [--rounds 30]

Prints medians and maxima over the repeated runs; asserts nothing but that the text arrived
whole. The client reads like the test harness but does not validate each message against the
schema (about 1 ms a message in this process, which would be most of what a flood measures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, text, tool_calls


class LeanClient(AcpClient):
    """The test client without per-message schema validation; notes when each message came."""

    def __init__(self, workspace: str) -> None:
        super().__init__(workspace)
        self.arrivals: list[float] = []  # perf_counter() of each notification, in order

    def _on_line(self, line: str) -> None:
        msg = json.loads(line)
        with self._cond:
            if "method" in msg and "id" in msg:
                return self._on_agent_request(msg)
            if "method" in msg:
                self.arrivals.append(time.perf_counter())
                return self._on_notification(msg)
            return self._on_response(msg)


def start(fake: FakeOpenAI, home: Path, workspace: str, *args: str) -> LeanClient:
    client = LeanClient(workspace)
    client.start(
        [_heron_executable(), *args], env=heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"})
    )
    client.initialize()
    return client


def figures(values: list[float], unit: str, digits: int = 1) -> str:
    return (
        f"median {statistics.median(values):.{digits}f} {unit} "
        f"(max {max(values):.{digits}f}, {len(values)} runs)"
    )


def message_chunks(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]


def first_chunk_ms(client: LeanClient, session_id: str, fake: FakeOpenAI) -> tuple[float, float]:
    """(ms from the prompt sent, ms from the fake's first delta sent) to the first chunk."""
    fake.script(text("hello", " there"))
    with client._cond:
        seen = len(client.notifications)
    started = time.perf_counter()
    pending = client.prompt_async(session_id, "hi")
    pending.result(10)
    with client._cond:
        notes, arrivals = client.notifications[seen:], client.arrivals[seen:]
    first = next(
        i
        for i, n in enumerate(notes)
        if n["method"] == "session/update"
        and n["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    return (arrivals[first] - started) * 1000, (arrivals[first] - fake.stream_starts[-1]) * 1000


def cpu_seconds(pid: int) -> float:
    """CPU time the process's threads have used so far (Linux /proc: schedstat counts in ns,
    where stat counts in 10 ms ticks, a tenth of a 2000-delta flood)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that just ended
            continue
    return total / 1e9


def answer(
    client: LeanClient, session_id: str, fake: FakeOpenAI, deltas: int
) -> tuple[float, float, float, int]:
    """One answer of `deltas` deltas sent at once: (ms wall, µs of Heron CPU per delta, µs the
    fake took to send a delta, notifications that carried the text)."""
    assert client.proc is not None
    words = [f"w{i} " for i in range(deltas)]
    fake.script(text(*words))
    cpu = cpu_seconds(client.proc.pid)
    started = time.perf_counter()
    pending = client.prompt_async(session_id, "flood")
    result = pending.result(120)
    wall = (time.perf_counter() - started) * 1000
    used = cpu_seconds(client.proc.pid) - cpu
    assert result["stopReason"] == "end_turn", result
    chunks = message_chunks(pending.updates())
    assert "".join(chunks) == "".join(words), "the text did not arrive whole"
    sent = fake.send_seconds[-1]
    return wall, used * 1e6 / deltas, sent * 1e6 / deltas, len(chunks)


def rounds_ms(
    client: LeanClient, session_id: str, fake: FakeOpenAI, call: Call, rounds: int
) -> float:
    fake.script(*[tool_calls(call) for _ in range(rounds)], text("done"))
    started = time.perf_counter()
    result = client.prompt(session_id, "go", timeout=120)
    assert result["stopReason"] == "end_turn", result["stopReason"]
    return (time.perf_counter() - started) * 1000 / (rounds + 1)


def conversation_ms(
    client: LeanClient, workspace: str, fake: FakeOpenAI, turns: int
) -> list[float]:
    """ms per turn of a new session's conversation, each turn one read_file round + answer."""
    session_id = client.new_session(workspace)
    times = []
    for i in range(turns):
        fake.script(tool_calls(Call("read_file", {"path": "a.py"})), text(f"turn {i} done"))
        started = time.perf_counter()
        result = client.prompt(session_id, f"turn {i}", timeout=60)
        times.append((time.perf_counter() - started) * 1000)
        assert result["stopReason"] == "end_turn", result
    return times


def cancel_ms(client: LeanClient, session_id: str, fake: FakeOpenAI) -> float:
    """session/cancel sent during a running `sleep 60` → the prompt's `cancelled` answer."""
    fake.script(tool_calls(Call("bash", {"command": "sleep 60"})))
    pending = client.prompt_async(session_id, "sleep")
    client.wait_for_update(
        lambda u: u.get("status") == "in_progress" and u.get("toolCallId") not in finished,
        session_id=session_id,
    )
    time.sleep(0.2)  # let the process start
    started = time.perf_counter()
    client.cancel(session_id)
    assert pending.result(10) == {"stopReason": "cancelled"}
    elapsed = (time.perf_counter() - started) * 1000
    finished.update(u.get("toolCallId") for u in client.updates(session_id))
    return elapsed


finished: set[str | None] = set()


def repeat(times: int, run: Callable[[], Any]) -> list[Any]:
    return [run() for _ in range(times)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10, help="floods and 200-delta turns")
    parser.add_argument("--prompts", type=int, default=20, help="warm first-chunk prompts")
    parser.add_argument("--rounds", type=int, default=30, help="tool-call rounds per turn")
    parser.add_argument("--turns", type=int, default=60, help="turns of the conversation")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home = Path(tmp, "home")
        (home / ".config").mkdir(parents=True)
        workspace = os.path.join(tmp, "ws")
        os.mkdir(workspace)
        Path(workspace, "a.py").write_text("print('hello')\n" * 200)
        client = start(fake, home, workspace, "--mode", "full-access")
        try:
            session_id = client.new_session(workspace)
            cold, _ = first_chunk_ms(client, session_id, fake)
            print(f"prompt → first chunk, cold (imports openai): {cold:.1f} ms")
            warm = repeat(args.prompts, lambda: first_chunk_ms(client, session_id, fake))
            print(f"prompt → first chunk, warm: {figures([w[0] for w in warm], 'ms')}")
            print(
                "  of which the fake's first delta sent → first chunk received: "
                f"{figures([w[1] for w in warm], 'ms', 2)}"
            )

            floods = repeat(args.runs, lambda: answer(client, session_id, fake, 2000))
            walls, cpus, sends, notes = zip(*floods, strict=True)
            print(f"2000-delta flood: wall {figures(list(walls), 'ms', 0)}")
            print(f"  Heron CPU per delta {figures(list(cpus), 'µs')}")
            print(f"  fake server's own send time per delta {figures(list(sends), 'µs')}")
            print(f"  notifications carrying the text {figures(list(notes), '', 0)}")
            turns = repeat(args.runs, lambda: answer(client, session_id, fake, 200)[0])
            print(f"warm 200-delta turn: {figures(turns, 'ms')}")
            big = repeat(3, lambda: answer(client, session_id, fake, 20_000))
            print(
                f"20,000-delta answer: wall {figures([b[0] for b in big], 'ms', 0)}, "
                f"Heron CPU per delta {figures([b[1] for b in big], 'µs')}"
            )

            n = args.rounds
            read_call = Call("read_file", {"path": "a.py"})
            read = repeat(3, lambda: rounds_ms(client, session_id, fake, read_call, n))
            print(f"model round with one read_file call: {figures(read, 'ms')} per round ({n})")
            bash_call = Call("bash", {"command": "true"})
            bash = repeat(3, lambda: rounds_ms(client, session_id, fake, bash_call, n))
            print(f"model round with one local bash call: {figures(bash, 'ms')} per round ({n})")
            talk = conversation_ms(client, workspace, fake, args.turns)
            print(
                f"{args.turns}-turn conversation (one read_file round a turn): first 10 turns "
                f"{figures(talk[:10], 'ms')}, last 10 {figures(talk[-10:], 'ms')}"
            )
            finished.update(u.get("toolCallId") for u in client.updates(session_id))
            cancel = repeat(5, lambda: cancel_ms(client, session_id, fake))
            print(f"cancel during `sleep 60` → `cancelled` answer: {figures(cancel, 'ms')}")
        finally:
            client.kill()
        client.assert_clean()


if __name__ == "__main__":
    main()
