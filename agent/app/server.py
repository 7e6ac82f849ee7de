"""The ACP methods Heron answers, all in one table (`Server.__init__`), and the live sessions.

Nothing on the way to the `session/new` answer imports pydantic, the ACP models or the model
client: `agent.acp.params` reads the params of `initialize` and `session/new`, and once a
session exists the rest is imported in the background (`start_warming`), before the first
prompt needs it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio

from agent.acp.handshake import SETUP_METHOD_ID, initialize_result, offers_terminal_auth
from agent.acp.ids import uuid4
from agent.acp.params import (
    ClientCapabilities,
    certain_session_id,
    read_initialize,
    read_new_session,
    read_prompt_blocks,
)
from agent.acp.params import parse as _parse
from agent.acp.wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    Connection,
    Handler,
    RpcError,
)
from agent.app.options import OptionMethods
from agent.app.rewind import RewindMethods
from agent.app.sessions import SessionStore, apply_run_trust, run_mode, user_present
from agent.app.steering import SteeringMethod
from agent.commands import announce_after_answer
from agent.errors import TurnFailed
from agent.options.apply import opened
from agent.session import Session

if TYPE_CHECKING:
    from agent.acp.protocol import StopReason
    from agent.config import Settings

log = logging.getLogger("heron.server")


AUTH_REQUIRED = -32000
NEEDS_SETUP = (
    "Heron has no model configured. Use “Set up a model” to choose an endpoint and a model "
    "(it runs `heron setup`), or set OPENAI_API_KEY / OPENAI_BASE_URL and HERON_MODEL in the "
    "`env` of Heron's entry in your editor's agent settings."
)


class Server:
    def __init__(
        self,
        settings: Settings,
        connection: Connection,
        reload: Callable[[], Settings] | None = None,
    ) -> None:
        self.settings = settings
        self.connection = connection
        self.reload = reload  # re-reads flags, environment and config file
        self.client_capabilities = ClientCapabilities()
        self.terminal_auth = False  # the setup method was offered to this client
        # The API key a `logout` removed: never used again in this process, wherever it comes
        # from (the environment keeps it), until the user logs in again (`authenticate`).
        self.forgotten_key: str | None = None
        self.sessions: dict[str, Session] = {}
        self.initialized = False
        self.model_ready: anyio.Event | None = None  # see start_warming()
        self.store = SessionStore(
            settings, self.sessions, self._open_session, _parse, _check_cwd, check_directories
        )
        options = OptionMethods(self._session, _parse)
        rewinds = RewindMethods(self.sessions)
        # Every ACP method Heron answers, in one place.
        methods: dict[str, Handler] = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "logout": self.logout,
            "session/new": self.new_session,
            "session/load": self.store.load,
            "session/fork": self.store.fork,
            "session/resume": self.store.resume,
            "session/list": self.store.list,
            "session/close": self.store.close,
            "session/delete": self.store.delete,
            "session/prompt": self.prompt,
            "session/cancel": self.cancel,
            "session/set_config_option": options.set_config_option,
            "session/set_mode": options.set_mode,
            "_session/steering": SteeringMethod(self._session).steer,
            "_session/rewind": rewinds.rewind,
            "_session/rewind_files": rewinds.rewind_files,
        }
        for method, handler in methods.items():
            connection.register(method, handler)

    def remember_client(self, params: dict[str, Any]) -> None:
        parsed = read_initialize(params)
        self.client_capabilities = parsed.client_capabilities
        self.terminal_auth = offers_terminal_auth(params)
        self.initialized = True
        if parsed.client_info:
            log.info("client: %s %s", parsed.client_info.name, parsed.client_info.version)

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.remember_client(params)
        return initialize_result(self.terminal_auth)

    async def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        """The editor's terminal login (`heron setup`) finished: take its settings now."""
        if params.get("methodId") != SETUP_METHOD_ID:
            raise RpcError(INVALID_PARAMS, f"unknown auth method: {params.get('methodId')!r}")
        self.forgotten_key = None
        self.reload_settings()
        if not self.settings.llm_configured and not self.settings.problem:
            raise RpcError(AUTH_REQUIRED, NEEDS_SETUP)
        return {}

    async def logout(self, params: dict[str, Any]) -> dict[str, Any]:
        """ACP `logout`: remove the API key `heron setup` stored (the config file's `api_key`;
        its other settings stay) and use the key in use no more. The next `session/new` asks
        to log in where the endpoint needs a key, or goes on without one."""
        from agent.config import ConfigError, config_path, remove_config_keys

        self._require_initialized()
        stored = self.settings.config_file
        path = Path(stored) if stored else config_path()
        try:
            await anyio.to_thread.run_sync(remove_config_keys, path, ("api_key",))
        except (ConfigError, OSError) as exc:
            raise RpcError(INTERNAL_ERROR, f"cannot log out: {exc}") from exc
        if self.settings.api_key:
            self.forgotten_key = self.settings.api_key
        self.reload_settings()
        log.info("logged out: the API key is removed")
        return {}

    def reload_settings(self) -> None:
        """Re-read the settings in place, so sessions that exist already see them too."""
        fresh = self.reload() if self.reload is not None else self.settings
        if fresh.api_key is not None and fresh.api_key == self.forgotten_key:
            fresh.api_key = None
        for name, value in vars(fresh).items():
            setattr(self.settings, name, value)

    def start_warming(self) -> None:
        """Prepare the first prompt in the background, once (`agent.app.warmup`: the ACP models,
        the turn and the tools, the model client).

        Started by the first session (editors send `session/new` right after `initialize`),
        not by `initialize` itself: a process that is only probed, or told to exit at once, is
        not slowed down by work competing for the GIL. The first prompt waits for it in a
        cancellable way (`Session.model_ready`), so a `session/cancel` sent right after it is
        answered at once.
        """
        if self.model_ready is not None or not self.settings.llm_configured:
            return
        ready = self.model_ready = anyio.Event()
        # A copy: the client is kept for the settings it was made with, even if they are
        # reloaded meanwhile (then the first prompt makes another).
        settings = dataclasses.replace(self.settings)

        async def warm() -> None:
            from agent.app import warmup

            started = anyio.current_time()
            try:
                client = await anyio.to_thread.run_sync(
                    warmup.prepare, settings, abandon_on_cancel=True
                )
                from agent.llm import keep_client

                keep_client(settings, client)
                log.info(
                    "ready for the first prompt in %.0f ms", 1000 * (anyio.current_time() - started)
                )
            except Exception:  # the first prompt will meet (and report) the same problem
                log.exception("warming the model client failed")
            finally:
                ready.set()

        self.connection.start_soon(warm)

    def _require_initialized(self) -> None:
        # ACP: the client MUST call initialize first. Until it has, Heron knows neither the
        # protocol version nor the client's capabilities, so it does nothing it could get wrong.
        if not self.initialized:
            raise RpcError(INVALID_REQUEST, "Invalid Request: call initialize first")

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require_initialized()
        parsed = read_new_session(params)
        if self.terminal_auth and not self.settings.llm_configured:
            self.reload_settings()  # setup may have run since, without an `authenticate`
            if not self.settings.llm_configured and not self.settings.problem:
                # The editor shows its login button for this error: it runs `heron setup`.
                raise RpcError(AUTH_REQUIRED, NEEDS_SETUP)
        cwd = _check_cwd(parsed.cwd)
        directories = check_directories(parsed.additional_directories)
        session_id = f"sess_{uuid4().replace('-', '')}"
        session = self._open_session(session_id, cwd, parsed.mcp_servers)
        session.additional_directories = directories
        if mode := run_mode(params):
            session.mode = mode  # for this run only (heron exec); saved: the default
        session.user_present = user_present(params)
        apply_run_trust(session, params)
        self.store.attach(session, new=True)  # stored once the answer is out
        announce_after_answer(session)  # the slash commands
        log.info("session %s in %s (%s)", session_id, cwd, session.trust.status)
        answer = {"sessionId": session_id, **opened(session), "_meta": session.trust.meta()}
        session.hold_until_answered()  # updates about it follow the answer (Session.notify)
        return answer

    def _open_session(
        self, session_id: str, cwd: Path, mcp_servers: list[dict[str, Any]]
    ) -> Session:
        session = Session(
            session_id=session_id,
            cwd=cwd,
            settings=self.settings,
            connection=self.connection,
            client_capabilities=self.client_capabilities,
            mcp_servers=mcp_servers,
        )
        self.start_warming()
        session.model_ready = self.model_ready
        self.connection.start_soon(self._learn_window, session)
        self.sessions[session_id] = session
        return session

    async def _learn_window(self, session: Session) -> None:
        """Ask the server for its context size in the background, once the warm-up has made
        the model client (and imported what this needs: not on the session/new path)."""
        if session.model_ready is None:
            return
        await session.model_ready.wait()
        from agent.context.usage import learn

        learn(session.settings, self.connection.start_soon)

    async def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        self._require_initialized()
        session_id = certain_session_id(params, "prompt")
        if session_id is not None:
            # Params that cannot fail validation: the blocks are validated once the warm-up
            # has imported the ACP models (`Session.prompt`). Importing them here would stop
            # the event loop, and a cancel sent right after this prompt, meanwhile.
            session = self._session(session_id)
            read_blocks = partial(read_prompt_blocks, params)
        else:
            from agent.acp.protocol import PromptParams

            parsed = _parse(PromptParams, params)
            session = self._session(parsed.session_id)
            read_blocks = partial(getattr, parsed, "prompt")
        if self.settings.problem:
            self.reload_settings()  # the user may have fixed the file since

        async def turn(scope: anyio.CancelScope) -> StopReason:
            # Imported only now, after the warm-up (Session.model_ready) has imported it:
            # importing it earlier would stop the event loop, and a cancel, for as long.
            from agent.app.prompt import run_prompt

            try:
                return await run_prompt(session, scope, read_blocks())
            except TurnFailed as exc:  # the one place a turn's failure becomes an answer
                raise RpcError(INTERNAL_ERROR, str(exc)) from exc

        stop_reason = await session.run_turn(turn)
        return {"stopReason": stop_reason}

    async def cancel(self, params: dict[str, Any]) -> None:
        session_id = certain_session_id(params)
        if session_id is None:
            from agent.acp.protocol import SessionIdParams

            try:
                session_id = _parse(SessionIdParams, params).session_id
            except RpcError:
                return  # a notification gets no answer, not even an error
        if session := self.sessions.get(session_id):
            session.cancel()

    def cancel_all(self) -> None:
        for session in self.sessions.values():
            session.cancel()

    def _session(self, session_id: str) -> Session:
        """The live session a request is about (a prompt, a pick): what waited since its load
        or resume answer goes out now, before this request's own updates (`Session.notify`)."""
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError(INVALID_PARAMS, f"unknown session: {session_id}")
        session.release_updates()
        return session


def _check_cwd(cwd: str, what: str = "cwd") -> Path:
    path = Path(cwd)
    if not path.is_absolute():
        raise RpcError(INVALID_PARAMS, f"{what} must be an absolute path, got {cwd!r}")
    try:
        is_dir = path.is_dir()  # False for a NUL byte; raises for a name too long, EACCES
    except OSError as exc:
        raise RpcError(INVALID_PARAMS, f"{what} cannot be used: {exc.strerror}") from exc
    if not is_dir:
        raise RpcError(INVALID_PARAMS, f"{what} is not an existing directory: {cwd}")
    return Path(os.path.normpath(path))


def check_directories(directories: list[str]) -> list[Path]:
    """`additionalDirectories`: each checked as the cwd is (one bad entry fails the request,
    rather than leave the user believing a folder is in the workspace), duplicates dropped."""
    checked: list[Path] = []
    for index, directory in enumerate(directories):
        path = _check_cwd(directory, f"additionalDirectories[{index}]")
        if path not in checked:
            checked.append(path)
    return checked


def setup_logging(settings: Settings) -> None:
    level = getattr(logging, settings.log_level.upper(), logging.WARNING)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    problem = None
    if settings.log_file:
        try:
            handlers.append(logging.FileHandler(settings.log_file, encoding="utf-8"))
        except OSError as exc:
            # initialize may already be answered: a bad log path must not end Heron.
            problem = f"cannot open log file {settings.log_file} ({exc}); logging to stderr only"
    logging.basicConfig(
        level=min(level, logging.DEBUG if len(handlers) > 1 else level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )
    handlers[0].setLevel(level)
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "openai"):
        logging.getLogger(noisy).setLevel(max(level, logging.INFO))
    if problem:
        log.warning(problem)


def run_server(
    settings: Settings,
    stdin: BinaryIO,
    stdout: BinaryIO,
    pending: list[bytes],
    initialize_params: dict[str, Any] | None,
    at_eof: bool = False,
    reload: Callable[[], Settings] | None = None,
) -> int:
    setup_logging(settings)

    async def main() -> None:
        connection = Connection(stdin, stdout)
        server = Server(settings, connection, reload)
        if initialize_params is not None:
            try:
                server.remember_client(initialize_params)
            except RpcError:
                log.warning(
                    "initialize params were not understood; assuming no client capabilities"
                )
            server.initialized = True  # the client has its answer either way
        await connection.serve(pending, at_eof=at_eof, on_eof=server.cancel_all)
        await server.store.flush()  # the last steps reach the disk before the process exits
        if zygotes := sys.modules.get("agent.sandbox.zygote"):  # loaded if a command ran
            await zygotes.stop_all()

    anyio.run(main)
    return 0
