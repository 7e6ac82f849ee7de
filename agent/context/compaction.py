"""Compaction: when the conversation outgrows the model's context window, the older part of the
history becomes a summary the model writes itself, and the turn goes on.

Everything is counted in tokens (`Budget`): the window, the fixed part every request carries
(the system prompt and the tool schemas), and characters per token as the server's own counts
showed (agent.context.usage), cautious until it has counted. The history may take the room
left under COMPACT_AT of the window after the fixed part; compaction runs before a request
that would not fit, or after the server rejected one for its length (then for the size it
named). First, a single huge message (a 600 kB `write_file` argument, a giant tool result) is
shortened where it is ("[600 kB written to big.txt]"); only if that is not enough does the
older part become a summary. The summary and the part kept word for word are sized from the
room, not the window (at most SUMMARY_SHARE and KEEP_SHARE of it), and a compaction leaves at
most AFTER_SHARE of the room filled, so a small window is not compacted again at the next turn.
What stays as it was: the system prompt, the recent messages (each tool call with its result:
the cut never falls between them), the user's latest request, and always the last step's tool
results the model has not seen yet. Whatever still does not fit is shortened until it does; the
user's latest request last of all, keeping its start and end (a paste larger than the window).
The summary request itself fits the window: its input is cut to the tokens left beside its
answer, and sent again smaller if the server still refuses it. The transcript is not touched,
so a loaded session still replays everything; the compacted history is what the store saves.
"""

from __future__ import annotations

import json
import logging
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from agent.config import Settings
from agent.context.usage import size_of
from agent.llm import ContextTooLong, TextDelta, stream_chat

log = logging.getLogger("heron.compaction")

COMPACT_AT = 0.8  # of the context window
KEEP_SHARE = 0.2  # of the room for the history, at most, kept word for word
SUMMARY_SHARE = 0.15  # of the room for the history, at most, for the summary
# Of the room, at most, a compaction may leave filled, so that the next turns fit before the
# next one: shortening huge messages alone must get there, or the older part is summarized too.
AFTER_SHARE = 0.8
SUMMARY_TOKENS = (64, 2048)  # the summary's own limits, whatever the room
ANSWER_ROOM = 0.9  # of the window, at most, for the summary request and its answer
MIN_ROOM = 512  # tokens a conversation needs besides the fixed part: a prompt and an answer
RENDERED = 0.8  # rendered text has fewer characters per token than the JSON they were counted on
TOOL_RESULT_CHARS = 2_000  # of each tool result shown to the summarizer

SUMMARY_PREFIX = "[Summary of the earlier conversation, written to save context]\n"
SUMMARIZER = (
    "You summarize a coding session between a user and an AI coding agent so that the agent "
    "can continue it without the original messages. Keep: every request the user made (quote "
    "them), decisions and constraints, files read or changed and how, commands run and their "
    "outcomes, errors still open, and what was about to happen next. Be factual and concise; "
    "write it as notes, not as a reply to anyone. Use at most {words} words."
)


@dataclass(frozen=True)
class Budget:
    """A request's token budget: the window, the fixed part every request carries (system
    prompt, tool schemas), and characters per token."""

    window: int
    fixed: int
    per_token: float

    @property
    def room(self) -> int:
        """Tokens the history may take in a request under COMPACT_AT of the window."""
        return max(int(COMPACT_AT * self.window) - self.fixed, 0)

    def chars(self, tokens: float) -> int:
        return max(int(tokens * self.per_token), 0)

    def tokens(self, messages: list[dict[str, Any]]) -> int:
        return int(size_of(messages) / self.per_token)

    @property
    def summary_tokens(self) -> int:
        low, high = SUMMARY_TOKENS
        return max(low, min(high, int(SUMMARY_SHARE * self.room)))


@dataclass
class Compacted:
    """What compaction made of the history: how many messages became the summary, how many
    were shortened, and how many characters of the user's latest request were left out."""

    history: list[dict[str, Any]]
    summarized: int = 0
    shortened: int = 0
    request_cut: int = 0


HUGE = 0.25  # of the room for the history: one message bigger than this is shortened first
MIN_PIECE = 200  # characters: below this, shortening stops


def needs_compaction(messages: list[dict[str, Any]], budget: Budget) -> bool:
    """Whether `messages` take more than the room the budget leaves for the history."""
    return budget.tokens(messages) > budget.room


def split_point(history: list[dict[str, Any]], budget: Budget) -> int:
    """Where the recent part starts: as much as fits in KEEP_SHARE of the room, never a tool
    result (it stays with its call), never after the last step the model has not seen yet
    (the tool results at the end), and never the whole history."""
    limit = budget.chars(KEEP_SHARE * budget.room)
    size = 0
    cut = len(history)
    while cut > 1:
        size += len(json.dumps(history[cut - 1], ensure_ascii=False))
        if size > limit:
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
    while size_of(history) > chars and limit >= MIN_PIECE:
        history, n = shorten(history, limit)
        count = max(count, n)
        limit //= 2
    return history, count


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
    budget: Budget,
    focus: str | None = None,
    whole: bool = False,
) -> Compacted | None:
    """The compacted history (see the module's docstring); None if nothing can go.

    `whole` (the /compact command, between turns): all of it becomes the summary, nothing is
    kept word for word. `focus`: what the user wants the summary to keep above all.
    """
    chars = budget.chars(budget.room)
    shortened = 0
    if not whole:
        history, shortened = shorten(history, max(int(HUGE * chars), MIN_PIECE), tools_only=True)
        if shortened and size_of(history) <= AFTER_SHARE * chars:
            return Compacted(history, shortened=shortened)  # huge messages were the problem
    cut = len(history) if whole else split_point(history, budget)
    summarized = 0
    if cut >= 1 and len(history) >= 2:
        old, recent = history[:cut], history[cut:]
        last_request = next((m for m in reversed(old) if m.get("role") == "user"), None)
        # The request being worked on stays word for word (after /compact it was answered),
        # and is not summarized as well (a paste larger than the window would not fit).
        kept: list[dict[str, Any]] = []
        if not whole and last_request and not any(m.get("role") == "user" for m in recent):
            kept.append(last_request)
        told = [m for m in old if not any(m is k for k in kept)]
        if told:
            summary = await _summarize(settings, told, budget, focus)
            kept.insert(0, {"role": "user", "content": SUMMARY_PREFIX + summary})
        history, summarized = [*kept, *recent], len(told)
    # Else nothing older to summarize (one message, or only the step the model has not seen
    # yet): shorten what is there.
    history, more = fit(history, chars)
    history, request_cut = _fit_request(history, chars)
    if not (summarized or shortened or more or request_cut):
        return None
    return Compacted(history, summarized, max(shortened, more), request_cut)


def _fit_request(history: list[dict[str, Any]], chars: int) -> tuple[list[dict[str, Any]], int]:
    """The user's latest request cut in the middle until the history fits in `chars` (a paste
    larger than the window); and how many characters were left out of it (0: it fitted)."""
    over = size_of(history) - chars
    index = max((i for i, m in enumerate(history) if m.get("role") == "user"), default=-1)
    if over <= 0 or index < 0:
        return history, 0
    message = history[index]
    content = message.get("content")
    texts = [content] if isinstance(content, str) else _texts(content)
    total = sum(len(t) for t in texts)
    keep = max(total - over - CUT_NOTE, MIN_PIECE)
    if keep >= total:
        return history, 0
    if isinstance(content, str):
        cut: Any = _cut_middle(content, keep)
    elif isinstance(content, list):  # each text part keeps its share
        cut = [
            {**p, "text": _cut_middle(p["text"], len(p["text"]) * keep // total)}
            if isinstance(p, dict) and isinstance(p.get("text"), str)
            else p
            for p in content
        ]
    else:
        return history, 0
    history = [*history[:index], {**message, "content": cut}, *history[index + 1 :]]
    return history, total - keep


CUT_NOTE = 80  # characters of the "[... N characters left out ...]" note


def _texts(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]


async def _summarize(
    settings: Settings, old: list[dict[str, Any]], budget: Budget, focus: str | None = None
) -> str:
    """The summary of `old`, asked in a request that fits the window beside its answer: the
    rendered text is cut (its start, the first requests, and its latest part kept) to the
    tokens left; if the server still refuses it, it is cut to the size the server counted."""
    text = _render(old)
    words = int(budget.summary_tokens * 0.6)
    system = SUMMARIZER.format(words=words)
    overhead = size_of([{"role": "system", "content": system}]) + 200  # the request's own text
    tokens = int(ANSWER_ROOM * budget.window) - budget.summary_tokens
    limit = int(budget.chars(tokens) * RENDERED) - overhead
    for attempt in range(2):
        shown = _cut_for_summary(text, limit)
        request = f"The session so far:\n\n{shown}\n\nWrite the summary."
        if focus:
            request += f"\n\nThe user asks the summary to focus on: {focus}"
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": request},
        ]
        try:
            return await _ask_summary(settings, messages, budget.summary_tokens)
        except ContextTooLong as exc:
            if attempt or len(shown) < MIN_PIECE:
                raise
            # Cut again at the characters per token the server just counted (a margin for
            # the template), or to half if it did not say.
            window = exc.size or budget.window
            counted = exc.prompt_tokens
            per_token = size_of(messages) / counted if counted else None
            tokens = int(ANSWER_ROOM * window) - budget.summary_tokens
            limit = int(tokens * per_token * RENDERED) - overhead if per_token else limit // 2
            log.info("the summary request was too long; asking again with %d characters", limit)
    raise AssertionError("unreachable")


def _cut_for_summary(text: str, limit: int) -> str:
    """Keep the start (the first requests) and the latest part."""
    limit = max(limit, MIN_PIECE)
    if len(text) <= limit:
        return text
    return text[: limit // 3] + "\n[... middle omitted ...]\n" + text[-(limit - limit // 3) :]


async def _ask_summary(settings: Settings, messages: list[dict[str, Any]], tokens: int) -> str:
    parts: list[str] = []
    async with aclosing(stream_chat(settings, messages, [], max_tokens=tokens)) as events:
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
