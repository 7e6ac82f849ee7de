"""Saving one session step by step, and putting a stored one back into a `Session`.

A checkpoint (a step boundary: the user's message, a model reply, a tool result) writes only
what changed since the last one: new history messages, new transcript entries, and the last
transcript entry again (chunks keep merging into it). The JSON is made on the event loop, which
is cheap; the SQLite work is queued to the store's thread.
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any

from agent.store.titles import first_request_text, make_title

if TYPE_CHECKING:
    from agent.session import Session
    from agent.store.db import StoredSession
    from agent.store.store import Store

UNSAVED = (
    "Note: this conversation will not be saved (Heron cannot write its session store: {reason}). "
    "Heron keeps working; see its log on stderr.\n\n"
)


def now() -> str:
    """ISO 8601 in UTC; sorts as text."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Saver:
    def __init__(self, store: Store, created_at: str | None = None) -> None:
        self.store = store
        self.created_at = created_at or now()
        self.history_saved = 0
        self.last_saved_message: dict[str, Any] | None = None
        self.first_saved_message: dict[str, Any] | None = None
        self.transcript_saved = 0
        self.told_unsaved = False
        self.deleted = False

    def restored(self, stored: StoredSession) -> None:
        self.created_at = stored.row.created_at
        self.history_saved = len(stored.history)
        self.transcript_saved = len(stored.transcript)

    def checkpoint(self, session: Session) -> str | None:
        """Queue the writes for what changed; a notice to show once if nothing can be saved."""
        if session.title is None and (title := first_request_text(session.transcript)):
            session.title = make_title(title)  # titled even when it cannot be saved
            self._announce_title(session)
        if self.store.failure is not None:
            if self.told_unsaved:
                return None
            self.told_unsaved = True
            return UNSAVED.format(reason=self.store.failure)
        if self.deleted:
            return None
        row = _session_row(session, self.created_at)
        history = session.history
        # A rewritten history (compaction) no longer has its first and last saved messages
        # where they were: it is saved whole.
        replace = self.history_saved > len(history) or (
            self.history_saved > 0
            and (
                history[0] is not self.first_saved_message
                or history[self.history_saved - 1] is not self.last_saved_message
            )
        )
        start = 0 if replace else self.history_saved
        messages = [json.dumps(m, ensure_ascii=False) for m in history[start:]]
        first_update = max(self.transcript_saved - 1, 0)
        updates = [json.dumps(u, ensure_ascii=False) for u in session.transcript[first_update:]]
        session_id = session.id
        undo_turns, undo_changes, undo_dropped = session.undo.take_unsaved()

        def write(conn: Any) -> None:
            from agent.store import db

            db.upsert_session(conn, row)
            if messages or replace:
                db.put_history(conn, session_id, start, messages, replace)
            if updates:
                db.put_updates(conn, session_id, first_update, updates)
            if undo_turns or undo_changes or undo_dropped:
                db.put_undo(conn, session_id, undo_turns, undo_changes, undo_dropped)

        self.store.write(write)
        self.history_saved = len(history)
        self.last_saved_message = history[-1] if history else None
        self.first_saved_message = history[0] if history else None
        self.transcript_saved = len(session.transcript)
        return None

    def _announce_title(self, session: Session) -> None:
        update = {
            "sessionUpdate": "session_info_update",
            "title": session.title,
            "updatedAt": now(),
        }
        session.connection.notify("session/update", {"sessionId": session.id, "update": update})


def _session_row(session: Session, created_at: str) -> Any:
    from agent.store.db import SessionRow

    return SessionRow(
        id=session.id,
        cwd=str(session.cwd),
        additional_dirs=[str(d) for d in getattr(session, "additional_directories", [])],
        title=session.title,
        created_at=created_at,
        updated_at=now(),
        mode=session.mode,
        model=session.settings.model,
        options=session.choices.saved(),
    )


def restore(session: Session, stored: StoredSession, saver: Saver) -> None:
    """Put a stored conversation back into a fresh session."""
    session.history = answer_dangling_calls(stored.history)
    session.transcript = stored.transcript
    session.title = stored.row.title
    session.undo.restore(stored.undo)
    if stored.row.mode:
        session.mode = stored.row.mode
    session.choices.restore(stored.row.options)
    for update in stored.transcript:
        if update.get("sessionUpdate") == "tool_call" and update.get("toolCallId"):
            session.new_call_id(update["toolCallId"])  # new calls must not reuse these ids
    saver.restored(stored)
    saver.last_saved_message = stored.history[-1] if stored.history else None
    saver.first_saved_message = stored.history[0] if stored.history else None
    if session.history is not stored.history:
        saver.history_saved = 0  # the answers were added: save it whole at the next step


def answer_dangling_calls(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A history cut mid-turn (a killed process) may have tool calls without results; every
    call needs one or the next request is invalid."""
    answered = {m.get("tool_call_id") for m in history if m.get("role") == "tool"}
    missing = [
        call["id"]
        for m in history
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or ()
        if call.get("id") not in answered
    ]
    if not missing:
        return history
    fixed: list[dict[str, Any]] = []
    for message in history:
        fixed.append(message)
        ids = [c.get("id") for c in message.get("tool_calls") or ()]
        for call_id in ids:
            if call_id in missing:
                fixed.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": "Interrupted: Heron stopped before this call finished.",
                    }
                )
    return fixed
