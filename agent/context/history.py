"""The model's history stays a valid request: every tool call the model made has an answer,
every request of the user has an answer, and the roles alternate.

A turn cut short (cancelled, failed, out of requests) or a process killed mid-turn leaves calls
without a tool message, or the user's message without any answer; the next request with such a
history is refused by the server (chat templates that demand alternating roles refuse two user
messages in a row, and every later request with them).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any


def answer_dangling_calls(
    history: list[dict[str, Any]], answer: Callable[[str], str]
) -> list[dict[str, Any]]:
    """`history` with a tool message (`answer(call id)`) for each call that has none, placed after
    that assistant message's other answers: at the end for the last turn, so a history being
    saved step by step only grows. The same list when nothing is missing."""
    answered = {m.get("tool_call_id") for m in history if m.get("role") == "tool"}
    if all(
        call.get("id") in answered
        for m in history
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or ()
    ):
        return history
    fixed: list[dict[str, Any]] = []
    missing: list[str] = []  # of the last assistant message, until its answers are passed

    def flush() -> None:
        fixed.extend({"role": "tool", "tool_call_id": i, "content": answer(i)} for i in missing)
        missing.clear()

    for message in history:
        if message.get("role") != "tool":
            flush()
        fixed.append(message)
        if message.get("role") == "assistant":
            ids = [call.get("id") for call in message.get("tool_calls") or ()]
            missing.extend(i for i in ids if i not in answered)
    flush()
    return fixed


def note_unanswered(history: list[dict[str, Any]], note: str) -> None:
    """A turn that ended without an answer (cancelled before the first token, a request that
    failed) leaves the user's message last: `note` becomes the assistant's answer to it, so the
    next request does not send two user messages in a row and still starts, byte for byte, with
    the requests before it. The model reads what happened to that request."""
    if history and history[-1].get("role") == "user":
        history.append({"role": "assistant", "content": note})


def alternating(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` as a request sends them: consecutive user messages (a compaction's summary
    and the request after it, a history saved before the turns noted their missing answers)
    become one, as do consecutive assistant messages without tool calls, since chat templates
    such as Gemma's and Mistral's refuse roles that do not alternate. The same messages give
    the same result byte for byte; the same list when nothing is merged."""
    if all(not _joins(a, b) for a, b in itertools.pairwise(messages)):
        return messages
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and _joins(out[-1], message):
            out[-1] = {**out[-1], "content": _joined(out[-1]["content"], message["content"])}
        else:
            out.append(message)
    return out


def _joins(first: dict[str, Any], second: dict[str, Any]) -> bool:
    role = first.get("role")
    return (
        role in ("user", "assistant")
        and second.get("role") == role
        and not first.get("tool_calls")
        and not second.get("tool_calls")
    )


def _joined(first: Any, second: Any) -> Any:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    return [*_parts(first), {"type": "text", "text": "\n\n"}, *_parts(second)]


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content if isinstance(content, str) else ""}]
