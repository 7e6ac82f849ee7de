"""Where compaction cuts the history, and which server errors mean "too long"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.context.compaction import split_point
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
    cut = split_point(history, window=1000)  # keeps at most ~1200 characters
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
