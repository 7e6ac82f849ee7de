"""Where each step left the conversation, noted in the transcript, and finding a message's place.

The transcript (what the editor saw) and the history (what the model reads) grow together but
not one for one, so at every step boundary where the history is whole (no tool call waits for
its result) the session records a step mark in the transcript:

    {"sessionUpdate": "_heron_step", "history": <messages in the history>, "undo": [turn, n]}

(`undo`: where the undo journal stood: the changes of journal turn `turn` from its `n`-th on,
and of every later turn, came after this point). Compaction makes the older history a summary
and records where the rest moved (`_heron_compacted`: the first `cut` messages went, the
others moved by `shift`). These entries are saved and copied with the transcript like any
other, and never sent (agent.store.replay skips them).

A rewind or a fork goes back to a mark: "before user message M" is the last mark before M with
nothing of the conversation between them; "through message M" (a fork at an answer) is the
first mark after M's last chunk with no user message between. A message with no such mark
(saved by a Heron from before marks, or compacted into a summary) has no place to go back to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.store.replay import message_id

STEP = "_heron_step"
COMPACTED = "_heron_compacted"
USER = "user_message_chunk"
# Entries that are not part of what the user and the model said.
_OFF_RECORD = ("available_commands_update", "usage_update", "session_info_update")


def step_mark(history: list[dict[str, Any]], undo: tuple[int, int]) -> dict[str, Any] | None:
    """The mark of this point, or None when the history is not whole (the last model message
    asked for tools whose results are not in yet)."""
    last = history[-1] if history else None
    if last is not None and last.get("role") == "assistant" and last.get("tool_calls"):
        return None
    return {"sessionUpdate": STEP, "history": len(history), "undo": list(undo)}


def compaction_mark(cut: int, shift: int) -> dict[str, Any]:
    return {"sessionUpdate": COMPACTED, "cut": cut, "shift": shift}


@dataclass(frozen=True)
class Cut:
    """A point to go back to: the transcript's first `transcript` entries, the history's
    first `history` messages, and the undo journal's position then."""

    transcript: int
    history: int
    undo: tuple[int, int]


@dataclass(frozen=True)
class UserMessage:
    number: int  # from 1, in the order they were sent
    message_id: str
    index: int  # of its first chunk in the transcript
    text: str  # its text blocks, joined


def user_messages(transcript: list[dict[str, Any]]) -> list[UserMessage]:
    """The user's messages (prompts and steering), in order."""
    found: list[UserMessage] = []
    for index, entry in enumerate(transcript):
        if entry.get("sessionUpdate") != USER:
            continue
        content = entry.get("content")
        text = content.get("text") if isinstance(content, dict) else None
        text = text if isinstance(text, str) else ""
        ident = message_id(entry, index)
        if found and found[-1].message_id == ident:
            last = found[-1]
            found[-1] = UserMessage(last.number, ident, last.index, last.text + text)
        else:
            found.append(UserMessage(len(found) + 1, ident, index, text))
    return found


def message_span(transcript: list[dict[str, Any]], ident: str) -> tuple[str, int, int] | None:
    """(kind, first index, last index) of the chunks of message `ident`."""
    span: tuple[str, int, int] | None = None
    for index, entry in enumerate(transcript):
        kind = entry.get("sessionUpdate")
        chunk = kind in (USER, "agent_message_chunk", "agent_thought_chunk")
        if chunk and message_id(entry, index) == ident:
            span = (str(kind), span[1] if span else index, index)
    return span


def cut_before(transcript: list[dict[str, Any]], index: int) -> Cut | None:
    """The point just before the entry at `index` (a user message): the last mark before it
    with nothing said between them."""
    for at in range(index - 1, -2, -1):
        entry = transcript[at] if at >= 0 else None
        if entry is None:
            return Cut(0, 0, (1, 0))  # the start of the conversation
        kind = entry.get("sessionUpdate")
        if kind == STEP:
            return _cut(transcript, at)
        if not _bookkeeping(kind):
            return None
    return None


def cut_after(transcript: list[dict[str, Any]], index: int) -> Cut | None:
    """The point just after the message whose last chunk is at `index`: the first mark after
    it with no user message between (the tool calls of that step come along)."""
    for at in range(index + 1, len(transcript)):
        kind = transcript[at].get("sessionUpdate")
        if kind == STEP:
            return _cut(transcript, at)
        if kind == USER:
            return None
    return None


def cut_at_message(transcript: list[dict[str, Any]], ident: str) -> Cut | str | None:
    """Where a fork at message `ident` ends: before it for a user message (the point it was
    sent from), after it (and its step's tool calls) for an answer or a thought. None when
    there is no such place; "unknown" when there is no such message."""
    span = message_span(transcript, ident)
    if span is None:
        return "unknown"
    kind, first, last = span
    return cut_before(transcript, first) if kind == USER else cut_after(transcript, last)


def _bookkeeping(kind: Any) -> bool:
    return isinstance(kind, str) and (kind.startswith("_") or kind in _OFF_RECORD)


def _cut(transcript: list[dict[str, Any]], at: int) -> Cut | None:
    """The cut at the mark at `at`, its history position carried through later compactions
    (None when the history it pointed into is a summary now)."""
    mark = transcript[at]
    history = mark.get("history")
    undo = mark.get("undo")
    if not isinstance(history, int) or not isinstance(undo, list) or not _is_position(undo):
        return None
    for entry in transcript[at + 1 :]:
        if entry.get("sessionUpdate") == COMPACTED:
            cut, shift = entry.get("cut"), entry.get("shift")
            if not isinstance(cut, int) or not isinstance(shift, int) or history < cut:
                return None
            history += shift
    return Cut(at + 1, history, (undo[0], undo[1]))


def _is_position(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)
