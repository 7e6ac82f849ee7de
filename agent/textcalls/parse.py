"""`<tool_call>` blocks found in a streamed answer → the tool-call events a native answer gives.

The markup is never shown as text: text that may be the start of `<tool_call>` is held back
until the next delta shows what it is. A block left open at the end of the answer still counts
(models often stop right after the JSON). A block whose JSON is broken still becomes a call, so
the turn answers it with the same "not valid JSON" failure a native call gets.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace

from agent.llm.events import Finished, LLMEvent, RawToolCall, TextDelta, ToolCallNamed

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
FIRST_INDEX = 1000  # text calls' indexes, apart from the native calls' (0, 1, …)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


class BlockParser:
    """Splits streamed text into what the user reads and the bodies of `<tool_call>` blocks."""

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False
        self._body: list[str] = []  # a block's pieces so far (a block may be 600 kB)
        self._tail = ""  # its last characters, where `</tool_call>` may be starting

    def feed(self, text: str) -> list[str | list[str]]:
        """Text pieces (str) and complete blocks ([body]) in the order they were written."""
        self._buffer += text
        out: list[str | list[str]] = []
        while True:
            if self._inside:
                # Only the new text (and the few characters before it) is searched, so a
                # long block costs linear time however finely it is streamed.
                window = self._tail + self._buffer
                end = window.find(CLOSE)
                if end < 0:
                    self._body.append(self._buffer)
                    self._tail, self._buffer = window[-(len(CLOSE) - 1) :], ""
                    return out
                body = "".join(self._body)
                out.append([body[: len(body) - len(self._tail)] + window[:end]])
                self._buffer = window[end + len(CLOSE) :]
                self._inside, self._body, self._tail = False, [], ""
                continue
            start = self._buffer.find(OPEN)
            if start >= 0:
                if start:
                    out.append(self._buffer[:start])
                self._buffer = self._buffer[start + len(OPEN) :]
                self._inside = True
                continue
            keep = _partial(self._buffer, OPEN)
            if len(self._buffer) > keep:
                out.append(self._buffer[: len(self._buffer) - keep])
                self._buffer = self._buffer[len(self._buffer) - keep :]
            return out

    def finish(self) -> list[str | list[str]]:
        rest, self._buffer = self._buffer, ""
        if self._inside:
            body = "".join(self._body) + rest
            body = body[: len(body) - _partial(body, CLOSE)]  # "…}</tool_" cut short
            self._inside, self._body, self._tail = False, [], ""
            return [[body]] if body.strip() else []
        return [rest] if rest else []


def _partial(text: str, tag: str) -> int:
    """How many characters at the end of `text` could begin `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


def call_of(body: str, index: int) -> RawToolCall:
    """One block's body → a call; arguments as JSON text (invalid when the block was)."""
    raw = _FENCE.sub("", body.strip())
    try:
        block = json.loads(raw)
    except ValueError:
        block = None
    if not isinstance(block, dict) or not isinstance(block.get("name"), str):
        match = _NAME.search(raw)
        return RawToolCall(index, f"call_text_{index}", match.group(1) if match else "", raw)
    arguments = block.get("arguments", block.get("parameters", {}))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    # An id of the model's own (Mistral's format has one) names the call; else one is made.
    call_id = block.get("id") if isinstance(block.get("id"), str) and block["id"] else None
    return RawToolCall(index, call_id or f"call_text_{index}", block["name"], text)


def is_text_call(call: RawToolCall) -> bool:
    return call.index >= FIRST_INDEX


async def text_tool_calls(
    events: AsyncIterator[LLMEvent],
) -> AsyncGenerator[LLMEvent, None]:
    """The stream with its `<tool_call>` blocks taken out of the text and made tool calls."""
    parser = BlockParser()
    calls: list[RawToolCall] = []
    after_block = False  # the blank lines between and after blocks are markup too

    def pieces(found: list[str | list[str]]) -> list[LLMEvent]:
        nonlocal after_block
        out: list[LLMEvent] = []
        for piece in found:
            if isinstance(piece, str):
                piece = piece.lstrip() if after_block else piece
                if piece:
                    after_block = False
                    out.append(TextDelta(piece))
            else:
                after_block = True
                call = call_of(piece[0], FIRST_INDEX + len(calls))
                calls.append(call)
                out.append(ToolCallNamed(call.index, call.call_id, call.name or "tool_call"))
        return out

    async for event in events:
        if isinstance(event, TextDelta):
            for out in pieces(parser.feed(event.text)):
                yield out
        elif isinstance(event, Finished):
            for out in pieces(parser.finish()):
                yield out
            if calls:
                reason = event.finish_reason
                event = replace(
                    event,
                    tool_calls=[*event.tool_calls, *calls],
                    finish_reason="tool_calls" if reason in (None, "stop") else reason,
                )
            yield event
        else:
            yield event
