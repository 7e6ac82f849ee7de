"""`<tool_call>` blocks found in a streamed answer (agent.textcalls.scan) → the tool-call events
a native answer gives, so the turn runs them through the same path.

What a block becomes:
- a closed block: a call. One Heron cannot read (not a JSON object that names a tool) is a
  call that fails with the expected format, so the model learns how to write it;
- a block never closed: a call when its body starts as JSON (models often stop right after the
  JSON, or begin the next block without closing this one), failed without asking when the
  answer hit its token limit inside it (its arguments may be cut); otherwise it was text after
  all, and the user reads it as written;
- when the request offered the tools natively (`auto` before it switched), no block runs in
  that answer: each is a call that fails saying why (the turn then switches later requests to
  text, and tells the user);
- `<tool_response>` outside code ends the answer: the model began imitating the protocol, and
  Heron stops reading (a server sent the stop sequence has usually stopped there already).

A block whose JSON is broken but names a tool becomes that call, so the turn answers it with
the same "not valid JSON" failure a native call gets.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace

from agent.llm.events import Finished, LLMEvent, RawToolCall, TextDelta, ToolCallNamed
from agent.textcalls.describe import EXAMPLE
from agent.textcalls.scan import OPEN, RESPONSE, AnswerEnds, Block, BlockScanner, Piece

FIRST_INDEX = 1000  # text calls' indexes, apart from the native calls' (0, 1, …)
STOP = [RESPONSE]  # the request's stop sequence in text mode
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")

UNREADABLE = (
    "Heron could not read this tool call. Write each call as one JSON object on one line "
    f"between the tags, like this:\n{EXAMPLE}"
)
CUT_OFF = (
    "Not run: the answer reached the model's output token limit inside this call, so its "
    "arguments may be incomplete. Call it again; write a long file in smaller parts."
)
NATIVE_OFFERED = (
    "Not run: this call was written as text while the tools were offered natively. Heron now "
    "takes tool calls written as <tool_call> blocks: call it again."
)


def call_of(body: str, index: int) -> RawToolCall:
    """One block's body → a call; arguments as JSON text (invalid when the block was)."""
    raw = _FENCE.sub("", body.strip())
    try:
        block = json.loads(raw)
    except ValueError:
        block = None
    if not isinstance(block, dict) or not isinstance(block.get("name"), str):
        match = _NAME.search(raw)
        if match is None:
            return RawToolCall(index, f"call_text_{index}", "", raw, problem=UNREADABLE)
        return RawToolCall(index, f"call_text_{index}", match.group(1), raw)
    arguments = block.get("arguments", block.get("parameters", {}))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    # An id of the model's own (Mistral's format has one) names the call; else one is made.
    call_id = block.get("id") if isinstance(block.get("id"), str) and block["id"] else None
    return RawToolCall(index, call_id or f"call_text_{index}", block["name"], text)


def is_text_call(call: RawToolCall) -> bool:
    return call.index >= FIRST_INDEX


def _starts_as_json(body: str) -> bool:
    return _FENCE.sub("", body.strip()).startswith("{")


async def text_tool_calls(
    events: AsyncGenerator[LLMEvent, None], native: bool = False
) -> AsyncGenerator[LLMEvent, None]:
    """The stream with its `<tool_call>` blocks taken out of the text and made tool calls;
    `native`: the request offered the tools natively, so none of these runs."""
    scanner = BlockScanner()
    calls: list[RawToolCall] = []
    after_block = False  # the blank lines between and after blocks are markup too

    def pieces(found: list[Piece], cut: bool = False) -> list[LLMEvent]:
        """Events for what the scanner found; `cut`: the answer hit its token limit."""
        nonlocal after_block
        out: list[LLMEvent] = []
        for piece in found:
            if isinstance(piece, Block) and not piece.closed and not _starts_as_json(piece.body):
                piece = OPEN + piece.body  # not a call after all: the user reads it
            if isinstance(piece, str):
                piece = piece.lstrip() if after_block else piece
                if piece:
                    after_block = False
                    out.append(TextDelta(piece))
            elif isinstance(piece, Block):
                after_block = True
                call = call_of(piece.body, FIRST_INDEX + len(calls))
                if native:
                    call = replace(call, problem=NATIVE_OFFERED)
                elif cut and not piece.closed:
                    call = replace(call, problem=CUT_OFF)
                calls.append(call)
                out.append(ToolCallNamed(call.index, call.call_id, call.name or "tool_call"))
        return out

    def finished(event: Finished) -> Finished:
        if not calls:
            return event
        reason = event.finish_reason
        return replace(
            event,
            tool_calls=[*event.tool_calls, *calls],
            finish_reason="tool_calls" if reason in (None, "stop") else reason,
        )

    async with aclosing(events) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                found = scanner.feed(event.text)
                for out in pieces(found):
                    yield out
                if found and isinstance(found[-1], AnswerEnds):
                    # Imitating the protocol: nothing more of this answer is shown or read,
                    # and closing the stream stops the server writing it.
                    yield finished(Finished("stop"))
                    return
            elif isinstance(event, Finished):
                for out in pieces(scanner.finish(), cut=event.finish_reason == "length"):
                    yield out
                yield finished(event)
            else:
                yield event
