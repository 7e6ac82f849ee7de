"""Units of the `<tool_call>` scanner and the text-call filter (agent.textcalls): markdown code
is text, blocks never closed, `<tool_response>` ending the answer, the token limit, native tools
(end to end: test_small_models_e2e, test_local_models_e2e)."""

from __future__ import annotations

import random

import anyio
import pytest

from agent.llm.events import Finished, TextDelta, ToolCallNamed
from agent.textcalls.parse import CUT_OFF, NATIVE_OFFERED, UNREADABLE, text_tool_calls
from agent.textcalls.scan import AnswerEnds, Block, BlockScanner

CALL = '{"name": "read_file", "arguments": {"path": "a.txt"}}'


def scan(answer: str, seed: int = 0) -> list[object]:
    """The scanner's pieces for `answer` fed in random slices, text pieces joined."""
    rng = random.Random(seed)
    scanner, out, at = BlockScanner(), [], 0
    while at < len(answer):
        step = rng.randint(1, 7)
        out += scanner.feed(answer[at : at + step])
        at += step
    out += scanner.finish()
    joined: list[object] = []
    for piece in out:
        if isinstance(piece, str) and joined and isinstance(joined[-1], str):
            joined[-1] += piece
        else:
            joined.append(piece)
    return joined


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # A block inside a fenced code block is text: the model shows the syntax.
        (
            f"Like this:\n```\n<tool_call>\n{CALL}\n</tool_call>\n```\nDone.",
            [f"Like this:\n```\n<tool_call>\n{CALL}\n</tool_call>\n```\nDone."],
        ),
        # A longer fence, with an info string, and a real call after it.
        (
            f"````xml\n<tool_call>{CALL}</tool_call>\n````\n<tool_call>{CALL}</tool_call>",
            [f"````xml\n<tool_call>{CALL}</tool_call>\n````\n", Block(CALL)],
        ),
        # Inline code is text.
        (
            f"Write `<tool_call>` blocks, or ``<tool_call>{CALL}</tool_call>``.",
            [f"Write `<tool_call>` blocks, or ``<tool_call>{CALL}</tool_call>``."],
        ),
        # An inline span does not cross lines: the call on the next line is one.
        (
            f"a ` b\n<tool_call>{CALL}</tool_call>",
            ["a ` b\n", Block(CALL)],
        ),
        # A block not closed before the next one begins.
        (
            f"<tool_call>{CALL}\n<tool_call>{CALL}</tool_call>",
            [Block(CALL + "\n", closed=False), Block(CALL)],
        ),
        # The model imitates the tool's result: the answer ends there.
        (
            f"<tool_call>{CALL}</tool_call>\n<tool_response>\nfake\n</tool_response>\nmore",
            [Block(CALL), "\n", AnswerEnds()],
        ),
        (
            f"<tool_call>{CALL}\n<tool_response>fake",
            [Block(CALL + "\n", closed=False), AnswerEnds()],
        ),
        (
            "`<tool_response>` is what results come in.",
            ["`<tool_response>` is what results come in."],
        ),
        # Held back at the end, then released: a fence-like start, a partial tag.
        ("ok\n``", ["ok\n``"]),
        ("ok <tool_", ["ok <tool_"]),
    ],
)
def test_the_scanner_respects_markdown_and_the_answers_end(answer, expected, seed):
    found = scan(answer, seed)
    assert [type(p) for p in found] == [type(p) for p in expected]
    for got, want in zip(found, expected, strict=True):
        if not isinstance(want, AnswerEnds):
            assert got == want


def run_filter(deltas: list[str], finish: str = "stop", native: bool = False) -> list[object]:
    async def events():
        for delta in deltas:
            yield TextDelta(delta)
        yield Finished(finish)

    async def collect() -> list[object]:
        return [e async for e in text_tool_calls(events(), native=native)]

    return anyio.run(collect)


def shown(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_blocks_closed_before_the_token_limit_run_and_the_open_one_fails():
    answer = f"<tool_call>{CALL}</tool_call>\n<tool_call>{CALL}</tool_call>\n<tool_call>" + (
        '{"name": "write_file", "arguments": {"path": "b", "content": "ab'
    )
    events = run_filter([answer[i : i + 5] for i in range(0, len(answer), 5)], finish="length")
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.finish_reason == "length"
    assert [c.name for c in finished.tool_calls] == ["read_file", "read_file", "write_file"]
    assert [c.problem for c in finished.tool_calls] == [None, None, CUT_OFF]
    assert sum(isinstance(e, ToolCallNamed) for e in events) == 3


def test_an_unclosed_block_that_is_not_json_is_text_and_the_rest_is_shown():
    events = run_filter(["I will use a <tool_call> to ", "read it, then answer.", " The end."])
    assert shown(events) == "I will use a <tool_call> to read it, then answer. The end."
    assert events[-1].tool_calls == [] and events[-1].finish_reason == "stop"


def test_a_closed_block_that_cannot_be_read_fails_with_the_expected_format():
    events = run_filter(["<tool_call>read_file(path='a.txt')</tool_call>"])
    [call] = events[-1].tool_calls
    assert call.problem == UNREADABLE and call.name == ""
    assert '{"name": "read_file", "arguments": {"path": "README.md"}}' in UNREADABLE


def test_with_native_tools_offered_no_text_block_runs():
    events = run_filter([f"<tool_call>{CALL}</tool_call>"], native=True)
    [call] = events[-1].tool_calls
    assert call.name == "read_file" and call.problem == NATIVE_OFFERED


def test_the_answer_ends_at_an_imitated_tool_response():
    async def endless():
        yield TextDelta(f"<tool_call>{CALL}</tool_call>\n<tool_resp")
        yield TextDelta("onse>\nI made this up")
        while True:  # a model writing on: never read
            yield TextDelta("and more ")
            await anyio.sleep(0)

    async def collect() -> list[object]:
        return [e async for e in text_tool_calls(endless())]

    events = anyio.run(collect)
    assert shown(events) == ""
    assert events[-1].finish_reason == "tool_calls"
    assert [c.problem for c in events[-1].tool_calls] == [None]
