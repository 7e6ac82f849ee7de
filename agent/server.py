"""The ACP methods Heron answers: initialize and session/* → sessions."""

from __future__ import annotations

import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any, BinaryIO

import anyio
from pydantic import BaseModel, ValidationError

from agent.config import Settings
from agent.handshake import initialize_result
from agent.protocol import (
    ClientCapabilities,
    InitializeParams,
    NewSessionParams,
    NewSessionResult,
    PromptParams,
    SessionIdParams,
)
from agent.session import Session
from agent.store.methods import SessionStore
from agent.wire import INVALID_PARAMS, Connection, RpcError

log = logging.getLogger("heron.server")

ModelT = Any


class Server:
    def __init__(self, settings: Settings, connection: Connection) -> None:
        self.settings = settings
        self.connection = connection
        self.client_capabilities = ClientCapabilities()
        self.sessions: dict[str, Session] = {}
        connection.register("initialize", self.initialize)
        connection.register("session/new", self.new_session)
        connection.register("session/prompt", self.prompt)
        connection.register("session/cancel", self.cancel)
        self.store = SessionStore(settings, self.sessions, self._open_session, _parse, _check_cwd)
        self.store.register(connection)

    def remember_client(self, params: dict[str, Any]) -> None:
        parsed = _parse(InitializeParams, params)
        self.client_capabilities = parsed.client_capabilities
        if parsed.client_info:
            log.info("client: %s %s", parsed.client_info.name, parsed.client_info.version)

    async def initialize(self, **params: Any) -> dict[str, Any]:
        self.remember_client(params)
        return initialize_result()

    async def new_session(self, **params: Any) -> dict[str, Any]:
        parsed = _parse(NewSessionParams, params)
        cwd = _check_cwd(parsed.cwd)
        session_id = f"sess_{uuid.uuid4().hex}"
        session = self._open_session(session_id, cwd, parsed.mcp_servers)
        session.additional_directories = [Path(d) for d in parsed.additional_directories]
        self.store.attach(session)
        log.info("session %s in %s", session_id, cwd)
        return NewSessionResult(session_id=session_id).dump()

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
        self.sessions[session_id] = session
        return session

    async def prompt(self, **params: Any) -> dict[str, Any]:
        parsed = _parse(PromptParams, params)
        session = self._session(parsed.session_id)
        stop_reason = await session.prompt(parsed.prompt)
        return {"stopReason": stop_reason}

    async def cancel(self, **params: Any) -> None:
        try:
            parsed = _parse(SessionIdParams, params)
        except RpcError:
            return  # a notification gets no answer, not even an error
        if session := self.sessions.get(parsed.session_id):
            session.cancel()

    def cancel_all(self) -> None:
        for session in self.sessions.values():
            session.cancel()

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError(INVALID_PARAMS, f"unknown session: {session_id}")
        return session


def _check_cwd(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute():
        raise RpcError(INVALID_PARAMS, f"cwd must be an absolute path, got {cwd!r}")
    if not path.is_dir():
        raise RpcError(INVALID_PARAMS, f"cwd is not an existing directory: {cwd}")
    return Path(os.path.normpath(path))


def _parse(model: type[BaseModel], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'params'}: {e['msg']}" for e in exc.errors()
        )
        raise RpcError(INVALID_PARAMS, f"Invalid params: {problems}") from exc


def setup_logging(settings: Settings) -> None:
    level = getattr(logging, settings.log_level.upper(), logging.WARNING)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if settings.log_file:
        handlers.append(logging.FileHandler(settings.log_file, encoding="utf-8"))
    logging.basicConfig(
        level=min(level, logging.DEBUG if settings.log_file else level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
    )
    handlers[0].setLevel(level)
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "openai"):
        logging.getLogger(noisy).setLevel(max(level, logging.INFO))


def run_server(
    settings: Settings,
    stdin: BinaryIO,
    stdout: BinaryIO,
    pending: list[bytes],
    initialize_params: dict[str, Any] | None,
    at_eof: bool = False,
) -> int:
    setup_logging(settings)

    async def main() -> None:
        connection = Connection(stdin, stdout)
        server = Server(settings, connection)
        if initialize_params is not None:
            try:
                server.remember_client(initialize_params)
            except RpcError:
                log.warning(
                    "initialize params were not understood; assuming no client capabilities"
                )
        await connection.serve(pending, at_eof=at_eof, on_eof=server.cancel_all)
        await server.store.flush()  # the last steps reach the disk before the process exits

    anyio.run(main)
    return 0
