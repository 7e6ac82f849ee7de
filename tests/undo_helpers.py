"""What the /undo tests share: running /undo and reading the tool call it shows."""

from __future__ import annotations

from typing import Any


def undo(fake_llm, client, session_id: str) -> tuple[str, list[dict[str, Any]]]:
    """Run /undo: its agent message and its tool call updates. The model is not asked."""
    asked = len(fake_llm.requests)
    result = client.prompt(session_id, "/undo")
    assert result["stopReason"] == "end_turn"
    assert len(fake_llm.requests) == asked
    message = "".join(
        u["content"]["text"]
        for u in result["updates"]
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    calls = [
        u for u in result["updates"] if u["sessionUpdate"] in ("tool_call", "tool_call_update")
    ]
    return message, calls


def final(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The undo tool call as the editor ends up showing it."""
    shown: dict[str, Any] = {}
    for update in calls:
        shown.update({k: v for k, v in update.items() if k != "sessionUpdate"})
    return shown


def diffs(call: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in call.get("content") or [] if c["type"] == "diff"]
