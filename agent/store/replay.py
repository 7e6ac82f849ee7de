"""The editor's view of a stored conversation, as `session/load` replays it.

The transcript keeps every update as it was sent (chunks merged); a replay shows each tool call
once, in its final state, at the place it was announced, and only the last plan. A tool call
that never finished (the process died, or the turn was cut short) replays as failed: ACP has no
other end state for it.
"""

from __future__ import annotations

from typing import Any

INTERRUPTED = "Interrupted: Heron stopped before this call finished."


def replay_updates(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    updates: list[dict[str, Any] | None] = []
    calls: dict[str, dict[str, Any]] = {}
    last_plan: tuple[int, dict[str, Any]] | None = None
    for update in transcript:
        kind = update.get("sessionUpdate")
        if kind == "tool_call":
            call = dict(update)
            calls[call.get("toolCallId", "")] = call
            updates.append(call)
        elif kind == "tool_call_update":
            known = calls.get(update.get("toolCallId", ""))
            if known is not None:
                # Updates carry only the changed fields; content and locations replace lists.
                known.update((k, v) for k, v in update.items() if k != "sessionUpdate")
        elif kind == "plan":
            last_plan = (len(updates), update)
            updates.append(None)  # the place of a plan; only the last one is kept
        else:
            updates.append(update)
    for call in calls.values():
        if call.get("status") not in ("completed", "failed"):
            call["status"] = "failed"
            call["content"] = [
                *(call.get("content") or ()),
                {"type": "content", "content": {"type": "text", "text": INTERRUPTED}},
            ]
    if last_plan is not None:
        updates[last_plan[0]] = last_plan[1]
    return [u for u in updates if u is not None]


def user_link_update(
    uri: str, name: str, title: str | None, mime_type: str | None
) -> dict[str, Any]:
    """A resource link of the prompt, kept as it was for the replay."""
    link: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    if title:
        link["title"] = title
    if mime_type:
        link["mimeType"] = mime_type
    return {"sessionUpdate": "user_message_chunk", "content": link}
