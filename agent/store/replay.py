"""The editor's view of a stored conversation, as `session/load` replays it.

The transcript keeps every update as it was sent (chunks merged); a replay shows each tool call
once, in its final state, at the place it was announced, and only the last plan. A tool call
that never finished (the process died, or the turn was cut short) replays as failed: ACP has no
other end state for it.

Message chunks replay with the `messageId` they were sent with; chunks stored before Heron sent
ids get one made from their place in the transcript (`legacy-N`), the same at every load. The
transcript's own bookkeeping entries (`_heron…`: where each step left the model's history, see
agent.rewind.marks) are never sent.

Heron's notes and compactions replay as the loading client can show them: a `notice` is a live
event, not sent again to a client that shows notices, and shown as its text to one that does
not; a `compaction_update` goes as it was to a client that shows compactions, and as the words
that told its end to the others.
"""

from __future__ import annotations

from typing import Any

INTERRUPTED = "Interrupted: Heron stopped before this call finished."
CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


def message_id(entry: dict[str, Any], index: int) -> str:
    """The id of the message a transcript entry (a chunk at `index`) belongs to."""
    found = entry.get("messageId")
    return found if isinstance(found, str) else f"legacy-{index}"


def replay_updates(
    transcript: list[dict[str, Any]], notices: bool = False, compaction: bool = False
) -> list[dict[str, Any]]:
    """What `session/load` sends of a transcript, to a client that shows `notices` and
    `compaction` updates or not."""
    updates: list[dict[str, Any] | None] = []
    calls: dict[str, dict[str, Any]] = {}
    last_plan: tuple[int, dict[str, Any]] | None = None
    for index, update in enumerate(transcript):
        kind = update.get("sessionUpdate")
        if not isinstance(kind, str) or kind.startswith("_"):
            continue  # Heron's own bookkeeping
        if (kind == "notice" and not notices) or (kind == "compaction_update" and not compaction):
            text = _words(update)
            if not text:
                continue
            content = {"type": "text", "text": text}
            update = {"sessionUpdate": "agent_message_chunk", "content": content}
            kind = "agent_message_chunk"
        elif kind == "notice":
            continue  # a live event
        if kind in CHUNKS and not isinstance(update.get("messageId"), str):
            update = {
                "sessionUpdate": kind,
                "messageId": message_id(update, index),
                **{k: v for k, v in update.items() if k != "sessionUpdate"},
            }
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


def _words(update: dict[str, Any]) -> str:
    """A notice, or the end of a compaction, as the text a client without them is shown."""
    if update.get("sessionUpdate") == "notice":
        text = update.get("description") or update.get("title")
    else:
        meta = update.get("_meta")
        heron = meta.get("heron") if isinstance(meta, dict) else None
        text = heron.get("text") if isinstance(heron, dict) else None
    return f"{text.strip()}\n\n" if isinstance(text, str) and text.strip() else ""


def prompt_updates(blocks: list[Any]) -> list[dict[str, Any]]:
    """A prompt's blocks as the `user_message_chunk`s a replay shows (text and resource links;
    images, audio and embedded resources are not kept), without their message id."""
    updates = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text" and isinstance(getattr(block, "text", None), str):
            text = {"type": "text", "text": block.text}
            updates.append({"sessionUpdate": "user_message_chunk", "content": text})
        elif kind == "resource_link" and isinstance(getattr(block, "uri", None), str):
            updates.append(user_link_update(block.uri, block.name, block.title, block.mime_type))
    return updates


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
