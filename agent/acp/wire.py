"""Newline-delimited JSON-RPC 2.0 over a pair of byte streams (the editor's pipes).

- Reading never stops: each incoming request runs in its own task, so `session/cancel`,
  permission answers and fs/terminal results get through while a turn runs.
- Messages never interleave: `send()` queues (`outbox.Outbox`, where streamed text chunks that
  wait behind each other merge) and the queue is written in order. When stdout can take
  non-blocking writes (`stdout.open_nonblocking`) the event loop writes them itself: the first
  message after a pause at once, inside `send()`; during a burst (deltas parsed from one network
  read, with no await between them) at least every FLUSH_INTERVAL, the rest as soon as the loop
  turns; what the pipe cannot take yet waits for it to drain. Otherwise one task writes from a
  thread. The queue is bounded by back-pressure, not by dropping: producers of bulk output (the
  model stream, tool progress) `await drain()`, which waits while the editor is behind on
  reading. Responses and Heron's own requests are never dropped or delayed by it.
- Nothing the editor sends can crash the loop: every line is checked as a JSON-RPC envelope
  (ids must be strings or 64-bit integers, as the ACP schema says) before it is dispatched,
  and every message sent is strict JSON in valid UTF-8 whatever text it carries.
- Incoming requests and notifications are dispatched by `agent.acp.dispatch`; answers to Heron's
  own requests (`request()`) are matched to their waiters by id.
- No line-length cap: lines are read with the buffered reader's readline in a thread, which
  also works when stdin is a regular file or a terminal rather than a pipe.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any, BinaryIO

import anyio
from anyio.abc import TaskGroup

# The JSON-RPC error codes are defined once, in agent.acp.dispatch (which answers with them
# too); handlers import them from here, with RpcError.
from agent.acp.dispatch import INTERNAL_ERROR as INTERNAL_ERROR
from agent.acp.dispatch import INVALID_PARAMS as INVALID_PARAMS
from agent.acp.dispatch import INVALID_REQUEST as INVALID_REQUEST
from agent.acp.dispatch import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from agent.acp.dispatch import JsonRpcError, async_dispatch_to_serializable
from agent.acp.outbox import Outbox
from agent.acp.stdout import NonBlockingStdout, open_nonblocking

log = logging.getLogger("heron.wire")

PARSE_ERROR = -32700
REQUEST_CANCELLED = -32800

EOF_GRACE = 0.7  # seconds the work in flight gets to wind down once stdin has closed
OUTBOX_LIMIT = 1 << 20  # bytes queued for stdout above which `drain()` makes producers wait
# While a burst is parsed without a pause, what it queued is written at least this often: soon
# enough for the eye, rarely enough that the deltas in between merge into one line.
FLUSH_INTERVAL = 0.002
_INT64 = range(-(2**63), 2**63)

Handler = Callable[..., Awaitable[Any]]

# What a request's handler asked to send once its answer is queued (see `after_answer`).
_after_answer: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "heron_after_answer", default=None
)


class RpcError(Exception):
    """A JSON-RPC error: raised by handlers to answer one, and by `request()` on receiving one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return f"{self.reason} (code {self.code})"

    @property
    def reason(self) -> str:
        """The most telling text of the error: a client may put its reason in `message` or in
        `data` (acpx answers "Internal error" with the reason in `data.details`)."""
        detail = _detail(self.data)
        if not detail or detail in self.message:
            return self.message
        if self.message.strip().rstrip(".").lower() in _GENERIC_MESSAGES:
            return detail
        return f"{self.message}: {detail}"


# JSON-RPC's standard messages, which say nothing of what went wrong.
_GENERIC_MESSAGES = {
    "",
    "internal error",
    "invalid params",
    "invalid request",
    "server error",
    "unknown error",
}


def _detail(data: Any) -> str:
    """A readable reason in an error's `data`: itself when text, else a text field of it."""
    if isinstance(data, str):
        text = data
    elif isinstance(data, dict):
        fields = (data.get(k) for k in ("details", "detail", "message", "reason", "error"))
        text = next((f for f in fields if isinstance(f, str) and f.strip()), "")
    else:
        text = ""
    text = " ".join(text.split())
    return text if len(text) <= 500 else text[:499] + "…"


class ConnectionClosed(Exception):
    """The editor went away: stdin closed or stdout broke."""


class Connection:
    def __init__(self, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self._stdin = stdin
        self._stdout = stdout
        self._methods: dict[str, Handler] = {}
        self._outbox = Outbox()
        self._outbox_done = False  # no more messages will be queued
        self._being_written = 0  # bytes taken from the outbox, not yet written
        # Non-blocking writes from the loop, or None: a thread writes (see agent.acp.stdout).
        self._direct: NonBlockingStdout | None = open_nonblocking(stdout)
        self._unwritten: memoryview | None = None  # taken, waiting for room in the pipe
        self._last_write = 0.0  # time.monotonic() of the last direct write
        self._broken: OSError | None = None  # stdout failed during a direct write
        self._wake_writer = anyio.Event()
        self._written = anyio.Event()  # set (and replaced) after every write
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._in_flight: dict[Any, anyio.CancelScope] = {}
        self._tasks: TaskGroup | None = None
        self._input_closed = False
        self._running = 0  # incoming requests and notifications being handled
        self._idle = anyio.Event()  # set (and replaced) whenever one of them finishes
        self.closed = anyio.Event()

    def register(self, method: str, handler: Handler) -> None:
        """`handler(params)` returns the result; it raises RpcError to answer an error.

        `params` is the request's params object as one dict: data, never Python arguments."""
        self._methods[method] = _adapt(handler)

    # -- sending ------------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        """Queue a message for the writer; order is kept. Never blocks: see `drain()`."""
        if self.closed.is_set():
            return
        self._outbox.put(message)
        if (
            self._direct is not None
            and self._unwritten is None
            and time.monotonic() - self._last_write >= FLUSH_INTERVAL
        ):
            self._write_direct()  # never blocks: what the pipe cannot take waits in the writer
        else:
            self._wake_writer.set()

    @property
    def _queued(self) -> int:
        """Bytes queued or being written."""
        return self._outbox.size + self._being_written

    async def drain(self) -> None:
        """Wait while the editor is behind on reading stdout (more than OUTBOX_LIMIT queued).

        Producers of bulk output await this after sending, so an editor that stops reading
        slows the turn down instead of growing Heron's memory. Cancellable; returns at once
        once the connection is closed.
        """
        while self._queued > OUTBOX_LIMIT and not self.closed.is_set():
            await self._written.wait()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def after_answer(self, callback: Callable[[], None]) -> None:
        """Run `callback` right after the answer to the request being handled is queued, and
        only if that answer is a success; at once outside a request handler.

        For notifications about something the answer creates (`available_commands_update`
        after `session/new`): Zed drops updates for a session it does not know yet.
        """
        pending = _after_answer.get()
        if pending is None:
            callback()
        else:
            pending.append(callback)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the editor and wait for its result (RpcError on an error answer).

        Cancelled while waiting, it tells the editor with `$/cancel_request` and forgets the id,
        so a late answer is dropped.
        """
        if self.closed.is_set() or self._input_closed:
            raise ConnectionClosed("the editor has disconnected")
        request_id = next(self._ids)
        waiter = _Waiter()
        self._waiting[request_id] = waiter
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            await waiter.done.wait()
        except BaseException:
            if self._waiting.pop(request_id, None) is not None:
                self.notify("$/cancel_request", {"requestId": request_id})
            raise
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    # -- running ------------------------------------------------------------------------------

    async def serve(
        self,
        pending: list[bytes] | None = None,
        at_eof: bool = False,
        on_eof: Callable[[], None] | None = None,
    ) -> None:
        """Read and dispatch until stdin closes, then wind down within a second.

        At end of input `on_eof` stops the work in flight (running turns answer `cancelled`),
        quick requests still read get their answers, and what is queued is written out.
        """
        async with anyio.create_task_group() as tg:
            self._tasks = tg
            writer_done = anyio.Event()
            tg.start_soon(self._write_loop, writer_done)
            for line in pending or ():
                self._handle_line(line)
            if not at_eof:
                await self._read_loop()
            log.info("stdin closed; shutting down")
            self._input_closed = True
            if on_eof is not None:
                on_eof()
            self._fail_waiters()  # nobody is left to answer Heron's own requests
            with anyio.move_on_after(EOF_GRACE):
                while self._running:
                    await self._idle.wait()
            self.closed.set()
            self._outbox_done = True
            self._wake_writer.set()
            self._written.set()  # producers waiting in drain() go on (and find it closed)
            with anyio.move_on_after(0.2):
                await writer_done.wait()
            # A writer stuck in write() (the editor stopped reading) is abandoned here.
            tg.cancel_scope.cancel()

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run background work tied to the connection's lifetime."""
        assert self._tasks is not None
        self._tasks.start_soon(fn, *args)

    def _fail_waiters(self) -> None:
        for waiter in self._waiting.values():
            waiter.fail(ConnectionClosed("the editor has disconnected"))
        self._waiting.clear()

    async def _read_loop(self) -> None:
        # A daemon thread does the blocking reads: when the editor vanishes mid-read nothing
        # can unblock readline(), and a daemon thread does not keep the process alive.
        lines, received = anyio.create_memory_object_stream[bytes](64)
        async with anyio.from_thread.BlockingPortal() as portal, received:
            threading.Thread(
                target=self._pump_stdin, args=(portal, lines), name="heron-stdin", daemon=True
            ).start()
            async for line in received:
                self._handle_line(line)

    def _pump_stdin(self, portal: anyio.from_thread.BlockingPortal, lines: Any) -> None:
        try:
            while line := self._stdin.readline():
                portal.call(lines.send, line)  # waits while the queue is full
        except Exception as exc:  # the loop has ended, or stdin broke
            log.debug("stdin reader stopped: %s", exc)
        finally:
            with contextlib.suppress(Exception):
                portal.call(lines.close)

    async def _write_loop(self, done: anyio.Event) -> None:
        try:
            await self._write_all()
        finally:
            done.set()

    async def _write_all(self) -> None:
        while True:
            while not (self._outbox or self._unwritten is not None or self._broken):
                if self._outbox_done:
                    return
                self._wake_writer = anyio.Event()
                await self._wake_writer.wait()
            if self._direct is not None:
                if self._broken is None and self._unwritten is None:
                    self._write_direct()
                if self._broken is None and self._unwritten is not None:
                    # The pipe is full: wait for the editor to read (abandoned at exit).
                    await anyio.wait_writable(self._direct.fileno())
                    self._write_direct()
                if self._broken is not None:
                    return self._stdout_gone(self._broken)
                continue
            # Take everything already queued so a burst of chunks costs one write.
            data = self._outbox.take()
            self._being_written = len(data)
            try:
                # Abandonable: a write() blocked on a full pipe must not hold up the exit.
                await anyio.to_thread.run_sync(self._write, data, abandon_on_cancel=True)
            except OSError as exc:
                return self._stdout_gone(exc)
            self._being_written = 0
            self._written.set()
            self._written = anyio.Event()

    def _write_direct(self) -> None:
        """Write what the pipe takes now, without blocking: first what an earlier write left,
        else everything queued. The rest stays in `_unwritten` for the writer task."""
        assert self._direct is not None
        data = self._unwritten
        if data is None:
            data = memoryview(self._outbox.take())
            self._being_written = len(data)
        try:
            sent = self._direct.write(data)
        except OSError as exc:
            self._broken = exc
            self._unwritten = None
            self._wake_writer.set()
            return
        self._last_write = time.monotonic()
        self._being_written -= sent
        self._unwritten = data[sent:] if sent < len(data) else None
        if self._unwritten is not None:
            self._wake_writer.set()
        if sent:
            self._written.set()
            self._written = anyio.Event()

    def _stdout_gone(self, exc: OSError) -> None:
        log.warning("stdout is gone (%s); shutting down", exc)
        self.closed.set()
        self._written.set()
        self._fail_waiters()
        assert self._tasks is not None
        self._tasks.cancel_scope.cancel()

    def _write(self, data: bytes) -> None:
        self._stdout.write(data)
        self._stdout.flush()

    # -- dispatching --------------------------------------------------------------------------

    def _handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            # Strict UTF-8 (json.loads on bytes would let encoded surrogates through), and
            # NaN/Infinity are not JSON.
            message = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            log.warning("unparsable line: %s", exc)
            self._send_error(None, PARSE_ERROR, "Parse error", f"invalid JSON: {exc}")
            return
        if isinstance(message, list):
            # ACP v1 exchanges single messages; a batch answered as an array would break
            # clients that expect objects, so the whole batch is refused, run in no part.
            self._send_error(None, INVALID_REQUEST, "Invalid Request", "batches are not supported")
            return
        if not isinstance(message, dict):
            self._send_error(None, INVALID_REQUEST, "Invalid Request", "not a JSON object")
            return
        if "method" not in message and ("result" in message or "error" in message):
            self._resolve(message)
            return
        problem = _envelope_problem(message)
        if problem is not None:
            # An id that is not a string or 64-bit integer cannot be echoed (the ACP schema
            # forbids it, and 1e400 is not even JSON): such errors carry `id: null`.
            # Without a string method it is no identifiable request either.
            request_id = message.get("id")
            identified = _is_valid_id(request_id) and isinstance(message.get("method"), str)
            echo = request_id if identified else None
            self._send_error(echo, INVALID_REQUEST, "Invalid Request", problem)
            return
        if message["method"] == "$/cancel_request" and "id" not in message:
            self._cancel_request(message.get("params"))
            return
        assert self._tasks is not None
        self._running += 1
        self._tasks.start_soon(self._dispatch, message)

    async def _dispatch(self, message: Any) -> None:
        try:
            await self._dispatch_one(message)
        finally:
            self._running -= 1
            self._idle.set()
            self._idle = anyio.Event()

    async def _dispatch_one(self, message: Any) -> None:
        request_id = message.get("id") if isinstance(message, dict) else None
        is_request = isinstance(message, dict) and "id" in message
        scope = anyio.CancelScope()
        callbacks: list[Callable[[], None]] = []
        _after_answer.set(callbacks)  # this task's own context: one list per request
        if is_request:
            self._in_flight[_key(request_id)] = scope
        try:
            with scope:
                answer = await async_dispatch_to_serializable(
                    "", methods=self._methods, deserializer=lambda _: message
                )
            if scope.cancelled_caught:
                self._send_error(request_id, REQUEST_CANCELLED, "Request cancelled")
                return
        finally:
            if is_request:
                self._in_flight.pop(_key(request_id), None)
        if answer:
            self.send(answer)
        if not isinstance(answer, dict) or "error" not in answer:
            for callback in callbacks:
                try:
                    callback()
                except Exception:
                    log.exception("sending what follows the answer failed")

    def _cancel_request(self, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if _is_valid_id(request_id) and (scope := self._in_flight.get(_key(request_id))):
            scope.cancel()

    def _resolve(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        # Heron's ids are plain ints: `true` or 1.0 must not pass for 1, nor {} crash the pop.
        waiter = self._waiting.pop(request_id, None) if type(request_id) is int else None
        if waiter is None:
            log.debug("answer to an unknown or abandoned request: %.200r", request_id)
            return
        if "error" in message:
            err = message["error"] if isinstance(message["error"], dict) else {}
            code = err.get("code")
            waiter.fail(
                RpcError(
                    code if type(code) is int else INTERNAL_ERROR,
                    str(err.get("message", "")),
                    err.get("data"),
                )
            )
        else:
            waiter.succeed(message.get("result"))

    def _send_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})


class _Waiter:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def succeed(self, result: Any) -> None:
        self.result = result
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _is_valid_id(request_id: Any) -> bool:
    """A request id Heron accepts: a string or a 64-bit integer (the ACP schema's RequestId).

    Null, also allowed by JSON-RPC, is refused: it is what answers to unreadable lines carry,
    so a client could not tell its result from such an error.
    """
    return isinstance(request_id, str) or (type(request_id) is int and request_id in _INT64)


def _envelope_problem(message: dict[str, Any]) -> str | None:
    """Why `message` is not a valid JSON-RPC request or notification, or None if it is."""
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if not isinstance(message.get("method"), str):
        return '"method" must be a string'
    if "id" in message and not _is_valid_id(message["id"]):
        return '"id" must be a string or a 64-bit integer'
    if "params" in message and not isinstance(message["params"], dict | list):
        return '"params" must be an object'
    return None


def _key(request_id: Any) -> Any:
    # JSON-RPC ids are strings or numbers; 1 and "1" are different requests.
    return (type(request_id).__name__, request_id)


def _adapt(handler: Handler) -> Handler:
    """Wrap a handler so RpcError becomes the dispatch's JSON-RPC error and results are wrapped."""
    from agent.acp.dispatch import Success

    async def method(params: dict[str, Any]) -> Any:
        try:
            result = await handler(params)
        except RpcError as exc:
            raise JsonRpcError(
                exc.code, exc.message, exc.data if exc.data is not None else _NODATA
            ) from exc
        return Success(result if result is not None else {})

    return method


def _nodata() -> Any:
    from agent.acp.dispatch import NODATA

    return NODATA


_NODATA = _nodata()
