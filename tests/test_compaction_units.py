"""Where compaction cuts the history, and which server errors mean "too long"."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agent.context.compaction import Budget, split_point
from agent.llm.errors import error_detail


def call(call_id: str) -> dict:
    function = {"name": "read_file", "arguments": "{}"}
    return {"id": call_id, "type": "function", "function": function}


def test_the_cut_never_separates_a_tool_call_from_its_results():
    history = [
        {"role": "user", "content": "x" * 4000},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "y" * 4000},
        {"role": "tool", "tool_call_id": "b", "content": "z" * 100},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ]
    cut = split_point(history, Budget(1250, 0, 4.0))  # keeps at most ~1200 characters
    assert history[cut]["role"] != "tool"
    assert cut == 4


@pytest.mark.parametrize(
    "message",
    [
        "The model server answered HTTP 400: This model's maximum context length is 4096 tokens",
        "The model server answered HTTP 400: the request exceeds the available context size, "
        "try increasing it",  # llama.cpp server
        "The model server answered HTTP 400: prompt is too long: 210000 tokens > 200000 maximum",
    ],
)
def test_context_overflow_errors_are_recognized(message):
    assert error_detail({"error": {"message": message}})[1]


@pytest.mark.parametrize(
    "message",
    ["The model server answered HTTP 401: bad key", "Model 'x' was not found (404)"],
)
def test_other_errors_are_not(message):
    assert not error_detail({"error": {"message": message}})[1]


@pytest.mark.parametrize(
    "capture",
    [
        "llama-cpp-python-0.3.36/error-400-context-length-nonstream.json",
        "llama-server-0c1e570/error-400-context-size.json",
    ],
)
def test_real_servers_context_errors_are_recognized(capture):
    body = json.loads((Path(__file__).parent / "data" / "real-servers" / capture).read_text())
    assert error_detail(body)[1]


# -- budgets in tokens (issue 27) ----------------------------------------------------------------


def _settings():
    from agent.config import Settings

    return Settings(api_key="k", base_url="http://127.0.0.1:9/v1", model="small")


def test_the_recent_part_kept_and_the_summary_are_sized_from_the_room_not_the_window():
    # A 4k window whose fixed part takes 2,600 tokens leaves 676 for the history.
    budget = Budget(4096, 2600, 3.0)
    assert budget.room == 676
    history = [{"role": "user" if i % 2 else "assistant", "content": "w" * 300} for i in range(30)]
    cut = split_point(history, budget)
    kept = sum(len(json.dumps(m)) for m in history[cut:])
    assert kept <= 0.2 * budget.room * budget.per_token
    assert budget.summary_tokens == 101  # 15% of the room


def test_a_latest_request_larger_than_the_room_is_cut_in_the_middle(monkeypatch):
    from agent.context import compaction

    budget = Budget(4096, 2600, 3.0)
    paste = "HEAD " + "x" * 20_000 + " TAIL"
    history = [{"role": "user", "content": paste}]
    compacted = anyio.run(compaction.compact, _settings(), history, budget)
    assert compacted is not None and compacted.request_cut > 18_000
    assert compacted.summarized == 0
    [message] = compacted.history
    assert message["content"].startswith("HEAD ") and message["content"].endswith(" TAIL")
    assert budget.tokens(compacted.history) <= budget.room
    assert history[0]["content"] == paste  # the list given is not changed


def test_the_summary_request_fits_the_window_and_is_cut_again_when_refused(monkeypatch):
    from agent.context import compaction
    from agent.llm import ContextTooLong, TextDelta

    sent: list[tuple[int, int | None]] = []

    async def fake_stream(settings, messages, tools, stop=None, max_tokens=None):
        size = sum(len(json.dumps(m)) for m in messages)
        sent.append((size, max_tokens))
        if len(sent) == 1:  # the server counts 1.5 characters a token: far more than guessed
            raise ContextTooLong("too long", 4096, int(size / 1.5))
        yield TextDelta("the summary")

    monkeypatch.setattr(compaction, "stream_chat", fake_stream)
    budget = Budget(4096, 2600, 3.0)
    old = [{"role": "user", "content": f"request {i} " + "y" * 2_000} for i in range(20)]
    history = [*old, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    compacted = anyio.run(compaction.compact, _settings(), history, budget)
    assert compacted is not None and compacted.summarized > 0
    (first, tokens), (second, _) = sent
    assert tokens == budget.summary_tokens
    assert first / 3.0 + tokens <= 4096  # as guessed, it fitted beside its answer
    assert second / 1.5 + tokens <= 4096  # as counted, the second one does
    assert "the summary" in compacted.history[0]["content"]
