"""Compaction: when the conversation outgrows the model's context window, the older part of the
history becomes a summary the model writes itself, and the turn goes on.

It happens before a request that would fill more than COMPACT_AT of the window (estimated,
the system prompt and tool schemas included), or after the server rejected a request for its
length (then for the size it named). First, a single huge message (a 600 kB `write_file`
argument, a giant tool result) is shortened where it is ("[600 kB written to big.txt]"); only
if that is not enough does the older part become a summary. What stays as it was: the system
prompt, the recent messages (each tool call with its result: the cut never falls between them),
the user's latest request, and always the last step's tool results the model has not seen yet.
Whatever still does not fit is shortened until the next request fits under COMPACT_AT. The
transcript is not touched, so a loaded session still replays everything; the compacted history
is what the store saves.
"""

from __future__ import annotations

import json
import logging
from contextlib import aclosing
from typing import Any

from agent.config import Settings
from agent.context.usage import CHARS_PER_TOKEN, estimate_tokens
from agent.llm import TextDelta, stream_chat

log = logging.getLogger("heron.compaction")

COMPACT_AT = 0.8  # of the context window
KEEP_RECENT = 0.3  # of the window, at most, kept word for word
SUMMARY_INPUT = 0.6  # of the window, at most, given to the summarizer
TOOL_RESULT_CHARS = 2_000  # of each tool result shown to the summarizer

SUMMARY_PREFIX = "[Summary of the earlier conversation, written to save context]\n"
SUMMARIZER = (
    "You summarize a coding session between a user and an AI coding agent so that the agent "
    "can continue it without the original messages. Keep: every request the user made (quote "
    "them), decisions and constraints, files read or changed and how, commands run and their "
    "outcomes, errors still open, and what was about to happen next. Be factual and concise; "
    "write it as notes, not as a reply to anyone."
)


HUGE = 0.25  # of the room for the history: one message bigger than this is shortened first
MIN_PIECE = 200  # characters: below this, shortening stops


def needs_compaction(messages: list[dict[str, Any]], window: int, fixed: int = 0) -> bool:
    """Whether `messages` plus `fixed` tokens (tool schemas) fill more than COMPACT_AT."""
    return estimate_tokens(messages) + fixed > COMPACT_AT * window


def split_point(history: list[dict[str, Any]], window: int) -> int:
    """Where the recent part starts: as much as fits in KEEP_RECENT of the window, never a
    tool result (it stays with its call), never after the last step the model has not seen
    yet (the tool results at the end), and never the whole history."""
    budget = KEEP_RECENT * window * CHARS_PER_TOKEN
    size = 0
    cut = len(history)
    while cut > 1:
        size += len(json.dumps(history[cut - 1], ensure_ascii=False))
        if size > budget:
            break
        cut -= 1
    while cut < len(history) and history[cut].get("role") == "tool":
        cut += 1  # move past results whose call is summarized: they go with it
    return min(cut, unseen_step(history))


def unseen_step(history: list[dict[str, Any]]) -> int:
    """Where the last step starts when its tool results end the history (the model has not
    read them yet: they are never summarized away); else the history's length."""
    index = len(history)
    while index > 0 and history[index - 1].get("role") == "tool":
        index -= 1
    if index < len(history) and index > 0 and history[index - 1].get("tool_calls"):
        return index - 1
    return len(history)


def room(window: int, fixed: int) -> int:
    """Characters the history may take in a request that fits under COMPACT_AT."""
    return max(int((COMPACT_AT * window - fixed) * CHARS_PER_TOKEN), 0)


def shorten(
    history: list[dict[str, Any]], limit: int, tools_only: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """The history with every message bigger than `limit` characters shortened where it is
    (the others unchanged, the same objects); and how many were shortened. `tools_only`:
    only tool calls and their results (what the user wrote is summarized, not cut). The
    user's latest request is never cut."""
    shortened: list[dict[str, Any]] = []
    count = 0
    request = max((i for i, m in enumerate(history) if m.get("role") == "user"), default=-1)
    for index, message in enumerate(history):
        keep = tools_only and not (message.get("tool_calls") or message.get("role") == "tool")
        if keep or index == request:
            shortened.append(message)
            continue
        if len(json.dumps(message, ensure_ascii=False)) > limit:
            message = _shortened(message, limit)
            count += 1
        shortened.append(message)
    return shortened, count


def fit(history: list[dict[str, Any]], chars: int) -> tuple[list[dict[str, Any]], int]:
    """Shorten the biggest messages until the history takes at most `chars` characters."""
    count = 0
    limit = max(chars // 2, MIN_PIECE)
    while _size(history) > chars and limit >= MIN_PIECE:
        history, n = shorten(history, limit)
        count = max(count, n)
        limit //= 2
    return history, count


def _size(messages: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)


def _shortened(message: dict[str, Any], limit: int) -> dict[str, Any]:
    message = dict(message)
    content = message.get("content")
    if isinstance(content, str) and len(content) > limit // 2:
        message["content"] = _cut_middle(content, limit // 2)
    elif isinstance(content, list):
        message["content"] = [
            {**p, "text": _cut_middle(p["text"], limit // 2)}
            if isinstance(p, dict) and isinstance(p.get("text"), str)
            else p
            for p in content
        ]
    if message.get("tool_calls"):
        message["tool_calls"] = [_shortened_call(c, limit) for c in message["tool_calls"]]
    return message


def _shortened_call(call: dict[str, Any], limit: int) -> dict[str, Any]:
    """A call whose arguments' long strings are replaced by what they were: a write of 600 kB
    becomes "[600 kB written to big.txt]"; the arguments stay a JSON object."""
    function = call.get("function") or {}
    arguments = function.get("arguments") or ""
    if len(arguments) <= limit // 2:
        return call
    try:
        values = json.loads(arguments)
    except ValueError:
        values = None
    if not isinstance(values, dict):
        values = {"invalid_json_arguments": _size_of(arguments) + " left out"}
    path = values.get("path") if isinstance(values.get("path"), str) else None
    values = {
        key: _placeholder(key, value, path) if _long(value) else value
        for key, value in values.items()
    }
    return {**call, "function": {**function, "arguments": json.dumps(values, ensure_ascii=False)}}


def _long(value: Any) -> bool:
    return isinstance(value, str) and len(value) > 100


def _placeholder(key: str, value: str, path: str | None) -> str:
    if key == "content" and path:
        return f"[{_size_of(value)} written to {path}]"
    return f"[{_size_of(value)} of {key}, left out to save context]"


def _size_of(text: str) -> str:
    size = len(text.encode("utf-8", "replace"))
    return f"{size // 1000} kB" if size >= 1000 else f"{size} bytes"


def _cut_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return (
        f"{text[:head]}\n[... {len(text) - head - tail} characters left out to save context "
        f"...]\n{text[-tail:]}"
    )


def summary_of(history: list[dict[str, Any]], summarized: int) -> str | None:
    """The summary a compaction that summarized `summarized` messages put first in `history`."""
    first = history[0] if summarized and history else None
    content = first.get("content") if first else None
    if not isinstance(content, str) or not content.startswith(SUMMARY_PREFIX):
        return None
    return content[len(SUMMARY_PREFIX) :]


async def compact(
    settings: Settings,
    history: list[dict[str, Any]],
    window: int,
    focus: str | None = None,
    whole: bool = False,
    fixed: int = 0,
) -> tuple[list[dict[str, Any]], int, int] | None:
    """The compacted history, how many messages it summarized and how many it shortened;
    None if nothing can go. `fixed`: tokens every request spends besides the history (the
    system prompt, the tool schemas).

    `whole` (the /compact command, between turns): all of it becomes the summary, nothing is
    kept word for word. `focus`: what the user wants the summary to keep above all.
    """
    chars = room(window, fixed)
    if not whole:
        history, shortened = shorten(history, max(int(HUGE * chars), MIN_PIECE), tools_only=True)
        if shortened and _size(history) <= chars:
            return history, 0, shortened  # the huge messages were all of the problem
    else:
        shortened = 0
    cut = len(history) if whole else split_point(history, window)
    if cut < 1 or len(history) < 2:
        # Nothing older to summarize (one message, or only the step the model has not seen
        # yet): shorten what is there.
        history, more = fit(history, chars)
        return (history, 0, max(shortened, more)) if shortened or more else None
    old, recent = history[:cut], history[cut:]
    summary = await _summarize(settings, old, window, focus)
    kept: list[dict[str, Any]] = [{"role": "user", "content": SUMMARY_PREFIX + summary}]
    last_request = next((m for m in reversed(old) if m.get("role") == "user"), None)
    # The request being worked on stays word for word (after /compact it was answered).
    if not whole and last_request and not any(m.get("role") == "user" for m in recent):
        kept.append(last_request)
    compacted, more = fit([*kept, *recent], chars)
    return compacted, len(old), max(shortened, more)


async def _summarize(
    settings: Settings, old: list[dict[str, Any]], window: int, focus: str | None = None
) -> str:
    text = _render(old)
    limit = int(SUMMARY_INPUT * window * CHARS_PER_TOKEN)
    if len(text) > limit:  # keep the start (the first requests) and the latest part
        text = text[: limit // 3] + "\n[... middle omitted ...]\n" + text[-(limit - limit // 3) :]
    request = f"The session so far:\n\n{text}\n\nWrite the summary."
    if focus:
        request += f"\n\nThe user asks the summary to focus on: {focus}"
    messages = [{"role": "system", "content": SUMMARIZER}, {"role": "user", "content": request}]
    parts: list[str] = []
    async with aclosing(stream_chat(settings, messages, [])) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                parts.append(event.text)
    summary = "".join(parts).strip()
    return summary or "(The summary came back empty.)"


def _render(messages: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "[image]") for p in content if isinstance(p, dict))
        content = content or ""
        if role == "tool":
            if len(content) > TOOL_RESULT_CHARS:
                content = content[:TOOL_RESULT_CHARS] + " [...]"
            lines.append(f"TOOL RESULT: {content}")
            continue
        if content:
            lines.append(f"{str(role).upper()}: {content}")
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(f"TOOL CALL {function.get('name')}: {function.get('arguments')}")
    return "\n".join(lines)
