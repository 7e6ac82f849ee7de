"""One connection per MCP server, through the official `mcp` SDK, restarted after a crash.

Importing this module imports the SDK (about a second): the manager does it in a worker thread,
and only for sessions that have servers. Each connection is supervised by one task, which
enters the SDK's transport and session context managers and leaves them again, so shutdown
(the SDK closes a stdio server's stdin, then signals its whole process group) always runs in
the task that started it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any, TextIO

import anyio
import mcp.client.stdio as sdk_stdio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from agent import __version__
from agent.mcp.config import HttpServer, ServerConfig, StdioServer
from agent.questions.ask import Asker
from agent.questions.forward import declined, forward

log = logging.getLogger("heron.mcp")

# The SDK waits 2 s after closing a server's stdin, then 2 s after SIGTERM to its group; Heron
# promises to exit within about a second of its own stdin closing, so it waits less.
sdk_stdio.PROCESS_TERMINATION_TIMEOUT = 0.5
sdk_stdio.FORCE_KILL_TIMEOUT = 0.5

# The SDK signals a stdio server's process group only when the server outlives the grace period;
# a server that exits at once can leave children behind in its group. Noting each server's pid
# (its group id: the SDK starts it in a new session) lets Heron clear the group afterwards.
_spawned: dict[int, int] = {}  # id(errlog) → pid
_sdk_spawn = getattr(sdk_stdio, "_create_platform_compatible_process", None)


async def _spawn_and_note(
    command: str, args: list[str], env: Any = None, errlog: Any = None, cwd: Any = None
) -> Any:
    assert _sdk_spawn is not None
    process = await _sdk_spawn(command, args, env, errlog, cwd)
    _spawned[id(errlog)] = process.pid
    # anyio's asyncio Process keeps its stdout in `_stdout` (its `stdout` property returns
    # it); the SDK wants the Process itself (it checks the type to kill the group).
    if getattr(process, "_stdout", None) is not None:
        process._stdout = _LineStream(process._stdout)
    return process


MAX_MESSAGE = 128_000_000  # bytes of one message from a stdio server (one line)
_READ = 1 << 20  # bytes asked of the pipe at a time


class _LineStream:
    """A server's stdout that hands the SDK whole lines, at most MAX_MESSAGE bytes.

    The SDK adds each chunk it reads to the part of the line it holds and splits the sum, so a
    message of many chunks cost time quadratic in its size (a 30 MB result: minutes) and
    memory without bound (a line that never ends). Here a line is gathered once, in a
    bytearray, and a longer one ends the connection.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pending = bytearray()
        self._too_long = False

    async def receive(self, max_bytes: int = _READ) -> bytes:
        if self._too_long:  # the SDK's drain after the failure: pass the rest through
            return bytes(await self._stream.receive(_READ))
        while True:
            try:
                chunk = await self._stream.receive(_READ)
            except anyio.EndOfStream:
                if not self._pending:
                    raise
                rest = bytes(self._pending)
                self._pending.clear()
                return rest
            end = chunk.rfind(b"\n")
            if end >= 0:
                lines = bytes(self._pending + chunk[: end + 1])
                self._pending[:] = chunk[end + 1 :]
                return lines
            self._pending += chunk
            if len(self._pending) > MAX_MESSAGE:
                self._pending = bytearray()
                self._too_long = True
                log.warning("an MCP server sent a message over %d bytes; disconnected", MAX_MESSAGE)
                raise anyio.BrokenResourceError(f"a message over {MAX_MESSAGE} bytes")

    async def aclose(self) -> None:
        await self._stream.aclose()


if _sdk_spawn is not None:  # a private SDK function: without it, the SDK's own shutdown only
    sdk_stdio._create_platform_compatible_process = _spawn_and_note


def _kill_group(pid: int) -> None:
    if pid > 1:  # 0: never spawned; never anything that could name our own or init's group
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


MAX_RESTARTS = 3  # a crashed server comes back on next use at most this often
STDERR_LINES = 12  # what a failure report quotes of the server's stderr
STDERR_TAIL = 8 * 1024  # bytes of the server's stderr kept for that (a tail, by bytes)
STDERR_LINE = 500  # bytes of one stderr line logged
STDERR_READ = 64 * 1024  # bytes read at a time: a line without end never grows memory
START_LIMIT = 60.0  # seconds a server may take to start before it is given up on
RELIST_TIMEOUT = 10.0  # seconds for tools/list after `tools/list_changed`


class ServerUnavailable(Exception):
    """The server cannot take the call; the message says why, for the model and the user."""


class StderrTail:
    """A stdio server's stderr: logged line by line (each cut to STDERR_LINE bytes), its last
    STDERR_TAIL bytes kept for failure reports. Read in chunks, never by line: a server that
    writes hundreds of MB without a newline costs no memory."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tail = bytearray()
        self._line = bytearray()  # the start of the line being written
        self._line_length = 0  # its full length so far
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = os.fdopen(write_fd, "w")
        self._reader = threading.Thread(
            target=self._pump, args=(read_fd,), name=f"mcp-stderr-{name}", daemon=True
        )
        self._reader.start()

    def _pump(self, fd: int) -> None:
        with open(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(STDERR_READ):
                self.tail += chunk
                del self.tail[: max(0, len(self.tail) - STDERR_TAIL)]
                self._log_lines(chunk)
        if self._line_length:
            self._log_line()

    def _log_lines(self, chunk: bytes) -> None:
        *ended, rest = chunk.split(b"\n")
        for part in ended:
            self._take(part)
            self._log_line()
        self._take(rest)

    def _take(self, part: bytes) -> None:
        self._line += part[: max(0, STDERR_LINE - len(self._line))]
        self._line_length += len(part)

    def _log_line(self) -> None:
        text = self._line.decode("utf-8", errors="replace").rstrip()
        if self._line_length > STDERR_LINE:
            text += f" … ({self._line_length:,} bytes)"
        log.debug("mcp %s stderr: %s", self.name, text)
        self._line.clear()
        self._line_length = 0

    @property
    def lines(self) -> list[str]:
        """The last STDERR_LINES lines of the tail; of a longer line, its last STDERR_LINE
        characters (where a message that follows a flood of output is)."""
        text = bytes(self.tail).decode("utf-8", errors="replace")
        lines = [line.rstrip() for line in text.rstrip("\n").split("\n")]
        return [
            line if len(line) <= STDERR_LINE else "…" + line[-STDERR_LINE:]
            for line in lines
            if line
        ][-STDERR_LINES:]

    def close_writer(self) -> None:
        """Drop our copy of the write end once the server has its own (or never started)."""
        if not self.writer.closed:
            self.writer.close()

    async def text(self) -> str:
        """The last lines, after giving the reader a moment to catch up with a dead server."""
        await anyio.to_thread.run_sync(self._reader.join, 0.3)
        return "\n".join(self.lines)


class McpConnection:
    """A server's connection, its tools, and its state: starting, ready, down, dead or closed.

    `down`: crashed after working; the next call restarts it (at most MAX_RESTARTS times).
    `dead`: it never started, or it used up its restarts; its tools are withdrawn.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        cwd: str,
        startup_timeout: float,
        on_change: Callable[[McpConnection, str | None], None],
        asker: Asker | None = None,
    ) -> None:
        self.config = config
        self.asker = asker  # the client, for the server's elicitation requests (None: declined)
        self.calls: list[str] = []  # ids of this server's tool calls running now
        self.name = config.name
        self.cwd = cwd
        self.startup_timeout = startup_timeout  # what a prompt or a call waits for a start
        # A slow server (npx fetching a package) may keep starting after the prompt went on
        # without it; it is only given up on after this long.
        self.start_limit = max(START_LIMIT, startup_timeout)
        self.on_change = on_change  # (connection, failure report or None)
        self.state = "starting"
        self.tools: list[types.Tool] = []
        self.tools_stale = False
        self.prompts: list[types.Prompt] = []  # slash commands (agent.commands.mcp)
        self.prompts_stale = False
        self.failure = ""
        self.restarts = 0
        self._ever_ready = False
        self._session: ClientSession | None = None
        self._settled = anyio.Event()  # the current start has succeeded or failed
        self._ended = anyio.Event()  # the current connection is over
        self._round_over = anyio.Event()  # ... and its failure is recorded
        self._restart = anyio.Event()  # a call wants a crashed server back
        self._finished = anyio.Event()  # the supervisor has returned
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        self._stderr: StderrTail | None = None

    # -- supervision ---------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._supervise()
        except Exception:  # a bug here must cost this server, never the whole agent
            log.exception("MCP server %s: supervisor failed", self.name)
            self.state = "dead"
        finally:
            if self._closing:
                self.state = "closed"
            self._settled.set()
            self._round_over.set()
            self._finished.set()

    async def _supervise(self) -> None:
        while not self._closing:
            reason = await self._connect_once()
            if self._closing:
                break
            gone = not self._ever_ready or self.restarts >= MAX_RESTARTS
            self.state = "dead" if gone else "down"
            self.failure = reason
            self._settled.set()
            self._round_over.set()
            self.on_change(self, reason)
            if gone:
                break
            await self._restart.wait()
            self._restart = anyio.Event()
            self.restarts += 1

    async def _connect_once(self) -> str:
        """Connect, list the tools, serve until the connection ends; returns what went wrong."""
        self.state = "starting"
        self._ended = anyio.Event()
        self._round_over = anyio.Event()
        ready = False
        reason = ""
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + self.start_limit) as self._scope:
                async with AsyncExitStack() as stack:
                    read, write = await self._open_transport(stack)
                    read = await self._watch(stack, read)
                    session = await stack.enter_async_context(
                        ClientSession(
                            read,
                            write,
                            message_handler=self._on_message,
                            elicitation_callback=self._elicit,
                            client_info=types.Implementation(name="heron", version=__version__),
                        )
                    )
                    started = await session.initialize()
                    self.tools = await _list_tools(session)
                    if started.capabilities.prompts is not None:
                        self.prompts = await _list_prompts(session, self.name)
                    self._scope.deadline = math.inf
                    self._session = session
                    self.state = "ready"
                    ready = self._ever_ready = True
                    self._settled.set()
                    self.on_change(self, None)
                    log.info("MCP server %s ready: %d tools", self.name, len(self.tools))
                    await self._ended.wait()
            if self._scope.cancelled_caught and not ready and not self._closing:
                reason = f"it did not start within {self.start_limit:g} s"
        except Exception as exc:
            reason = _describe(exc)
        finally:
            self._session = None
            self._scope = None
        if ready and not reason:
            reason = "it stopped unexpectedly"
        return await self._report(reason)

    async def _report(self, reason: str) -> str:
        if self._closing:
            return reason
        text = f"MCP server {self.name!r} is unavailable: {reason}."
        if self._stderr is not None and (tail := await self._stderr.text()):
            text += f"\nIts last stderr lines:\n{tail}"
        log.warning("%s", text)
        return text

    async def _open_transport(self, stack: AsyncExitStack) -> Any:
        config = self.config
        if isinstance(config, StdioServer):
            self._stderr = tail = StderrTail(self.name)
            # Registered first, so it runs after the SDK's shutdown: no child of the server
            # outlives it.
            stack.callback(lambda: _kill_group(_spawned.pop(id(tail.writer), 0)))
            try:
                params = StdioServerParameters(
                    command=config.command, args=config.args, env=config.env, cwd=self.cwd
                )
                return await stack.enter_async_context(stdio_client(params, errlog=tail.writer))
            finally:
                tail.close_writer()
        assert isinstance(config, HttpServer)
        if config.transport == "sse":
            return await stack.enter_async_context(sse_client(config.url, headers=config.headers))
        http = await stack.enter_async_context(create_mcp_http_client(headers=config.headers))
        return await stack.enter_async_context(streamable_http_client(config.url, http_client=http))

    async def _watch(self, stack: AsyncExitStack, read: Any) -> Any:
        """Pass the server's messages on, and notice when they stop (a crash, even when idle)."""
        send, receive = anyio.create_memory_object_stream[Any](0)
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)

        async def pump() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                self._ended.set()

        tg.start_soon(pump)
        return receive

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_stale = True
            self.on_change(self, None)
        elif isinstance(message, types.PromptListChangedNotification):
            self.prompts_stale = True
            self.on_change(self, None)
        elif isinstance(message, Exception):
            log.warning("MCP server %s: %s", self.name, message)

    # -- use -----------------------------------------------------------------------------------

    async def refresh_tools(self) -> None:
        """After `tools/list_changed`: list the tools again (bounded; old list kept on failure)."""
        session = self._session
        if not self.tools_stale or session is None:
            return
        self.tools_stale = False
        with anyio.move_on_after(RELIST_TIMEOUT):
            try:
                self.tools = await _list_tools(session)
            except Exception as exc:
                log.warning("MCP server %s: listing its tools failed: %s", self.name, exc)
        self.on_change(self, None)

    async def refresh_prompts(self) -> None:
        """After `prompts/list_changed`: list the prompts again (bounded)."""
        session = self._session
        if not self.prompts_stale or session is None:
            return
        self.prompts_stale = False
        with anyio.move_on_after(RELIST_TIMEOUT):
            self.prompts = await _list_prompts(session, self.name, self.prompts)
        self.on_change(self, None)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        session = await self._usable()
        try:
            with anyio.fail_after(self.startup_timeout + RELIST_TIMEOUT):
                return await session.get_prompt(name, arguments)
        except TimeoutError as exc:
            raise ServerUnavailable(f"MCP server {self.name!r} did not answer in time.") from exc
        except MCPError as exc:
            raise ServerUnavailable(
                f"MCP server {self.name!r} answered: {exc.error.message}"
            ) from exc
        except Exception as exc:  # a crash under the call, an answer the SDK rejects
            raise ServerUnavailable(f"MCP server {self.name!r}: {_describe(exc)}") from exc

    async def wait_started(self) -> None:
        await self._settled.wait()

    async def _elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """The server asks the user something: passed on to the client (agent.questions)."""
        if self.asker is None:
            result = declined("no client to ask")
        else:
            call_id = self.calls[0] if len(self.calls) == 1 else None
            schema = getattr(params, "requested_schema", None)
            mode = getattr(params, "mode", "form")
            result = await forward(self.asker, self.name, call_id, mode, params.message, schema)
        return types.ElicitResult.model_validate(result)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], call_id: str = ""
    ) -> types.CallToolResult:
        session = await self._usable()
        ended, round_over = self._ended, self._round_over
        self.calls.append(call_id)
        try:
            result = await session.call_tool(name, arguments)
        except MCPError as exc:
            if ended.is_set():  # the server went away under the call
                with anyio.move_on_after(self.startup_timeout):
                    await round_over.wait()
                raise ServerUnavailable(
                    self.failure or f"MCP server {self.name!r} stopped during the call."
                ) from exc
            raise ServerUnavailable(
                f"MCP server {self.name!r} answered: {exc.error.message}"
            ) from exc
        finally:
            self.calls.remove(call_id)
        if not isinstance(result, types.CallToolResult):
            raise ServerUnavailable(f"MCP server {self.name!r} sent an unexpected answer.")
        return result

    async def _usable(self) -> ClientSession:
        if self.state == "down" and not self._closing:
            log.info("restarting MCP server %s", self.name)
            self._settled = anyio.Event()
            self.state = "starting"
            self._restart.set()
        if self.state == "starting":
            with anyio.move_on_after(self.startup_timeout + 1):
                await self._settled.wait()
        if self.state != "ready" or self._session is None:
            raise ServerUnavailable(self.failure or f"MCP server {self.name!r} is not running.")
        return self._session

    async def aclose(self) -> None:
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()
        self._ended.set()
        self._restart.set()
        await self._finished.wait()


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose cursor never ends cannot hang us
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _list_prompts(
    session: ClientSession, name: str, keep: list[types.Prompt] | None = None
) -> list[types.Prompt]:
    """The server's prompts; `keep` (or none) if it fails: prompts are a nicety, the tools are
    what the server is for."""
    prompts: list[types.Prompt] = []
    cursor: str | None = None
    try:
        for _ in range(100):  # a server whose cursor never ends cannot hang us
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_prompts(params=params)
            prompts.extend(page.prompts)
            cursor = page.next_cursor
            if not cursor:
                break
    except Exception as exc:
        log.warning("MCP server %s: listing its prompts failed: %s", name, _describe(exc))
        return keep or []
    return prompts


def _describe(exc: BaseException) -> str:
    """A readable reason from what the SDK raised (often an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.error.message
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
