"""The turn loop in-process (tests/turn_harness.py): model ↔ tools rounds without a
`heron` subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import Call, text, tool_calls
from turn_harness import TurnHarness


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_text_answer_streams_and_ends_the_turn(fake_llm, tmp_path: Path):
    fake_llm.script(text("Hello ", "there"))
    loop = TurnHarness(fake_llm, tmp_path)
    assert await loop.prompt("hi") == "end_turn"
    chunks = [
        u["content"]["text"] for u in loop.updates if u["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(chunks) == "Hello there"
    assert fake_llm.requests[0].body["messages"][-1] == {"role": "user", "content": "hi"}


@pytest.mark.anyio
async def test_a_tool_round_reads_the_file_and_the_model_sees_it(fake_llm, tmp_path: Path):
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "notes.txt"}, id="r")), text("Two lines.")
    )
    loop = TurnHarness(fake_llm, tmp_path)
    assert await loop.prompt("what is in notes.txt?") == "end_turn"
    statuses = [
        u.get("status") for u in loop.updates if u.get("toolCallId") == "r" and u.get("status")
    ]
    assert statuses[0] == "pending" and statuses[-1] == "completed"
    [result] = [m for m in fake_llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert "alpha" in result["content"] and "beta" in result["content"]


@pytest.mark.anyio
async def test_the_turn_stops_after_its_model_requests(fake_llm, tmp_path: Path):
    fake_llm.script(
        *[tool_calls(Call("list_directory", {"path": "."}, id=f"l{i}")) for i in range(3)]
    )
    loop = TurnHarness(fake_llm, tmp_path, max_turn_requests=2)
    assert await loop.prompt("look around") == "max_turn_requests"
    assert len(fake_llm.requests) == 2
