"""Saving one session step by step.

A checkpoint (a step boundary: the user's message, a model reply, a tool result) writes only
what changed since the last one: new history messages, new transcript entries, and the last
transcript entry again (chunks keep merging into it). The JSON is made on the event loop, which
is cheap; the SQLite work is queued to the store's thread. The saver gets the session as plain
parts (`SessionParts`), read at each step: it never holds the session.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.notices import Note

if TYPE_CHECKING:
    from agent.store.db import StoredSession
    from agent.store.store import Store

log = logging.getLogger("heron.store")

UNSAVED = (
    "Note: this conversation will not be saved (Heron cannot write its session store: {reason}). "
    "Heron keeps working; see its log on stderr.\n\n"
)
NOT_SAVING = (
    "Note: this conversation is not being saved (the session store refused the last write: "
    "{reason}). Heron keeps working and saves it whole at the next step that can be written."
    "\n\n"
)
MOVED_ON = (
    "Note: another Heron process (an editor, or `heron exec --continue`) has saved turns of "
    "this session since it was opened here. Both are kept: this process's turns are saved "
    "after those. Load the session again to see them all.\n\n"
)
GONE = "Note: this session was deleted by another Heron process; it is no longer saved.\n\n"


def now() -> str:
    """ISO 8601 in UTC; sorts as text."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` as UTF-8 can hold it: lone surrogates (a file name that is not UTF-8, half an
    emoji from a model or a client) become U+FFFD. SQLite cannot bind them, and one such write
    must not fail a whole session."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _dump(value: Any) -> str:
    return storable(json.dumps(value, ensure_ascii=False))


# The undo journal's rows not saved yet: (turns, changes, dropped turns), as JSON.
UndoRows = tuple[list[tuple[int, int, str, str | None]], list[tuple[int, int, str]], list[int]]


@dataclasses.dataclass
class SessionParts:
    """What a step saves of a session, read from it when the step is queued."""

    id: str
    cwd: Path
    additional_directories: list[Path]
    title: str | None
    mode: str  # the mode the store keeps (`Session.saved_mode`)
    model: str | None
    options: dict[str, str]  # the user's picks (agent.options)
    history: list[dict[str, Any]]
    transcript: list[dict[str, Any]]
    trust: str | None = None  # the session's own trust answer (agent.trust.state.saved)
    # Takes the undo journal's unsaved rows (None: the session has no journal yet); called
    # only when the step is written.
    take_undo: Callable[[], UndoRows] | None = None


@dataclasses.dataclass
class Position:
    """Where this process's part of a session is in the store."""

    revision: int | None = None  # as this process last wrote or read it; None: not stored
    # A message's index in the session + shift = its seq in the store (not 0 once another
    # process saved turns of the session: this process's turns go after them).
    history_from: int = 0  # ... for the messages from this index on
    history_shift: int = 0
    updates_from: int = 0
    updates_shift: int = 0
    moved_on: bool = False  # another process saved turns of this session since


class StoredState:
    """One session's standing in the store. Changed only in the store's thread, by the write
    jobs and their transaction's end (`committed`, `aborted`, `failed`); the event loop only
    reads it."""

    def __init__(self) -> None:
        self.saved = Position()
        self.pending: Position | None = None  # as the open transaction leaves it
        self.gone = False  # deleted by another process
        self.failure: str | None = None  # why the last write failed; the next one saves all

    def working(self) -> Position:
        if self.pending is None:
            self.pending = dataclasses.replace(self.saved)
        return self.pending

    def committed(self) -> None:
        if self.pending is not None:
            self.saved, self.pending = self.pending, None
            self.failure = None

    def aborted(self) -> None:
        self.pending = None

    def failed(self, reason: str) -> None:
        log.error("session store: a write failed: %s", reason)
        self.failure = reason


class Saver:
    def __init__(self, store: Store, created_at: str | None = None) -> None:
        self.store = store
        self.created_at = created_at or now()
        self.history_saved = 0
        self.last_saved_message: dict[str, Any] | None = None
        self.first_saved_message: dict[str, Any] | None = None
        self.transcript_saved = 0
        self.last_update_text: str | None = None  # the last transcript entry, as written
        self.state = StoredState()
        self.created = False
        self.deleted = False

    @property
    def in_store(self) -> bool:
        """The session has a row (or one is queued): a change of its picks is saved at once."""
        return self.created or self.state.saved.revision is not None

    def restored(self, stored: StoredSession, history: list[dict[str, Any]] | None = None) -> None:
        """The session was put back from `stored`, its history as `history` (see
        `answer_dangling_calls`)."""
        self.created_at = stored.row.created_at
        self.history_saved = len(stored.history)
        self.transcript_saved = len(stored.transcript)
        self.last_update_text = _dump(stored.transcript[-1]) if stored.transcript else None
        self.state.saved.revision = stored.row.revision
        self.last_saved_message = stored.history[-1] if stored.history else None
        self.first_saved_message = stored.history[0] if stored.history else None
        if history is not None and history is not stored.history:
            self.history_saved = 0  # the answers were added: save it whole at the next step

    def create(self, session: SessionParts) -> None:
        """The row of a session just opened (after the `session/new` answer): from now on it
        is listed, and can be loaded and resumed here or in another process."""
        if self.store.failure is None and not self.deleted:
            self.created = True
            self._queue(session, full=False)

    def checkpoint(self, session: SessionParts) -> list[Note]:
        """Queue the writes for what changed; what the user must know if they cannot be
        saved (each note is told once per session: agent.notices)."""
        if self.store.failure is not None:
            reason = self.store.failure
            title = "This conversation will not be saved"
            return [Note(f"unsaved: {reason}", title, UNSAVED.format(reason=reason), "error")]
        if self.deleted:
            return []
        state = self.state
        if state.gone:
            self.deleted = True
            title = "This session was deleted by another Heron process"
            return [Note("gone", title, GONE, "warning")]
        notes = []
        if state.saved.moved_on:
            title = "Another Heron process saved turns of this session"
            notes.append(Note("moved on", title, MOVED_ON, "info"))
        # After a failed write, this one saves the whole session: nothing is left out between.
        failure = state.failure
        if failure is not None:
            title = "This conversation is not being saved"
            text = NOT_SAVING.format(reason=failure)
            notes.append(Note(f"not saving: {failure}", title, text, "warning"))
        self._queue(session, full=failure is not None)
        return notes

    def _queue(self, session: SessionParts, full: bool) -> None:
        row = _session_row(session, self.created_at)
        history = session.history
        # A rewritten history (compaction) no longer has its first and last saved messages
        # where they were: it is saved whole.
        replace = (
            full
            or self.history_saved > len(history)
            or (
                self.history_saved > 0
                and (
                    history[0] is not self.first_saved_message
                    or history[self.history_saved - 1] is not self.last_saved_message
                )
            )
        )
        start = 0 if replace else self.history_saved
        messages = [_dump(m) for m in history[start:]]
        # The last entry written is written again (chunks keep merging into it).
        first_update = 0 if full else max(self.transcript_saved - 1, 0)
        updates = [_dump(u) for u in session.transcript[first_update:]]
        # Unchanged, it is not written again after another process's turns.
        rewritten_unchanged = (
            not full
            and first_update < self.transcript_saved
            and bool(updates)
            and updates[0] == self.last_update_text
        )
        session_id = session.id
        # (The journal is made on first use: a session without one has nothing to save.)
        take_undo = session.take_undo
        undo_turns, undo_changes, undo_dropped = take_undo() if take_undo else ([], [], [])
        state = self.state

        def write(conn: Any) -> None:
            from agent.store import db

            if state.gone or (state.failure is not None and not full):
                return  # deleted elsewhere; or a failed write left a gap only `full` fills
            at = state.working()
            current = db.revision(conn, session_id)
            if current is None and at.revision is not None:
                state.gone = True  # deleted by another process: it stays deleted
                return
            if current != at.revision:
                # Another process saved turns since: what is new here goes after them, and
                # nothing it wrote is written over.
                at.moved_on = True
                stored_history, stored_updates = db.stored_lengths(conn, session_id)
                at.history_from, at.history_shift = start, stored_history - start
                at.updates_from = first_update + (1 if rewritten_unchanged else 0)
                at.updates_shift = stored_updates - at.updates_from
            at.revision = (current or 0) + 1
            db.upsert_session(conn, row, at.revision)
            if replace:  # the whole history, in place of this process's own
                region = at.history_from + at.history_shift
                at.history_from, at.history_shift = 0, region
                db.put_history(conn, session_id, region, messages, replace_from=region)
            elif messages:
                first = max(start, at.history_from)
                new = messages[first - start :]
                db.put_history(conn, session_id, first + at.history_shift, new)
            first = max(first_update, at.updates_from)
            if new := updates[first - first_update :]:
                db.put_updates(conn, session_id, first + at.updates_shift, new)
            # /undo's turns are numbered per process: once two processes share the session,
            # this one's stay in memory only, so that neither overwrites the other's.
            if (undo_turns or undo_changes or undo_dropped) and not at.moved_on:
                db.put_undo(conn, session_id, undo_turns, undo_changes, undo_dropped)

        self.store.write(write, state)
        self.history_saved = len(history)
        self.last_saved_message = history[-1] if history else None
        self.first_saved_message = history[0] if history else None
        self.transcript_saved = len(session.transcript)
        self.last_update_text = updates[-1] if updates else self.last_update_text

    async def rewrite(self, session: SessionParts) -> str | None:
        """Replace the stored conversation (history, transcript, undo rows) with `session`'s
        in one transaction (a rewind, or /undo of one): None once written, or when nothing
        is being saved; else why it could not be, and then the store holds what it held."""
        if self.store.failure is not None or self.deleted:
            return None  # kept in memory only, as everything else
        row = _session_row(session, self.created_at)
        messages = [_dump(m) for m in session.history]
        updates = [_dump(u) for u in session.transcript]
        undo = session.take_undo() if session.take_undo else ([], [], [])
        session_id, state = session.id, self.state

        def job(conn: Any) -> str | None:
            from agent.store import db
            from agent.store.failures import describe

            if state.gone:
                return "the session was deleted by another Heron process"
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = db.revision(conn, session_id)
                if state.saved.moved_on or (
                    current is not None and current != state.saved.revision
                ):
                    conn.execute("ROLLBACK")
                    return (
                        "another Heron process saved turns of this session since it was opened "
                        "here; load it again, then rewind"
                    )
                revision = (current or 0) + 1
                db.upsert_session(conn, row, revision)
                db.put_history(conn, session_id, 0, messages, replace_from=0)
                db.replace_updates(conn, session_id, updates)
                db.put_undo(conn, session_id, *undo)
                conn.execute("COMMIT")
            except Exception as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                return describe(exc, self.store.path)
            state.saved = Position(revision=revision)
            state.pending, state.failure = None, None
            return None

        try:
            reason = await self.store.read(job)
        except Exception as exc:  # the store thread could not run it at all
            reason = str(exc)
        if reason is None:
            history = session.history
            self.history_saved = len(history)
            self.first_saved_message = history[0] if history else None
            self.last_saved_message = history[-1] if history else None
            self.transcript_saved = len(session.transcript)
            self.last_update_text = updates[-1] if updates else None
            self.created = True
        return reason


def title_update(title: str | None) -> dict[str, Any]:
    """The `session_info_update` telling the client a session's title."""
    return {"sessionUpdate": "session_info_update", "title": title, "updatedAt": now()}


def _session_row(session: SessionParts, created_at: str) -> Any:
    from agent.store.db import SessionRow

    model = session.model
    return SessionRow(
        id=session.id,
        cwd=storable(str(session.cwd)),
        additional_dirs=[storable(str(d)) for d in session.additional_directories],
        title=session.title and storable(session.title),
        created_at=created_at,
        updated_at=now(),
        mode=session.mode,
        model=model and storable(model),
        options=session.options,
        trust=session.trust,
    )
