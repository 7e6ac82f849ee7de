"""Turn figures against the fake OpenAI server (no network, no model time):

- time to first chunk: `session/prompt` sent → first `agent_message_chunk` seen (cold and warm);
- tool-call overhead: one model round that calls `read_file`, per round, over a long turn;
- bash overhead: one local `bash` call (`true`) per round;
- flood: one answer of 2000 one-word deltas sent at once, wall time and Heron's CPU per delta.

    python scripts/bench_turn.py [--rounds 30]

Prints medians; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, text, tool_calls


def start(fake: FakeOpenAI, home: Path, workspace: str, *args: str) -> AcpClient:
    client = AcpClient(workspace)
    client.start(
        [_heron_executable(), *args], env=heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"})
    )
    client.initialize()
    return client


def first_chunk_ms(client: AcpClient, session_id: str, fake: FakeOpenAI) -> float:
    fake.script(text("hello", " there"))

    def message_chunks() -> int:
        return sum(u["sessionUpdate"] == "agent_message_chunk" for u in client.updates(session_id))

    seen = message_chunks()
    started = time.perf_counter()
    pending = client.prompt_async(session_id, "hi")
    while message_chunks() == seen:
        time.sleep(0.0005)
    elapsed = (time.perf_counter() - started) * 1000
    pending.result(10)
    return elapsed


def rounds_ms(
    client: AcpClient, session_id: str, fake: FakeOpenAI, call: Call, rounds: int
) -> float:
    fake.script(*[tool_calls(call) for _ in range(rounds)], text("done"))
    started = time.perf_counter()
    result = client.prompt(session_id, "go", timeout=120)
    assert result["stopReason"] == "end_turn", result["stopReason"]
    return (time.perf_counter() - started) * 1000 / (rounds + 1)


def cancel_ms(client: AcpClient, session_id: str, fake: FakeOpenAI) -> float:
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def flood(client: AcpClient, session_id: str, fake: FakeOpenAI, deltas: int) -> tuple[float, float]:
    """(ms wall, µs of Heron CPU per delta) for one answer of `deltas` deltas sent at once."""
    assert client.proc is not None
    fake.script(text(*(f"w{i} " for i in range(deltas))))
    cpu = cpu_seconds(client.proc.pid)
    started = time.perf_counter()
    result = client.prompt(session_id, "flood", timeout=120)
    wall = (time.perf_counter() - started) * 1000
    assert result["stopReason"] == "end_turn", result
    return wall, (cpu_seconds(client.proc.pid) - cpu) * 1e6 / deltas


finished: set[str | None] = set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--floods", type=int, default=10, help="2000-delta answers to time")
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
            cold = first_chunk_ms(client, session_id, fake)
            warm = statistics.median(first_chunk_ms(client, session_id, fake) for _ in range(10))
            print(f"prompt → first chunk: cold {cold:.1f} ms (imports openai), warm {warm:.1f} ms")
            floods = [flood(client, session_id, fake, 2000) for _ in range(args.floods)]
            walls, cpus = [f[0] for f in floods], [f[1] for f in floods]
            print(
                f"2000-delta flood: median {statistics.median(walls):.0f} ms "
                f"(max {max(walls):.0f}), Heron CPU per delta median "
                f"{statistics.median(cpus):.1f} µs (max {max(cpus):.1f}), {len(floods)} runs"
            )
            n = args.rounds
            read = rounds_ms(client, session_id, fake, Call("read_file", {"path": "a.py"}), n)
            print(f"model round with one read_file call: {read:.1f} ms per round ({n} rounds)")
            bash = rounds_ms(client, session_id, fake, Call("bash", {"command": "true"}), n)
            print(f"model round with one local bash call: {bash:.1f} ms per round ({n} rounds)")
            finished.update(u.get("toolCallId") for u in client.updates(session_id))
            cancel = statistics.median(cancel_ms(client, session_id, fake) for _ in range(5))
            print(f"cancel during `sleep 60` → `cancelled` answer: median {cancel:.1f} ms")
        finally:
            client.kill()
        client.assert_clean()


if __name__ == "__main__":
    main()
