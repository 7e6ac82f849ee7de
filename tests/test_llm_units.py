"""Unit tests of the stream parsing helpers in agent.llm (no network)."""

from __future__ import annotations

import pytest

from agent.llm import TextDelta, ThinkTagSplitter, ThoughtDelta


def run(chunks: list[str]) -> tuple[str, str]:
    splitter = ThinkTagSplitter()
    events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.flush()
    thought = "".join(e.text for e in events if isinstance(e, ThoughtDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return thought, text


@pytest.mark.parametrize(
    "chunks",
    [
        ["<think>plan it</think>\n\nHello"],
        ["<thi", "nk>plan", " it</th", "ink>", "\n\nHel", "lo"],
        ["\n<think>", "plan it", "</think>Hello"],
        list("<think>plan it</think>Hello"),
    ],
)
def test_inline_think_tags_become_thoughts_however_they_are_split(chunks):
    assert run(chunks) == ("plan it", "Hello")


def test_content_without_think_tags_is_text_as_it_comes():
    splitter = ThinkTagSplitter()
    assert splitter.feed("Hello") == [TextDelta("Hello")]
    assert splitter.feed(" <think>not a tag here</think>") == [
        TextDelta(" <think>not a tag here</think>")
    ]


def test_a_prefix_that_never_becomes_a_tag_is_released_as_text():
    assert run(["<th", "ere we go"]) == ("", "<there we go")
    assert run(["<t"]) == ("", "<t")


def test_an_unclosed_think_block_stays_a_thought():
    assert run(["<think>still thinking", " when the stream ended"]) == (
        "still thinking when the stream ended",
        "",
    )


def test_thoughts_stream_out_before_the_closing_tag_arrives():
    splitter = ThinkTagSplitter()
    assert splitter.feed("<think>step one, ") == [ThoughtDelta("step one, ")]
    assert splitter.feed("step two</") == [ThoughtDelta("step two")]
    assert splitter.feed("think>Answer") == [TextDelta("Answer")]
