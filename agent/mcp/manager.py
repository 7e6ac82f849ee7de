"""A session's MCP servers: started together in the background, their tools, their news.

`session/new` never waits for a server. Before each model request the turn calls `prepare()`:
the first one waits (bounded by `mcp_startup_timeout`) for servers still starting, every one
picks up `tools/list_changed`, and each server failure is handed back once as a notice for
the user.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from agent.mcp.config import ServerConfig, tool_name
from agent.notices import Note

if TYPE_CHECKING:
    from agent.mcp.client import McpConnection
    from agent.mcp.tool import McpTool
    from agent.questions.ask import Asker

log = logging.getLogger("heron.mcp")

SETTLE = 0.05  # seconds between session/new and the SDK import


def mcp_note(text: str) -> Note:
    """What the user is told of a server that failed, or that the turn goes on without."""
    starting = "still starting" in text
    title = text.split(":", 1)[0].split(";", 1)[0].strip().rstrip(".")
    return Note(f"mcp: {text}", title, f"{text}\n\n", "warning" if starting else "error")


class McpManager:
    def __init__(
        self,
        configs: list[ServerConfig],
        *,
        cwd: str,
        startup_timeout: float,
        asker: Asker | None = None,
    ) -> None:
        self.configs = configs
        self.asker = asker  # the client, for the servers' elicitation requests
        self.cwd = cwd
        self.startup_timeout = startup_timeout
        self.connections: list[McpConnection] = []
        self.version = 0  # bumped whenever the set of tools may have changed
        self._notices: list[str] = []  # what the user is told at the next request
        self._reported: set[str] = set()  # servers whose failure the user has been told about
        self._started = anyio.Event()  # the SDK is imported and every connection launched
        self._finished = anyio.Event()
        self._closing = False
        self._waited = False  # the first model request waited for the servers to start
        self._tools: list[McpTool] = []
        self._tools_version = -1
        # Told whenever a server's tools, prompts or state may have changed (agent.commands
        # lists the prompts as slash commands).
        self.listeners: list[Callable[[], None]] = []

    def start(self, spawn: Callable[..., None]) -> None:
        spawn(self._run)

    async def _run(self) -> None:
        # Let the answer to session/new go out before the import competes with it for the GIL.
        await anyio.sleep(SETTLE)
        try:
            # Importing the SDK takes about a second: a worker thread keeps the loop answering.
            client = await anyio.to_thread.run_sync(importlib.import_module, "agent.mcp.client")
        except Exception as exc:  # not installed, or an SDK this code does not fit
            log.warning("MCP servers ignored: the mcp package cannot be imported (%s)", exc)
            self._notices.append(f"MCP servers are unavailable: {exc}.")
            self._started.set()
            self._finished.set()
            return
        try:
            async with anyio.create_task_group() as tg:
                for config in self.configs:
                    if self._closing:
                        break
                    connection = client.McpConnection(
                        config,
                        cwd=self.cwd,
                        startup_timeout=self.startup_timeout,
                        on_change=self._on_change,
                        asker=self.asker,
                    )
                    self.connections.append(connection)
                    tg.start_soon(connection.run)
                self._started.set()
        except Exception:  # a bug here must cost the MCP tools, never the whole agent
            log.exception("MCP servers stopped")
        finally:
            self._started.set()
            self._finished.set()

    def _on_change(self, connection: McpConnection, failure: str | None) -> None:
        self.version += 1
        if failure and connection.name not in self._reported:
            self._reported.add(connection.name)
            self._notices.append(failure)
        for listener in self.listeners:
            try:
                listener()
            except Exception:  # a listener's bug must not cost the server
                log.exception("MCP change listener failed")

    async def prepare(self) -> list[Note]:
        """Refresh changed tool lists; the first time, wait (bounded) for servers still starting.

        Returns the notices for the user: failures, and servers the turn goes on without.
        """
        if not self._waited:
            self._waited = True
            with anyio.move_on_after(self.startup_timeout):
                await self._started.wait()
                for connection in self.connections:
                    await connection.wait_started()
            for config in self.configs:
                starting = [c for c in self.connections if c.config is config]
                if (not starting or starting[0].state == "starting") and (
                    config.name not in self._reported
                ):
                    self._notices.append(
                        f"MCP server {config.name!r} is still starting after "
                        f"{self.startup_timeout:g} s; going on without it for now."
                    )
        for connection in self.connections:
            if connection.tools_stale:
                await connection.refresh_tools()
        notices, self._notices = self._notices, []
        return [mcp_note(notice) for notice in notices]

    def tools(self) -> list[McpTool]:
        """The tools of every server that works or may come back; rebuilt only on change."""
        if self._tools_version != self.version:
            from agent.mcp.tool import McpTool

            taken: set[str] = set()
            tools: list[McpTool] = []
            for connection in self.connections:
                if connection.state not in ("ready", "down", "starting"):
                    continue
                for definition in connection.tools:
                    name = tool_name(connection.name, definition.name, taken)
                    taken.add(name)
                    tools.append(McpTool(name, connection, definition))
            self._tools, self._tools_version = tools, self.version
        return self._tools

    def prompts(self) -> list[tuple[McpConnection, Any]]:
        """(server connection, mcp Prompt) for every server that works or may come back."""
        return [
            (connection, prompt)
            for connection in self.connections
            if connection.state in ("ready", "down")
            for prompt in connection.prompts
        ]

    async def refresh_prompts(self) -> None:
        """List again the prompts of servers that said theirs changed."""
        for connection in self.connections:
            if connection.prompts_stale:
                await connection.refresh_prompts()

    async def aclose(self) -> None:
        """Stop every server (stdio: stdin closed, then the process group signalled)."""
        self._closing = True
        async with anyio.create_task_group() as tg:
            for connection in self.connections:
                tg.start_soon(connection.aclose)
        if self._started.is_set():
            await self._finished.wait()
