"""A test ACP client that drives the real agent executable over pipes, like an editor.

Everything the agent writes to stdout is parsed and validated against the ACP
schema (see ``acp_schema``) plus a few behavioural rules editors rely on
(``shared/ACP-NOTES.md``); anything wrong lands in ``violations`` and
``assert_clean()`` turns that into a test failure. Requests from the agent are
answered by ``handlers``: built-in permission, file-system and terminal hosts
that behave like an editor, each replaceable per test.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from acp_schema import validate_agent_message, validate_client_payload

__all__ = ["DEFAULT_CAPABILITIES", "AcpClient", "AgentRequest", "Pending", "RpcError"]

DEFAULT_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
}

# Updates that belong to a prompt turn (or a session/load replay); ACP forbids them after the
# turn's response. The others (commands, modes, config, usage...) may come at any time.
_TURN_UPDATES = {
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
}
_TURN_METHODS = {"session/prompt", "session/load"}
# Message chunks: Heron gives every one the `messageId` of its message.
_CHUNKS = {"user_message_chunk", "agent_message_chunk", "agent_thought_chunk"}

# The client capability an agent must have seen advertised before calling a method.
_NEEDS_CAPABILITY = {
    "fs/read_text_file": ("fs", "readTextFile"),
    "fs/write_text_file": ("fs", "writeTextFile"),
    **{
        f"terminal/{m}": ("terminal",)
        for m in ("create", "output", "wait_for_exit", "kill", "release")
    },
    "elicitation/create": ("elicitation", "form"),
}

# Built-in handlers' answers are checked too: a harness bug must not pass for an agent bug.
_BUILTIN_RESPONSE_DEFS = {
    "session/request_permission": "RequestPermissionResponse",
    "fs/read_text_file": "ReadTextFileResponse",
    "fs/write_text_file": "WriteTextFileResponse",
    "terminal/create": "CreateTerminalResponse",
    "terminal/output": "TerminalOutputResponse",
    "terminal/wait_for_exit": "WaitForTerminalExitResponse",
    "terminal/kill": "KillTerminalResponse",
    "terminal/release": "ReleaseTerminalResponse",
}

Permission = str | Callable[[dict[str, Any]], dict[str, Any]]


class RpcError(Exception):
    """A JSON-RPC error: raised for error responses, and raised by handlers to answer one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"[{code}] {message}" + ("" if data is None else f" data={data!r}"))
        self.code, self.message, self.data = code, message, data


class AgentRequest(NamedTuple):
    method: str
    params: Any
    id: Any


@dataclass
class _Sent:
    method: str
    params: Any
    session_id: str | None


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class Pending:
    """A request sent to the agent, waiting for its response."""

    def __init__(self, client: AcpClient, rid: int, method: str, params: Any) -> None:
        self.client, self.id, self.method, self.params = client, rid, method, params
        self.response: dict[str, Any] | None = None
        self._first_note = len(client.notifications)  # notifications seen before sending
        self._last_note: int | None = None  # ... and when the response arrived

    def done(self) -> bool:
        return self.response is not None

    def wait(self, timeout: float = 15) -> dict[str, Any]:
        """The raw response message; TimeoutError / ConnectionError if none comes."""
        c = self.client
        with c._cond:
            c._cond.wait_for(lambda: self.response is not None or c._eof, timeout)
            if self.response is not None:
                return self.response
        if c._eof:
            c.settle()
        what = "exited" if c._eof else f"did not answer within {timeout}s"
        err = ConnectionError if c._eof else TimeoutError
        raise err(f"agent {what}: {self.method} (id {self.id})\n{c.context()}")

    def result(self, timeout: float = 15) -> Any:
        response = self.wait(timeout)
        if "error" in response:
            e = response["error"] or {}
            raise RpcError(e.get("code", 0), e.get("message", ""), e.get("data"))
        return response.get("result")

    def updates(self) -> list[dict[str, Any]]:
        """``update`` objects for this request's session sent between the request and its answer."""
        session_id = (self.params or {}).get("sessionId")
        notes = self.client.notifications[self._first_note : self._last_note]
        return _updates(notes, session_id)


def _updates(notes: Iterable[dict[str, Any]], session_id: str | None) -> list[dict[str, Any]]:
    return [
        n["params"]["update"]
        for n in notes
        if n.get("method") == "session/update"
        and isinstance(n.get("params"), dict)
        and (session_id is None or n["params"].get("sessionId") == session_id)
    ]


class AcpClient:
    """Drive an ACP agent process. See the module docstring."""

    def __init__(
        self,
        fs_root: str | os.PathLike[str] | None = None,
        *,
        terminal: bool = True,
        permission: Permission = "allow_once",
        strict: bool = True,
    ) -> None:
        self.fs_root = None if fs_root is None else str(fs_root)
        self.permission = permission
        self.permission_gate: threading.Event | None = None  # if set, permission answers wait
        self.strict = strict  # also check behavioural rules, not only the schema
        self.buffers: dict[str, str] = {}  # unsaved editor buffers, by absolute path
        self.fs_writes: list[tuple[str, str]] = []
        self.terminals: dict[str, _Terminal] = {}
        self.violations: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        self.agent_requests: list[AgentRequest] = []
        self.responses: list[dict[str, Any]] = []
        self.client_capabilities: dict[str, Any] | None = None
        self.session_results: dict[str, Any] = {}  # session/new results by session id
        self.proc: subprocess.Popen[bytes] | None = None

        self.handlers: dict[str, Callable[[Any], Any]] = {
            "session/request_permission": self._on_permission
        }
        if fs_root is not None:
            self.handlers["fs/read_text_file"] = self._on_read
            self.handlers["fs/write_text_file"] = self._on_write
        if terminal:
            for name in ("create", "output", "wait_for_exit", "kill", "release"):
                self.handlers[f"terminal/{name}"] = getattr(self, f"_on_terminal_{name}")
        self._builtins = dict(self.handlers)

        # One re-entrant lock guards all shared state; waiters use the condition.
        self._cond = threading.Condition(threading.RLock())
        self._write_lock = threading.Lock()
        self._ids = itertools.count()  # ids start at 0, like Zed: catches `if msg.get("id")`
        self._term_ids = itertools.count(1)
        self._sent: dict[Any, _Sent] = {}
        self._pending: dict[Any, Pending] = {}
        self._answered: set[Any] = set()
        self._taken: dict[str, int] = {}
        self._stderr: list[str] = []
        self._threads: list[threading.Thread] = []
        self._eof = False
        self._closed = False
        self._reading = threading.Event()  # cleared while the client plays a stalled editor
        self._reading.set()
        # Protocol state for the behavioural checks.
        self._sessions: set[str] = set()
        self._in_turn: dict[str, int] = {}
        self._tools: dict[str, dict[str, str]] = {}  # session -> toolCallId -> status
        self._cancelled: set[str] = set()
        self._session_cwd: dict[str, str] = {}

    # ------------------------------------------------------------------ process

    def start(
        self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None
    ) -> AcpClient:
        # Own process group, so kill() also ends whatever the agent spawned.
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        for target in (self._read_stdout, self._read_stderr):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        threading.Thread(target=self._watch_exit, daemon=True).start()
        return self

    def _watch_exit(self) -> None:
        """Wake every waiter once the agent has exited, even if a child still holds its stdout.

        Without this a test whose agent could not start (or died) would wait out each timeout.
        """
        assert self.proc
        self.proc.wait()
        self._threads[0].join(0.5)  # let the stdout reader take what was written before the exit
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def settle(self, timeout: float = 0.5) -> None:
        """Give the readers a moment to collect the last output of an agent that is gone."""
        for t in self._threads:
            t.join(timeout)

    def close_stdin(self) -> None:
        assert self.proc and self.proc.stdin
        with self._write_lock, contextlib.suppress(OSError):
            self.proc.stdin.close()

    def wait_exit(self, timeout: float = 10) -> int:
        assert self.proc
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"agent still running after {timeout}s\n{self.context()}") from None
        self._join_readers()
        return rc

    def kill(self) -> None:
        """Kill the agent's whole process group and every terminal; idempotent."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self._join_readers()
        with self._cond:
            self._closed = True
            terminals = list(self.terminals.values())
            self._cond.notify_all()
        for term in terminals:
            term.kill()

    def _join_readers(self) -> None:
        # Let the readers process everything the agent wrote before it exited.
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> AcpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    @property
    def stderr(self) -> str:
        with self._cond:
            return "".join(self._stderr)

    def context(self, tail: int = 4000) -> str:
        """Exit code and the tail of the agent's stderr, for failure messages."""
        rc = None if self.proc is None else self.proc.poll()
        return f"agent exit code: {rc}\n--- agent stderr (tail) ---\n{self.stderr[-tail:]}"

    def assert_clean(self) -> None:
        with self._cond:
            problems = list(self.violations)
        if problems:
            listing = "\n".join(f"- {p}" for p in problems)
            raise AssertionError(f"{len(problems)} ACP violation(s):\n{listing}\n{self.context()}")

    # ------------------------------------------------------------------ sending

    def _send(self, msg: dict[str, Any]) -> None:
        self._write(json.dumps(msg, ensure_ascii=False).encode() + b"\n")

    def _write(self, data: bytes) -> None:
        assert self.proc and self.proc.stdin, "start() first"
        try:
            with self._write_lock:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise ConnectionError(f"cannot write to the agent\n{self.context()}") from exc

    def request_async(self, method: str, params: Any = None) -> Pending:
        with self._cond:
            rid = next(self._ids)
            while rid in self._sent:  # taken by a request sent with send_raw
                rid = next(self._ids)
            self._register(rid, method, params)
            pending = self._pending[rid] = Pending(self, rid, method, params)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        return pending

    def _register(self, rid: Any, method: str, params: Any) -> None:
        sid = params.get("sessionId") if isinstance(params, dict) else None
        self._sent[rid] = _Sent(method, params, sid)
        self._answered.discard(rid)  # send_raw may deliberately reuse an id
        if sid is None:
            return
        if method in ("session/load", "session/resume"):
            self._sessions.add(sid)  # the editor knows this session already
        if method in _TURN_METHODS:
            self._in_turn[sid] = self._in_turn.get(sid, 0) + 1
        if method == "session/prompt":
            self._cancelled.discard(sid)

    def request(self, method: str, params: Any = None, timeout: float = 15) -> Any:
        return self.request_async(method, params).result(timeout)

    def round_trip(self, timeout: float = 30) -> None:
        """Send a request the agent answers at once and wait for the answer: whatever the agent
        wrote before it is read by then. Use it before asserting that nothing (more) happened,
        instead of sleeping."""
        with contextlib.suppress(RpcError):
            self.request("heron-tests/round-trip", {}, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are. Requests found in them are tracked (use string ids)."""
        with self._cond:
            for line in data.split(b"\n"):
                with contextlib.suppress(ValueError):
                    msg = json.loads(line)
                    if isinstance(msg, dict) and "id" in msg and isinstance(msg.get("method"), str):
                        self._register(msg["id"], msg["method"], msg.get("params"))
        self._write(data)

    def next_response_for(self, rid: Any, timeout: float = 15) -> dict[str, Any]:
        """The next not-yet-returned response whose id is ``rid`` (None for parse errors)."""
        key = json.dumps(rid)

        def matches() -> list[dict[str, Any]]:
            return [r for r in self.responses if json.dumps(r.get("id")) == key]

        with self._cond:
            taken = self._taken.get(key, 0)
            if not self._cond.wait_for(lambda: len(matches()) > taken or self._eof, timeout):
                raise TimeoutError(
                    f"no response for id {rid!r} within {timeout}s\n{self.context()}"
                )
            found = matches()
        if len(found) <= taken:
            self.settle()
            raise ConnectionError(f"agent exited before answering id {rid!r}\n{self.context()}")
        with self._cond:
            self._taken[key] = taken + 1
            return found[taken]

    # ------------------------------------------------------------------ convenience

    def initialize(
        self, client_capabilities: dict[str, Any] | None = None, protocol_version: int = 1
    ) -> Any:
        caps = DEFAULT_CAPABILITIES if client_capabilities is None else client_capabilities
        self.client_capabilities = caps
        params = {
            "protocolVersion": protocol_version,
            "clientCapabilities": caps,
            "clientInfo": {"name": "heron-tests", "version": "0.0.0"},
        }
        return self.request("initialize", params)

    def new_session(self, cwd: str | os.PathLike[str], mcp_servers: list[Any] | None = None) -> str:
        result = self.request("session/new", {"cwd": str(cwd), "mcpServers": mcp_servers or []})
        self.session_results[result["sessionId"]] = result
        return result["sessionId"]

    def prompt_async(self, session_id: str, prompt: str | Sequence[dict[str, Any]]) -> Pending:
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        return self.request_async("session/prompt", {"sessionId": session_id, "prompt": blocks})

    def prompt(
        self, session_id: str, prompt: str | Sequence[dict[str, Any]], timeout: float = 30
    ) -> dict[str, Any]:
        """Run one turn: the PromptResponse fields plus ``updates`` of that turn."""
        pending = self.prompt_async(session_id, prompt)
        result = pending.result(timeout)
        return {**result, "updates": pending.updates()}

    def cancel(self, session_id: str, answer_pending_permissions: bool = True) -> None:
        """Send session/cancel; like an editor, then answer open permission prompts `cancelled`."""
        self.notify("session/cancel", {"sessionId": session_id})
        if answer_pending_permissions:
            with self._cond:
                self._cancelled.add(session_id)
                self._cond.notify_all()

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return _updates(self.notifications, session_id)

    def wait_for_update(
        self,
        pred: Callable[[dict[str, Any]], bool],
        timeout: float = 10,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """The first update (received so far or later) that satisfies ``pred``."""

        def find() -> dict[str, Any] | None:
            return next((u for u in self.updates(session_id) if pred(u)), None)

        with self._cond:
            if self._cond.wait_for(lambda: find() is not None or self._eof, timeout) and find():
                return find()  # type: ignore[return-value]
        raise self._gone_or_timeout(f"no matching session/update within {timeout}s")

    def wait_for_agent_request(self, method: str, timeout: float = 10) -> AgentRequest:
        def find() -> AgentRequest | None:
            return next((r for r in self.agent_requests if r.method == method), None)

        with self._cond:
            if self._cond.wait_for(lambda: find() is not None or self._eof, timeout) and find():
                return find()  # type: ignore[return-value]
        raise self._gone_or_timeout(f"agent sent no {method} within {timeout}s")

    def _gone_or_timeout(self, what: str) -> Exception:
        if self._eof:
            self.settle()
            return ConnectionError(f"agent exited: {what}\n{self.context()}")
        return TimeoutError(f"{what}\n{self.context()}")

    # ------------------------------------------------------------------ reading

    def _violation(self, text: str) -> None:
        with self._cond:
            self.violations.append(text)

    def _method_of(self, rid: Any) -> str | None:
        sent = self._sent.get(rid) if isinstance(rid, int | str) else None
        return sent.method if sent else None

    @contextlib.contextmanager
    def pause_reading(self) -> Iterator[None]:
        """Stop reading the agent's stdout for a while, like an editor that is busy: the pipe
        fills and the agent has to wait or queue. At most one line already read is held."""
        self._reading.clear()
        try:
            yield
        finally:
            self._reading.set()

    def _read_stdout(self) -> None:
        assert self.proc and self.proc.stdout
        for raw in self.proc.stdout:  # readline has no length limit
            self._reading.wait()
            if not raw.endswith(b"\n"):
                self._violation(f"last stdout line has no newline: {_clip(repr(raw))}")
            try:
                self._on_line(raw.decode("utf-8").rstrip("\n"))
            except UnicodeDecodeError as exc:
                self._violation(f"stdout line is not UTF-8 ({exc}): {_clip(repr(raw))}")
            except Exception:  # e.g. an unhashable id; the reader must survive any line
                self._violation(f"cannot process {_clip(repr(raw))}:\n{traceback.format_exc()}")
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while chunk := self.proc.stderr.read1(65536):  # type: ignore[attr-defined]
            with self._cond:
                self._stderr.append(decoder.decode(chunk))

    def _on_line(self, line: str) -> None:
        try:
            msg = json.loads(line, parse_constant=_reject_constant)
        except ValueError as exc:
            return self._violation(f"stdout line is not JSON ({exc}): {_clip(line)}")
        with self._cond:
            for problem in validate_agent_message(msg, self._method_of):
                self.violations.append(f"{problem}\n    in: {_clip(line)}")
            if not isinstance(msg, dict):
                return None
            if "method" in msg and "id" in msg:
                return self._on_agent_request(msg)
            if "method" in msg:
                return self._on_notification(msg)
            if "id" in msg:
                return self._on_response(msg)
        return None

    def _on_notification(self, msg: dict[str, Any]) -> None:
        params = msg.get("params")
        if self.strict and msg["method"] == "session/update" and isinstance(params, dict):
            self._check_update(params.get("sessionId"), params.get("update") or {})
        self.notifications.append(msg)
        self._cond.notify_all()

    def _check_update(self, sid: Any, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in _CHUNKS and not isinstance(update.get("messageId"), str):
            self.violations.append(f"{kind} without a messageId: {_clip(str(update))}")
        if sid not in self._sessions:
            self.violations.append(
                f"{kind} update for unknown session {sid!r} (before the session/new response?)"
            )
        if kind in _TURN_UPDATES and not self._in_turn.get(sid):
            self.violations.append(
                f"{kind} update for {sid!r} outside a prompt turn: {_clip(str(update))}"
            )
        tools = self._tools.setdefault(sid, {})
        tid = update.get("toolCallId")
        if kind == "tool_call":
            tools[tid] = update.get("status") or "pending"
        elif kind == "tool_call_update":
            if tid not in tools:
                self.violations.append(f"tool_call_update before any tool_call for {tid!r}")
            tools[tid] = update.get("status") or tools.get(tid, "pending")

    def _on_response(self, msg: dict[str, Any]) -> None:
        rid = msg["id"]
        self.responses.append(msg)
        self._cond.notify_all()  # waiters run once the reader releases the lock
        if not isinstance(rid, int | str):
            return  # a parse-error answer (id null), or a malformed id already reported
        sent = self._sent.get(rid)
        if sent is not None:
            if rid in self._answered:
                self.violations.append(f"second response for request id {rid!r}: {_clip(str(msg))}")
            self._answered.add(rid)
            self._after_response(sent, msg)
        pending = self._pending.pop(rid, None)
        if pending is not None:
            pending.response = msg
            pending._last_note = len(self.notifications)

    def _after_response(self, sent: _Sent, msg: dict[str, Any]) -> None:
        sid, result = sent.session_id, msg.get("result")
        if sid is not None and sent.method in _TURN_METHODS:
            self._in_turn[sid] -= 1
        opened = sent.method in ("session/new", "session/fork")
        if opened and isinstance(result, dict) and "sessionId" in result:
            self._sessions.add(result["sessionId"])
            self._session_cwd[result["sessionId"]] = (sent.params or {}).get("cwd")
        if self.strict and sent.method == "session/prompt" and result is not None:
            tools = self._tools.get(sid, {})
            for tid, status in list(tools.items()):
                if status not in ("completed", "failed"):
                    self.violations.append(f"turn ended with tool call {tid!r} still {status!r}")
                    del tools[tid]

    def _on_agent_request(self, msg: dict[str, Any]) -> None:
        method, params, rid = msg["method"], msg.get("params"), msg["id"]
        self.agent_requests.append(AgentRequest(method, params, rid))
        self._cond.notify_all()
        if self.strict:
            self._check_agent_request(method, params if isinstance(params, dict) else {})
        # Answer on a worker so that blocking handlers (wait_for_exit, a permission gate)
        # never stop the reader: the agent's cancel/updates must keep flowing.
        handler = self.handlers.get(method)
        threading.Thread(
            target=self._answer, args=(rid, method, params, handler), daemon=True
        ).start()

    def _check_agent_request(self, method: str, params: dict[str, Any]) -> None:
        needed = _NEEDS_CAPABILITY.get(method)
        if needed and self.client_capabilities is not None:
            value: Any = self.client_capabilities
            for key in needed:
                value = value.get(key) if isinstance(value, dict) else None
            if value is not True and not isinstance(value, dict):  # `{}` advertises too
                self.violations.append(
                    f"agent called {method} without client capability {'.'.join(needed)}"
                )
        path = params.get("path")
        if method.startswith("fs/") and not (isinstance(path, str) and os.path.isabs(path)):
            self.violations.append(f"{method} with a non-absolute path {path!r}")
        if method == "session/request_permission":
            tid = (params.get("toolCall") or {}).get("toolCallId")
            if tid not in self._tools.get(params.get("sessionId"), {}):
                self.violations.append(
                    f"permission asked for tool call {tid!r} before its tool_call"
                )

    def _answer(
        self, rid: Any, method: str, params: Any, handler: Callable[[Any], Any] | None
    ) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        try:
            if handler is None:
                raise RpcError(-32601, f"Method not found: {method}")
            reply["result"] = handler(params)
        except RpcError as e:
            reply["error"] = {"code": e.code, "message": e.message}
            if e.data is not None:
                reply["error"]["data"] = e.data
        except Exception:
            self._violation(f"client handler for {method} crashed:\n{traceback.format_exc()}")
            reply["error"] = {
                "code": -32603,
                "message": f"test client handler for {method} crashed",
            }
        if "result" in reply and self._builtins.get(method) is handler:
            for problem in validate_client_payload(_BUILTIN_RESPONSE_DEFS[method], reply["result"]):
                self._violation(f"harness bug: {problem}")
        with contextlib.suppress(ConnectionError):
            self._send(reply)

    # ------------------------------------------------------------------ built-in handlers

    def _on_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        sid = params.get("sessionId")
        with self._cond:
            while True:
                if sid in self._cancelled or self._closed:
                    return {"outcome": {"outcome": "cancelled"}}
                gate = self.permission_gate
                if gate is None or gate.is_set():
                    break
                self._cond.wait(0.05)  # the gate is a plain Event: poll it
        choice = self.permission
        if callable(choice):
            return {"outcome": choice(params)}
        if choice == "cancelled":
            return {"outcome": {"outcome": "cancelled"}}
        options = params.get("options") or []
        option = next((o for o in options if o.get("kind") == choice), None)
        if option is None:
            self._violation(f"permission: agent offered no {choice!r} option: {options}")
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    @staticmethod
    def _path(params: dict[str, Any]) -> Path:
        path = params.get("path")
        if not (isinstance(path, str) and os.path.isabs(path)):
            raise RpcError(-32602, f"path must be absolute: {path!r}")
        return Path(path)

    def _on_read(self, params: dict[str, Any]) -> dict[str, Any]:
        path = self._path(params)
        text = self.buffers.get(str(path))
        if text is None:
            try:
                text = path.read_bytes().decode("utf-8", errors="replace")
            except FileNotFoundError:
                raise RpcError(
                    -32002, f"Resource not found: {path}", {"uri": path.as_uri()}
                ) from None
            except OSError as exc:
                raise RpcError(-32603, f"cannot read {path}: {exc.strerror}") from None
        line, limit = params.get("line"), params.get("limit")
        if line is None and limit is None:
            return {"content": text}
        parts = text.split("\n")
        lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
        start = max((line or 1) - 1, 0)  # `line` is 1-based
        end = None if limit is None else start + limit
        return {"content": "".join(lines[start:end])}

    def _on_write(self, params: dict[str, Any]) -> dict[str, Any]:
        path, content = self._path(params), params.get("content")
        if not isinstance(content, str):
            raise RpcError(-32602, "content must be a string")
        with self._cond:
            self.fs_writes.append((str(path), content))
            if str(path) in self.buffers:
                self.buffers[str(path)] = content
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode())
        return {}

    def _terminal(self, params: dict[str, Any]) -> _Terminal:
        with self._cond:
            term = self.terminals.get(params.get("terminalId"))  # type: ignore[arg-type]
        if term is None:
            raise RpcError(-32602, f"unknown terminalId {params.get('terminalId')!r}")
        return term

    def _on_terminal_create(self, params: dict[str, Any]) -> dict[str, Any]:
        command, args = params["command"], params.get("args") or []
        # Like Zed, a command without args is a shell command line.
        argv = [command, *args] if args else ["/bin/sh", "-c", command]
        env = dict(os.environ) | {e["name"]: e["value"] for e in params.get("env") or []}
        cwd = params.get("cwd") or self._session_cwd.get(params.get("sessionId")) or self.fs_root
        try:
            term = _Terminal(argv, cwd, env, params.get("outputByteLimit"))
        except OSError as exc:
            raise RpcError(-32603, f"cannot start {command!r}: {exc}") from None
        with self._cond:
            tid = f"term-{next(self._term_ids)}"
            self.terminals[tid] = term
        return {"terminalId": tid}

    def _on_terminal_output(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._terminal(params).output()

    def _on_terminal_wait_for_exit(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._terminal(params).wait()

    def _on_terminal_kill(self, params: dict[str, Any]) -> dict[str, Any]:
        self._terminal(params).kill()
        return {}

    def _on_terminal_release(self, params: dict[str, Any]) -> dict[str, Any]:
        self._terminal(params).kill()
        with self._cond:
            self.terminals.pop(params["terminalId"], None)
        return {}


class _Terminal:
    """A command run for the agent, as an editor's terminal would, output captured."""

    def __init__(self, argv: list[str], cwd: str | None, env: dict[str, str], limit: int | None):
        self.limit, self.truncated = limit, False
        self._buf = bytearray()
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, so kill() gets its children too
        )
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout
        while chunk := self.proc.stdout.read1(65536):  # type: ignore[attr-defined]
            with self._lock:
                self._buf += chunk
                if self.limit is not None and len(self._buf) > self.limit:
                    del self._buf[: len(self._buf) - self.limit]  # keep the newest output
                    self.truncated = True

    def exit_status(self) -> dict[str, Any] | None:
        rc = self.proc.poll()
        if rc is None:
            return None
        if rc < 0:
            return {"exitCode": None, "signal": signal.Signals(-rc).name}
        return {"exitCode": rc, "signal": None}

    def output(self) -> dict[str, Any]:
        if self.proc.poll() is not None:
            self._pump_thread.join(2)  # collect the last bytes before reporting the exit
        with self._lock:
            data, truncated = bytes(self._buf), self.truncated
        if truncated:  # cutting from the front may split a character: drop its tail bytes
            data = data.lstrip(bytes(range(0x80, 0xC0)))
        out: dict[str, Any] = {
            "output": data.decode("utf-8", errors="replace"),
            "truncated": truncated,
        }
        status = self.exit_status()
        if status is not None:
            out["exitStatus"] = status
        return out

    def wait(self) -> dict[str, Any]:
        self.proc.wait()
        return self.exit_status()  # type: ignore[return-value]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
