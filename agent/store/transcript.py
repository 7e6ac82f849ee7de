"""A session's transcript: the editor's view of the conversation, the `session/update`s sent
(consecutive chunks of one message merged), which the store saves and `session/load` replays
(`replay`).

Every message chunk carries its message's `messageId` (`new_message_id`): the same for all the
chunks of one message, so a replay shows the messages with the ids they had.
"""

from __future__ import annotations

from typing import Any

from agent.acp.ids import uuid4

_MERGED_CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


def new_message_id() -> str:
    """A new message's id: a random UUID, unique across the processes that may share a
    session."""
    return uuid4()


class Transcript:
    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self._entries: list[dict[str, Any]] = entries if entries is not None else []
        # While chunks merge into the last entry, its text in pieces (joined when the
        # transcript is read): appending to one string would copy it at every delta.
        self._text_parts: list[str] | None = None
        # toolCallId → index in the entries of its latest progress snapshot
        self._snapshots: dict[Any, int] = {}

    @property
    def entries(self) -> list[dict[str, Any]]:
        """The updates kept, in order (the last one may still grow: chunks merge into it)."""
        self._join_text()
        return self._entries

    def replace(self, entries: list[dict[str, Any]]) -> None:
        """Start from a stored transcript (session/load, resume)."""
        self._entries = entries
        self._text_parts = None
        self._snapshots = {}

    def _join_text(self) -> None:
        if self._text_parts is not None:
            # A new entry, not the first chunk changed in place: that dict was also sent.
            last = self._entries[-1]
            text = "".join(self._text_parts)
            self._entries[-1] = {**last, "content": {**last["content"], "text": text}}
            self._text_parts = None

    def record(self, update: dict[str, Any]) -> None:
        """Keep a sent update for replay, merging consecutive chunks of one message.

        A running call's progress snapshots (a `tool_call_update` without a status) patch the
        call's previous snapshot instead of piling up: a noisy command sends ten a second for
        as long as it runs, and replay needs only the last one.
        """
        kind = update.get("sessionUpdate")
        entries = self._entries
        last = entries[-1] if entries else None
        if (
            kind in _MERGED_CHUNKS
            and last is not None
            and last.get("sessionUpdate") == kind
            and last.get("messageId") == update.get("messageId")
            and last["content"].get("type") == "text" == update["content"].get("type")
        ):
            if self._text_parts is None:
                self._text_parts = [last["content"]["text"]]
            self._text_parts.append(update["content"]["text"])
            return
        self._join_text()
        if kind == "tool_call_update" and "status" not in update:
            call_id = update.get("toolCallId")
            index = self._snapshots.get(call_id)
            if index is not None and index < len(entries):
                previous = entries[index]
                if previous.get("toolCallId") == call_id and "status" not in previous:
                    # Fields patch the call (ACP), so merging keeps what replay shows.
                    entries[index] = {**previous, **update}
                    return
            self._snapshots[call_id] = len(entries)
        elif kind in ("tool_call", "tool_call_update"):
            # A status change ends the snapshot run: later progress goes after it.
            self._snapshots.pop(update.get("toolCallId"), None)
        entries.append(update)
