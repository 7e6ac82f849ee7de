"""Turn figures against the fake OpenAI server (no network, no model time):

- time to first chunk: `session/prompt` sent → first `agent_message_chunk` seen (cold and warm);
- tool-call overhead: one model round that calls `read_file`, per round, over a long turn;
- bash overhead: one local `bash` call (`true`) per round.

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


finished: set[str | None] = set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
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
