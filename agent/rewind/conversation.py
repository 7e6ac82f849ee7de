"""Taking the conversation back to a point (a `Cut`, agent.rewind.marks), and bringing it back
(/undo of the rewind): the model's history and the transcript `session/load` replays, written
to the store in one transaction before anything changes in memory, so a rewind never happens
in part: if the store cannot take it, nothing changes and the reason is said.

What a rewind takes out is kept in the undo journal as the rewind's own turn
(`TurnChanges.conversation`), with the turns whose file changes it restored, so /undo right
after it puts the conversation back as it was (the exchanges since stay after it).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from agent.rewind.marks import Cut

if TYPE_CHECKING:
    from agent.store.saver import Saver, SessionParts
    from agent.store.transcript import Transcript
    from agent.undo.journal import TurnChanges, UndoJournal

MOVED_ON = (
    "the conversation has gone on since that rewind (a message was sent to the model), so it "
    "was left as it is"
)


class Rewindable(Protocol):
    """What a rewind reads and changes of a session (`agent.session.Session`)."""

    history: list[dict[str, Any]]
    transcript: Transcript

    @property
    def undo(self) -> UndoJournal: ...

    @property
    def saver(self) -> Saver | None: ...

    def stored_parts(self) -> SessionParts: ...


async def rewind(
    session: Rewindable, cut: Cut, keep_from: int | None, restored: list[TurnChanges]
) -> tuple[TurnChanges | None, str | None]:
    """Take the conversation back to `cut`, keeping the transcript from `keep_from` on (the
    exchange that asked for the rewind: a /rewind command); `restored`: the turns whose file
    changes the rewind takes back. The rewind's journal turn, or (None, why it did not
    happen)."""
    entries = session.transcript.entries
    end = len(entries) if keep_from is None else keep_from
    kept = entries[end:] if keep_from is not None else []
    taken = {
        "historyAt": cut.history,
        "transcriptAt": cut.transcript,
        "history": session.history[cut.history :],
        "transcript": entries[cut.transcript : end],
        "turns": [turn.turn for turn in restored],
    }
    journal = session.undo
    turn = journal.begin_rewind(copy.deepcopy(taken))
    history = session.history[: cut.history]
    transcript = [*entries[: cut.transcript], *kept]
    reason = await write(session, history, transcript)
    if reason is not None:
        journal.forget(turn)
        return None, reason
    for done in restored:
        journal.mark_undone(done)
    return turn, None


async def bring_back(session: Rewindable, turn: TurnChanges) -> str | None:
    """/undo of a rewind: the conversation it took out goes back where it was. None once done,
    else why not (the files are still taken back by /undo)."""
    taken = turn.conversation or {}
    at, where = taken.get("historyAt"), taken.get("transcriptAt")
    history, entries = taken.get("history"), taken.get("transcript")
    if not (isinstance(at, int) and isinstance(where, int)):
        return "that rewind's record is damaged"
    if not (isinstance(history, list) and isinstance(entries, list)):
        return "that rewind's record is damaged"
    if len(session.history) != at:
        return MOVED_ON
    now = session.transcript.entries
    reason = await write(
        session, [*session.history, *history], [*now[:where], *entries, *now[where:]]
    )
    if reason is not None:
        return reason
    journal = session.undo
    numbers = set(taken.get("turns") or ())
    for earlier in journal.turns:
        if earlier.turn in numbers:
            journal.mark_undone(earlier, False)  # their changes are back with the files
    journal.mark_undone(turn)
    return None


async def write(
    session: Rewindable, history: list[dict[str, Any]], transcript: list[dict[str, Any]]
) -> str | None:
    """The conversation as given, in the store first (one transaction), then in memory; the
    reason when the store cannot take it (and nothing changed)."""
    if session.saver is not None:
        parts = dataclasses.replace(session.stored_parts(), history=history, transcript=transcript)
        reason = await session.saver.rewrite(parts)
        if reason is not None:
            return reason
    session.history = history
    session.transcript.replace(transcript)
    return None
