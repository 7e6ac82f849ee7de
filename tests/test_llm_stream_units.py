"""Unit tests of the raw-stream pieces of agent.llm (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.llm import ContextTooLong, Finished, LLMError, TextDelta, ToolCallNamed
from agent.llm.errors import error_detail, trim
from agent.llm.sse import StreamReader
from agent.llm.text import SurrogateJoiner, clean
from agent.llm.toolcalls import ToolCallAccumulator

CAPTURES = Path(__file__).parent / "data" / "real-servers"


def read(body: str) -> list:
    reader = StreamReader()
    events = [e for line in body.splitlines() for e in reader.feed(line)]
    return events + reader.finish()


def test_the_llama_cpp_python_capture_gives_one_call_named_once():
    body = (CAPTURES / "llama-cpp-python-0.3.36" / "tool-call-stream.sse").read_text()
    events = read(body)
    assert [e.name for e in events if isinstance(e, ToolCallNamed)] == ["list_directory"]
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.finish_reason == "tool_calls"
    (call,) = finished.tool_calls
    assert call.name == "list_directory"
    assert json.loads(call.arguments) == {"path": "./user/p5_forced-1/directory/p5-forced-1.py"}


def test_the_llama_server_capture_keeps_usage_from_the_choiceless_chunk():
    body = (CAPTURES / "llama-server-0c1e570" / "text-stream-with-usage.sse").read_text()
    events = read(body)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith("You are Heron,")
    assert events[-1].usage["prompt_tokens"] == 262


def test_a_name_that_grows_is_replaced_not_appended():
    acc = ToolCallAccumulator()
    for name in ("re", "read_", "read_file"):
        acc.add_delta({"tool_calls": [{"index": 0, "function": {"name": name}}]})
    acc.add_delta({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
    assert [c.name for c in acc.finish()[1]] == ["read_file"]


def test_a_name_is_announced_only_once_its_arguments_start():
    acc = ToolCallAccumulator()
    assert acc.add_delta({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "b"}}]}) == []
    named = acc.add_delta({"tool_calls": [{"index": 0, "function": {"name": "bash"}}]})
    assert named == []
    named = acc.add_delta({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]})
    assert named == [ToolCallNamed(0, "a", "bash")]


def test_legacy_function_call_alone_is_a_call():
    acc = ToolCallAccumulator()
    acc.add_delta({"function_call": {"name": "grep", "arguments": '{"pattern": "x"}'}})
    assert [(c.name, c.arguments) for c in acc.finish()[1]] == [("grep", '{"pattern": "x"}')]


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["a\ud83d", "\ude00b"], "a😀b"),
        (["\ud83d"], "\ufffd"),
        (["x\udc00y"], "x\ufffdy"),
        (["plain"], "plain"),
    ],
)
def test_surrogates_are_joined_across_pieces_or_replaced(pieces, expected):
    joiner = SurrogateJoiner()
    assert "".join(joiner.feed(p) for p in pieces) + joiner.flush() == expected
    assert clean("".join(pieces)) == expected


def test_error_details_are_trimmed_and_lose_server_paths():
    body = (
        CAPTURES / "llama-cpp-python-0.3.36" / "error-500-assistant-content-null.json"
    ).read_text()
    detail, too_long = error_detail(body)
    assert len(detail) <= 300 and not too_long
    assert "/models/server" not in detail and "site-packages" not in detail
    assert trim("x" * 1000).endswith("…")


def test_context_errors_are_recognised_in_each_servers_words():
    for name in (
        "llama-cpp-python-0.3.36/error-400-context-length-nonstream.json",
        "llama-server-0c1e570/error-400-context-size.json",
    ):
        assert error_detail((CAPTURES / name).read_text())[1]
    reader = StreamReader()
    with pytest.raises(ContextTooLong):
        reader.feed('data: {"error": {"message": "x", "code": "context_length_exceeded"}}')


def test_a_stream_without_finish_or_done_is_cut_off():
    reader = StreamReader()
    reader.feed('data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}')
    with pytest.raises(LLMError, match="cut off"):
        reader.finish()


def test_multi_line_data_is_joined():
    events = read(
        'data: {"choices": [{"index": 0,\ndata: "delta": {"content": "hi"}, '
        '"finish_reason": "stop"}]}\n\n'
    )
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hi"]
