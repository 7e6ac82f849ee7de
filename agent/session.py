"""One session's state: the conversation, the mode, remembered permissions, the running turn.

Everything here is plain data that a later store (SQLite) can save and `session/load` replay:
`history` is the model's view (OpenAI chat messages), `transcript` the editor's view (the
session updates that were sent, consecutive chunks merged).
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agent.config import Settings
from agent.permissions import PermissionMemory
from agent.protocol import ClientCapabilities, PromptBlock, StopReason
from agent.tools import builtin_tools
from agent.tools.base import Tool, ToolContext
from agent.tools.files_backend import Files

if TYPE_CHECKING:
    from agent.store.saver import Saver
    from agent.wire import Connection

log = logging.getLogger("heron.session")

_MERGED_CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


class Session:
    def __init__(
        self,
        *,
        session_id: str,
        cwd: Path,
        settings: Settings,
        connection: Connection,
        client_capabilities: ClientCapabilities,
        mcp_servers: list[dict[str, Any]],
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        self.settings = settings
        self.connection = connection
        self.client_capabilities = client_capabilities
        self.mcp_servers = mcp_servers  # kept for MCP support, not used yet
        self.mode = settings.mode
        self.history: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self.permissions = PermissionMemory()
        self.tools: dict[str, Tool[Any]] = {tool.name: tool for tool in builtin_tools()}
        fs = client_capabilities.fs
        self.files = Files(session_id, connection.request, fs.read_text_file, fs.write_text_file)
        self.tool_context = ToolContext(
            cwd=cwd,
            session_id=session_id,
            files=self.files,
            client_request=connection.request,
            client_terminal=client_capabilities.terminal,
            settings=settings,
        )
        self._tool_specs: list[dict[str, Any]] | None = None
        self._running: anyio.CancelScope | None = None
        self._turn_lock = anyio.Lock()
        self._call_ids: set[str] = set()
        self._call_counter = itertools.count(1)
        self.additional_directories: list[Path] = []
        self.title: str | None = None
        self.saver: Saver | None = None  # set by the server: saves each step (agent.store)

    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools as OpenAI functions; built once, they only change when the tools do."""
        if self._tool_specs is None:
            self._tool_specs = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema(),
                    },
                }
                for tool in self.tools.values()
            ]
        return self._tool_specs

    @property
    def roots(self) -> list[Path]:
        """The workspace: paths inside need no extra permission."""
        return [self.cwd]

    async def prompt(self, blocks: list[PromptBlock]) -> StopReason:
        from agent.turn import Turn

        if self._running is not None:
            # Zed may send a new prompt right after Stop, without a cancel: the old turn ends
            # as cancelled (its answer goes out first), then this one runs.
            self._running.cancel()
        async with self._turn_lock:
            scope = anyio.CancelScope()
            turn = Turn(self, scope)
            self._running = scope
            try:
                with scope:
                    stop_reason = await turn.run(blocks)
                if scope.cancelled_caught:
                    stop_reason = "cancelled"
                return stop_reason
            finally:
                turn.close()
                self._running = None

    def cancel(self) -> None:
        if self._running is not None:
            self._running.cancel()

    async def wait_idle(self) -> None:
        """Wait until no turn runs (a cancelled one has answered and saved its last step)."""
        async with self._turn_lock:
            pass

    async def store_ready(self) -> None:
        """Wait until the store is open, so a failure to open it can be told in this turn."""
        if self.saver is not None:
            await self.saver.store.ready()

    def save(self) -> str | None:
        """A step boundary: save what changed. Returns a notice for the user, once, if the
        conversation cannot be saved."""
        return self.saver.checkpoint(self) if self.saver is not None else None

    def new_call_id(self, model_id: str) -> str:
        """The model's call id, made unique in the session (some servers reuse `call_0`)."""
        call_id = model_id
        while not call_id or call_id in self._call_ids:
            call_id = f"{model_id or 'call'}_{next(self._call_counter)}"
        self._call_ids.add(call_id)
        return call_id

    def record(self, update: dict[str, Any]) -> None:
        """Keep a sent update for replay, merging consecutive chunks of one kind."""
        kind = update.get("sessionUpdate")
        last = self.transcript[-1] if self.transcript else None
        if (
            kind in _MERGED_CHUNKS
            and last is not None
            and last.get("sessionUpdate") == kind
            and last["content"].get("type") == "text" == update["content"].get("type")
        ):
            last["content"] = {
                **last["content"],
                "text": last["content"]["text"] + update["content"]["text"],
            }
            return
        self.transcript.append(update)
