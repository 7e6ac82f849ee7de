"""The model's history stays a valid request: every tool call the model made has an answer.

A turn cut short (cancelled, failed, out of requests) or a process killed mid-turn leaves calls
without a tool message, and the next request with such a history is refused by the server.
"""

from __future__ import annotations

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
