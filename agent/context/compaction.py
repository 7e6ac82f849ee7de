"""Compaction: when the conversation outgrows the model's context window, the older part of the
history becomes a summary the model writes itself, and the turn goes on.

It happens before a request that would fill more than COMPACT_AT of the window (estimated), or
after the server rejected a request for its length. What stays as it was: the system prompt
(rebuilt every turn anyway), the recent messages (each tool call with its result: the cut
never falls between them) and the user's latest request. The transcript is not touched, so a
loaded session still replays everything; the compacted history is what the store saves.
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


def needs_compaction(messages: list[dict[str, Any]], window: int) -> bool:
    return estimate_tokens(messages) > COMPACT_AT * window


def split_point(history: list[dict[str, Any]], window: int) -> int:
    """Where the recent part starts: as much as fits in KEEP_RECENT of the window, never a
    tool result (it stays with its call), and never the whole history."""
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
    return cut


async def compact(
    settings: Settings,
    history: list[dict[str, Any]],
    window: int,
    focus: str | None = None,
    whole: bool = False,
) -> tuple[list[dict[str, Any]], int] | None:
    """The compacted history and how many messages it summarized; None if nothing can go.

    `whole` (the /compact command, between turns): all of it becomes the summary, nothing is
    kept word for word. `focus`: what the user wants the summary to keep above all.
    """
    if len(history) < 2:
        return None  # one message: nothing older to summarize
    cut = len(history) if whole else split_point(history, window)
    old, recent = history[:cut], history[cut:]
    summary = await _summarize(settings, old, window, focus)
    kept: list[dict[str, Any]] = [{"role": "user", "content": SUMMARY_PREFIX + summary}]
    last_request = next((m for m in reversed(old) if m.get("role") == "user"), None)
    # The request being worked on stays word for word (after /compact it was answered).
    if not whole and last_request and not any(m.get("role") == "user" for m in recent):
        kept.append(last_request)
    return [*kept, *recent], len(old)


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
