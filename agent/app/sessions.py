"""session/load, session/resume, session/list, session/close and session/delete.

The store itself is made on first use (the row of a new session, written once the
`session/new` answer is out, or one of these methods), so neither `initialize` nor
`session/new` waits for SQLite.
"""

from __future__ import annotations

import copy
import datetime
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agent.acp.ids import uuid4
from agent.acp.wire import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from agent.commands import announce_after_answer, announce_now
from agent.config import MODES
from agent.context.history import answer_dangling_calls
from agent.files.workspace import project_folder
from agent.options.apply import opened
from agent.rewind.marks import cut_at_message
from agent.store.replay import INTERRUPTED, replay_updates
from agent.store.saver import Saver, title_update
from agent.store.store import LogFailure, Store, data_dir

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.session import Session
    from agent.store.db import SessionRow, StoredSession

log = logging.getLogger("heron.store")

PAGE_SIZE = 50
METER_WAIT = 0.5  # seconds a load or resume waits for the model's context window
# A session never prompted is forgotten this long after it was opened (see README).
UNPROMPTED_KEPT_DAYS = 7


# (session id, cwd, mcp servers) → a new live Session registered with the server
SessionFactory = Callable[[str, Path, list[dict[str, Any]]], "Session"]


class SessionStore:
    """The store-backed session methods; `sessions` is the server's live-session table."""

    def __init__(
        self,
        settings: Settings,
        sessions: dict[str, Session],
        make_session: SessionFactory,
        parse: Callable[[type[Any], dict[str, Any]], Any],
        check_cwd: Callable[[str], Path],
        check_directories: Callable[[list[str]], list[Path]],
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.make_session = make_session
        self.parse = parse
        self.check_cwd = check_cwd
        self.check_directories = check_directories
        self._store: Store | None = None
        self._pruned = False

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(data_dir(self.settings) / "sessions.db")
        return self._store

    def attach(self, session: Session, new: bool = False) -> Saver:
        """Give a session its saver; a `new` one gets its row once the answer is out."""
        saver = Saver(self.store)
        session.saver = saver
        if new:
            session.connection.after_answer(lambda: self._create(session, saver))
        return saver

    def _create(self, session: Session, saver: Saver) -> None:
        if not self._pruned:  # once a process, with the first row it writes
            self._pruned = True
            self.store.write(_prune_unprompted)
        saver.create(session.stored_parts())

    async def flush(self) -> None:
        if self._store is not None:
            await self._store.flush()

    # -- methods -------------------------------------------------------------------------------

    async def load(self, params: dict[str, Any]) -> dict[str, Any]:
        session, stored = await self._restore(params)
        client = session.client_capabilities
        shown = replay_updates(stored.transcript, client.session_notices, client.session_compaction)
        for update in shown:
            session.notify(update)
        return await _answer_restored(session)

    async def resume(self, params: dict[str, Any]) -> dict[str, Any]:
        session, _ = await self._restore(params)
        return await _answer_restored(session)

    async def fork(self, params: dict[str, Any]) -> dict[str, Any]:
        """`session/fork`: a new session with its own id, the same mode and picks, and a copy
        of the source's history and transcript: all of it, or up to a message
        (`_meta.heron.messageId`, or `messageId`): before a user message, through an answer
        and its step's tool calls. Stored, listed and loadable like any other; the source is
        not touched, and files are not copied (its undo journal starts empty)."""
        from agent.store.params import LoadSessionParams

        parsed = self.parse(LoadSessionParams, params)
        cwd = self.check_cwd(parsed.cwd)
        directories = self.check_directories(parsed.additional_directories)
        source = self.sessions.get(parsed.session_id)
        mode: str | None
        if source is not None:
            history, transcript = source.history, source.transcript.entries
            title, mode, options = source.title, source.saved_mode, source.choices.saved()
            trust = (source.trust.folder, source.trust.saved(), source.trust.git_changes)
            first_day: str | None = source.started_on
        else:
            session_id = parsed.session_id

            def query(conn: Any) -> StoredSession | None:
                from agent.store import db

                return db.load_session(conn, session_id)

            stored = _readable(await self._read(query), session_id, self.store.failure)
            history, transcript = stored.history, stored.transcript
            title, mode, options = stored.row.title, stored.row.mode, stored.row.options
            trust = (project_folder(Path(stored.row.cwd)), stored.row.trust, [])
            first_day = local_date(stored.row.created_at)
        if (message := fork_message(params)) is not None:
            cut = cut_at_message(transcript, message)
            if isinstance(cut, str) or cut is None:
                why = "there is no such message" if cut else "it has no place to fork from yet"
                raise RpcError(INVALID_PARAMS, f"cannot fork at message {message}: {why}")
            history, transcript = history[: cut.history], transcript[: cut.transcript]
        session = self.make_session(f"sess_{uuid4().replace('-', '')}", cwd, parsed.mcp_servers)
        session.additional_directories = directories
        copied = copy.deepcopy((history, transcript))
        session.history = answer_dangling_calls(copied[0], lambda _call_id: INTERRUPTED)
        session.transcript.replace(copied[1])
        session.title = title
        session.started_on = first_day or session.started_on  # the same prompt: a cache serves it
        if mode:
            session.mode = session.saved_mode = mode
        session.choices.restore(options)
        folder, decided, git_changes = trust
        if folder == session.trust.folder:  # the same project: its answer, its pending guard
            session.trust.restore(decided)
            session.trust.git_changes = list(git_changes)
        for update in copied[1]:
            if update.get("sessionUpdate") == "tool_call" and update.get("toolCallId"):
                session.new_call_id(update["toolCallId"])
        if run := run_mode(params):
            session.mode = run
        session.user_present = user_present(params)
        apply_run_trust(session, params)
        self.attach(session, new=True)  # stored, whole, once the answer is out
        announce_after_answer(session)
        log.info("session %s forked from %s", session.id, parsed.session_id)
        answer = {"sessionId": session.id, **opened(session), "_meta": session.trust.meta()}
        session.hold_until_answered()  # what follows goes out after the answer
        if title:
            session.notify(title_update(title))
        return answer

    async def list(self, params: dict[str, Any]) -> dict[str, Any]:
        from agent.store.params import ListSessionsParams

        parsed = self.parse(ListSessionsParams, params)
        after = _decode_cursor(parsed.cursor) if parsed.cursor else None
        cwd = None
        if parsed.cwd:
            if not Path(parsed.cwd).is_absolute():
                raise RpcError(INVALID_PARAMS, f"cwd must be an absolute path, got {parsed.cwd!r}")
            cwd = os.path.normpath(parsed.cwd)

        def query(conn: Any) -> list[SessionRow]:
            from agent.store import db

            return db.list_sessions(conn, cwd, after, PAGE_SIZE + 1)

        rows = await self._read(query) or []
        result: dict[str, Any] = {"sessions": [row.info() for row in rows[:PAGE_SIZE]]}
        if len(rows) > PAGE_SIZE:
            last = rows[PAGE_SIZE - 1]
            result["nextCursor"] = _encode_cursor(last.updated_at, last.id)
        return result

    async def close(self, params: dict[str, Any]) -> dict[str, Any]:
        from agent.store.params import SessionIdOnly

        parsed = self.parse(SessionIdOnly, params)
        # Unknown or already closed: nothing to free, and the editor's intent is met.
        session = self.sessions.pop(parsed.session_id, None)
        if session is not None:
            await _end(session)
        return {}

    async def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        from agent.store.params import SessionIdOnly

        parsed = self.parse(SessionIdOnly, params)
        session = self.sessions.pop(parsed.session_id, None)
        if session is not None:
            await _end(session)
            if session.saver is not None:
                session.saver.deleted = True  # a late step must not bring it back

        session_id = parsed.session_id

        def delete(conn: Any) -> None:
            from agent.store import db

            db.delete_session(conn, session_id)

        outcome = _Outcome()
        self.store.write(delete, outcome)
        await self.store.flush()
        if outcome.reason is not None:
            raise RpcError(INTERNAL_ERROR, f"the session could not be deleted: {outcome.reason}")
        return {}

    # -- helpers -------------------------------------------------------------------------------

    async def _restore(self, params: dict[str, Any]) -> tuple[Session, StoredSession]:
        from agent.store.params import LoadSessionParams

        parsed = self.parse(LoadSessionParams, params)
        cwd = self.check_cwd(parsed.cwd)
        directories = self.check_directories(parsed.additional_directories)
        session_id = parsed.session_id

        def query(conn: Any) -> StoredSession | None:
            from agent.store import db

            return db.load_session(conn, session_id)

        # A restore that fails changes nothing: the session live here, if any, stays live
        # until the stored one is known to be readable.
        stored = _readable(await self._read(query), session_id, self.store.failure)
        live = self.sessions.pop(session_id, None)
        if live is not None:
            await _end(live)  # its last steps are queued before the read below
            stored = _readable(await self._read(query), session_id, None)
        session = self.make_session(session_id, cwd, parsed.mcp_servers)
        session.additional_directories = directories
        _put_back(session, stored, self.attach(session))
        if mode := run_mode(params):
            session.mode = mode  # for this run only: the saved mode stays the stored one
        session.user_present = user_present(params)
        apply_run_trust(session, params)
        if [str(d) for d in directories] != stored.row.additional_dirs:
            session.save()  # the request's list is the session's now (session/list shows it)
        log.info("session %s restored (%d messages)", session_id, len(stored.history))
        return session, stored

    async def _read(self, job: Callable[[Any], Any]) -> Any:
        try:
            return await self.store.read(job)
        except Exception as exc:  # a broken file must not break the connection
            raise RpcError(INVALID_PARAMS, f"the session store cannot be read: {exc}") from exc


async def _answer_restored(session: Session) -> dict[str, Any]:
    """The answer to a load or resume, after everything Heron tells by itself about the
    session: the client knows the session, so its state comes with it (the command list,
    the title, how full the context is), and after the answer only what a prompt causes
    (`Session.notify`). The options and mode are in the answer itself."""
    answer = {**opened(session), "_meta": session.trust.meta()}
    await announce_now(session)  # the slash commands (a bounded scan of the command folders)
    if session.title:
        session.notify(title_update(session.title))
    if session.settings.llm_configured:
        session.notify(await _context_meter(session))
    session.hold_updates()
    return answer


async def _context_meter(session: Session) -> dict[str, Any]:
    """`usage_update` for a restored session: what its next request will carry (the system
    prompt and the tools' definitions with the history, as after /compact) in the window.

    The window comes from the server's model list when it answers within METER_WAIT (the
    first time in a process the model client is still being imported, and a local server
    may be down): else from the table, and the next prompt's update has the server's."""
    # Here, not at the top: the store's methods are imported before `session/new`.
    from agent.context.usage import context_size, known_window

    settings = session.settings
    asked: list[int] = []
    answered = anyio.Event()

    async def ask() -> None:
        asked.append(await context_size(settings))  # bounded itself; asked once per model
        answered.set()

    session.connection.start_soon(ask)
    used = await session.next_request_tokens()  # while the server is asked
    with anyio.move_on_after(METER_WAIT):
        await answered.wait()
    size = asked[0] if asked else settings.context_window or known_window(settings.model)
    return {"sessionUpdate": "usage_update", "used": used, "size": size}


def _readable(stored: StoredSession | None, session_id: str, failure: str | None) -> StoredSession:
    """The stored session, if there is one and its conversation has the shape a restore needs."""
    if stored is None:
        why = f" ({failure})" if failure else ""
        raise RpcError(INVALID_PARAMS, f"unknown session: {session_id}{why}")
    shapes = (("role", stored.history), ("sessionUpdate", stored.transcript))
    for key, entries in shapes:
        if not all(isinstance(entry, dict) and key in entry for entry in entries):
            raise RpcError(
                INVALID_PARAMS, f"the session store cannot be read: {session_id} is damaged"
            )
    return stored


class _Outcome(LogFailure):
    """A write's failure, for the answer."""

    reason: str | None = None

    def failed(self, reason: str) -> None:
        super().failed(reason)
        self.reason = reason


def _prune_unprompted(conn: Any) -> None:
    import datetime

    from agent.store import db

    before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=UNPROMPTED_KEPT_DAYS)
    db.prune_unprompted(conn, before.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _put_back(session: Session, stored: StoredSession, saver: Saver) -> None:
    """Put a stored conversation back into a fresh session."""
    # A history cut mid-turn (a killed process) may have calls without results.
    session.history = answer_dangling_calls(stored.history, lambda _call_id: INTERRUPTED)
    session.transcript.replace(stored.transcript)
    session.title = stored.row.title
    session.undo.restore(stored.undo)
    if stored.row.mode:
        session.mode = session.saved_mode = stored.row.mode
    session.choices.restore(stored.row.options)
    session.trust.restore(stored.row.trust)
    # The system prompt holds the session's first day: the same again after a load, so a
    # server's prompt cache still serves the conversation.
    session.started_on = local_date(stored.row.created_at) or session.started_on
    for update in stored.transcript:
        if update.get("sessionUpdate") == "tool_call" and update.get("toolCallId"):
            session.new_call_id(update["toolCallId"])  # new calls must not reuse these ids
    saver.restored(stored, session.history)


async def _end(session: Session) -> None:
    """Cancel its turn, stop its MCP servers, and wait until the turn has answered and saved
    its last step."""
    await session.aclose()
    await session.wait_idle()


def local_date(stamp: str) -> str | None:
    """The local calendar day of a stored UTC time (`agent.store.saver.now`), if readable."""
    try:
        moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return moment.astimezone().date().isoformat()


def fork_message(params: dict[str, Any]) -> str | None:
    """The message a `session/fork` asks to fork at: `_meta.heron.messageId`, or a top-level
    `messageId` (ACP's fork has none yet)."""
    meta = params.get("_meta")
    heron = meta.get("heron") if isinstance(meta, dict) else None
    found = heron.get("messageId") if isinstance(heron, dict) else params.get("messageId")
    if found is not None and (not isinstance(found, str) or not found):
        raise RpcError(INVALID_PARAMS, f"a fork's messageId must be a message id, got {found!r}")
    return found


def user_present(params: dict[str, Any]) -> bool:
    """`_meta.heron.askUser: false`: nobody can answer the model's questions in this run
    (`heron exec`), so `ask_user` tells the model to decide by itself."""
    meta = params.get("_meta")
    heron = meta.get("heron") if isinstance(meta, dict) else None
    return not (isinstance(heron, dict) and heron.get("askUser") is False)


def run_mode(params: dict[str, Any]) -> str | None:
    """`_meta.heron.mode`: the mode a client wants this run of the session in (`heron exec`:
    its --mode or --yes), for this process only: the session keeps the mode it is saved with
    (the one it had before, or the default), so a one-shot `--yes` never lets a later editor
    reopen it in full access. The client answers every permission question anyway, so this
    grants it nothing it could not do already."""
    meta = params.get("_meta")
    heron = meta.get("heron") if isinstance(meta, dict) else None
    mode = heron.get("mode") if isinstance(heron, dict) else None
    return mode if mode in MODES else None


def apply_run_trust(session: Session, params: dict[str, Any]) -> None:
    """`_meta.heron.trust`: `heron exec` says whether this run trusts the folder (`--trust`:
    true, for this process only, never saved) or that nobody is there to be asked (false: the
    remembered decision counts, an undecided folder stays inert without a question). Like the
    mode, it grants nothing the client could not get by answering the question itself."""
    meta = params.get("_meta")
    heron = meta.get("heron") if isinstance(meta, dict) else None
    trust = heron.get("trust") if isinstance(heron, dict) else None
    if trust is True:
        session.trust.run = True
    elif trust is False:
        session.trust.ask = False


def _encode_cursor(updated_at: str, session_id: str) -> str:
    import base64  # here, not at the top: this module is imported before `session/new`

    return base64.urlsafe_b64encode(f"{updated_at}\n{session_id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[str, str]:
    import base64
    import binascii

    try:
        updated_at, session_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("\n")
    except (ValueError, binascii.Error, UnicodeError) as exc:
        raise RpcError(INVALID_PARAMS, f"invalid cursor: {cursor!r}") from exc
    return updated_at, session_id
