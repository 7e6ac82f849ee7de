"""`_session/rewind` and `_session/rewind_files`: rewinds for clients built for Claude's adapter
(claude-agent-acp's shapes), addressed by a user message's `messageId`; discovered in the
`initialize` answer's `_meta.sessionRewind` / `_meta.sessionRewindFiles`.

- `_session/rewind {sessionId, beforeMessage: {messageId, messageFingerprint?,
  messageOccurrence?}, resumeAtMessage?, interruptIfRunning?}` takes the conversation back to
  just before that message (the files are `_session/rewind_files`' business, as there):
  `{rewound: true, sessionId}`, or `{rewound: false, reason}` (`busy` while a turn runs unless
  `interruptIfRunning`, `session_not_found`, `not_rewindable`, or the store's reason).
- `_session/rewind_files {sessionId, beforeMessage, dryRun}` restores the files Heron's turns
  changed since then, under /undo's rule (`dryRun: true`: what it would do, nothing written):
  `{sessionId, dryRun, canRewind, filesChanged, insertions, deletions, error?}`, with the files
  left as they are, and why, in `_meta.heron.left`.
An unknown message, or a fingerprint that does not match it, is invalid params. Both are
undoable by /undo, as `/rewind` is.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from typing import TYPE_CHECKING, Any

from agent.acp.wire import INVALID_PARAMS, RpcError
from agent.rewind.conversation import rewind
from agent.rewind.marks import Cut, cut_before, message_span, user_messages

if TYPE_CHECKING:
    from agent.session import Session
    from agent.undo.revert import Outcome

FINGERPRINT = re.compile(r"sha256:[0-9a-f]{64}")


class RewindMethods:
    def __init__(self, sessions: dict[str, Session]) -> None:
        self.sessions = sessions  # the server's live sessions

    async def rewind(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = _session_id(params)
        point = _point(params.get("beforeMessage"), "beforeMessage")
        interrupt = params.get("interruptIfRunning", False)
        if not isinstance(interrupt, bool):
            raise RpcError(INVALID_PARAMS, "interruptIfRunning must be a boolean")
        resume = params.get("resumeAtMessage")
        session = self.sessions.get(session_id)
        if session is None:
            return {"rewound": False, "reason": "session_not_found"}
        if session.busy and not interrupt:
            return {"rewound": False, "reason": "busy"}
        session.cancel()
        async with session.exclusive():
            entries = session.transcript.entries
            index = _target(entries, session_id, point)
            if resume is not None:
                _check_resume(entries, index, _point(resume, "resumeAtMessage"))
            cut = cut_before(entries, index)
            if cut is None:
                return {"rewound": False, "reason": "not_rewindable"}
            _, reason = await rewind(session, cut, None, [])
            if reason is not None:
                return {"rewound": False, "reason": reason}
            session.save()
        return {"rewound": True, "sessionId": session_id}

    async def rewind_files(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = _session_id(params)
        dry_run = params.get("dryRun")
        if not isinstance(dry_run, bool):
            raise RpcError(INVALID_PARAMS, "sessionId and explicit dryRun are required")
        point = _point(params.get("beforeMessage"), "beforeMessage")
        base: dict[str, Any] = {"sessionId": session_id, "dryRun": dry_run}
        session = self.sessions.get(session_id)
        if session is None:
            return {**base, "canRewind": False, "reason": "session_not_found"}
        if session.busy:
            return {**base, "canRewind": False, "reason": "busy"}
        async with session.exclusive():
            entries = session.transcript.entries
            cut = cut_before(entries, _target(entries, session_id, point))
            if cut is None:
                return {**base, "canRewind": False, "reason": "not_rewindable"}
            return {**base, **await _restore_files(session, cut, dry_run)}


async def _restore_files(session: Session, cut: Cut, dry_run: bool) -> dict[str, Any]:
    # Here, not at the top: this module is imported before `session/new` is answered, and
    # these bring pydantic and the ACP models.
    from agent.rewind.files import Recording
    from agent.undo.revert import Real, Simulated, revert

    journal = session.undo
    turns, changes, forgotten = journal.since(cut.undo)
    if not changes:
        error = "No file that Heron's file tools changed since that message is kept to restore."
        if forgotten:
            error += " Older changes are no longer kept (the undo history is bounded)."
        return {"canRewind": False, "error": error, "filesChanged": []}
    files = Real(session.files)
    if dry_run:
        outcomes = await revert(changes, Simulated(files), session.cwd)
    else:
        journal.begin_rewind(None)  # the restore is a turn of its own: /undo takes it back
        try:
            outcomes = await revert(changes, Recording(files, journal), session.cwd)
        finally:
            journal.end_turn()
        for turn in turns:
            journal.mark_undone(turn)
        session.save()
    done = [o for o in outcomes if o.reverted]
    left = [o for o in outcomes if not o.reverted]
    insertions, deletions = _counts(done)
    result: dict[str, Any] = {
        "canRewind": bool(done),
        "filesChanged": [os.path.join(session.cwd, o.path) for o in done],
        "insertions": insertions,
        "deletions": deletions,
    }
    if left:
        result["error"] = " ".join(o.note for o in left)
        result["_meta"] = {"heron": {"left": [{"path": o.path, "reason": o.note} for o in left]}}
    return result


def _counts(outcomes: list[Outcome]) -> tuple[int, int]:
    """Lines added and removed by the restore (of the text files it writes)."""
    added = removed = 0
    for outcome in outcomes:
        if outcome.diff is None:
            continue
        old = (outcome.diff.old_text or "").splitlines()
        new = outcome.diff.new_text.splitlines()
        for line in difflib.unified_diff(old, new, lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
    return added, removed


def _session_id(params: dict[str, Any]) -> str:
    session_id = params.get("sessionId")
    if not isinstance(session_id, str) or not session_id.strip():
        raise RpcError(INVALID_PARAMS, "sessionId must be a non-empty string")
    return session_id


def _point(value: Any, name: str) -> dict[str, Any]:
    """A history point as claude-agent-acp's clients send it: `messageId` (required), and a
    `messageFingerprint` (SHA-256 of the message's text) and `messageOccurrence` checked when
    given."""
    if not isinstance(value, dict):
        raise RpcError(INVALID_PARAMS, f"{name} must be an object")
    message_id = value.get("messageId")
    if not isinstance(message_id, str) or not message_id.strip():
        raise RpcError(INVALID_PARAMS, f"{name}.messageId must be a non-empty string")
    fingerprint = value.get("messageFingerprint")
    if fingerprint is not None and (
        not isinstance(fingerprint, str) or not FINGERPRINT.fullmatch(fingerprint)
    ):
        raise RpcError(INVALID_PARAMS, f"{name}.messageFingerprint must be a SHA-256 fingerprint")
    occurrence = value.get("messageOccurrence")
    if occurrence is not None and (type(occurrence) is not int or occurrence < 1):
        raise RpcError(INVALID_PARAMS, f"{name}.messageOccurrence must be positive")
    return value


def _target(entries: list[dict[str, Any]], session_id: str, point: dict[str, Any]) -> int:
    """Where the user message `point` names starts in the transcript."""
    ident = point["messageId"]
    found = next((m for m in user_messages(entries) if m.message_id == ident), None)
    if found is None:
        raise RpcError(
            INVALID_PARAMS,
            f"Rewind message {ident} was not found in session {session_id}",
            {"messageId": ident},
        )
    fingerprint = point.get("messageFingerprint")
    if fingerprint is not None and fingerprint != _fingerprint(found.text):
        raise RpcError(INVALID_PARAMS, "Message fingerprint does not match the selected message")
    return found.index


def _check_resume(entries: list[dict[str, Any]], index: int, point: dict[str, Any]) -> None:
    """`resumeAtMessage` must be an answer of the agent between the message before and this."""
    span = message_span(entries, point["messageId"])
    earlier = [m for m in user_messages(entries) if m.index < index]
    start = earlier[-1].index if earlier else -1
    if span is None or span[0] == "user_message_chunk" or not start < span[1] < index:
        raise RpcError(
            INVALID_PARAMS,
            "resumeAtMessage is not the assistant message immediately preceding beforeMessage",
        )


def _fingerprint(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
