"""A session's slash commands: the built-ins, the user's command files, the MCP servers'
prompts (the user's, through the editor), then the project's command files; and the
`available_commands_update` that lists them. In a name clash the earlier wins: a cloned
repository cannot replace what the user set up.

Importing this module is cheap (no pydantic, no model client, no MCP SDK).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from agent.commands.command import Command
from agent.commands.files import CommandFolder, UserCommand
from agent.config import default_config_path

if TYPE_CHECKING:
    from agent.acp.wire import Connection
    from agent.mcp.manager import McpManager

log = logging.getLogger("heron.commands")

SCAN_TIMEOUT = 2.0  # seconds a prompt waits for a slow file system before using the last list
PROJECT_FOLDER = Path(".heron") / "commands"


BUILTINS = (
    Command("help", "List the available commands"),
    Command(
        "compact",
        "Summarize the conversation now to free context",
        "optional: what the summary should focus on",
        needs_model=True,
    ),
    Command("init", "Study the project and write or update AGENTS.md", needs_model=True),
    Command("undo", "Revert the file changes of the last turn that changed files"),
    Command(
        "rewind",
        "List your messages, or go back to just before message N (conversation and files)",
        "optional: the message's number",
    ),
    Command("model", "Show the model, or switch to another", "model name"),
    Command(
        "mode",
        "Show the permission mode, or switch to another",
        "read-only, ask, auto, accept-edits or full-access",
    ),
)


def user_folder() -> Path:
    """`$XDG_CONFIG_HOME/heron/commands` (`~/.config/heron/commands`)."""
    return default_config_path().parent / "commands"


class CommandSet:
    """The commands one session offers, kept current by `refresh()`."""

    def __init__(self, cwd: Path) -> None:
        self.folders = (
            CommandFolder(cwd / PROJECT_FOLDER, "project", confine=cwd),
            CommandFolder(user_folder(), "user"),
        )
        self.files: list[UserCommand] = []  # the command files of both folders
        self.prompts: list[Command] = []  # the MCP servers' prompts (agent.commands.mcp)
        self.sent: list[dict[str, Any]] | None = None  # the list the editor has
        self.watching = False  # told when the MCP servers' prompts change
        self._lock = anyio.Lock()
        self._scanning = False  # a scan runs in a worker thread (maybe abandoned, stuck)

    def commands(self) -> dict[str, Command]:
        """By name, in the order the editor lists them. In a name clash the first wins: a
        built-in, then the user's command files, the MCP prompts, the project's files last."""

        def of(source: str) -> list[Command]:
            return [
                Command(f.name, f.description, f.hint, f.source, file=f, needs_model=True)
                for f in self.files
                if f.source == source
            ]

        found: dict[str, Command] = {}
        for command in (*BUILTINS, *of("user"), *self.prompts, *of("project")):
            found.setdefault(command.name, command)
        return found

    def find(self, name: str) -> Command | None:
        return self.commands().get(name)

    def listing(self) -> list[dict[str, Any]]:
        return [command.listing() for command in self.commands().values()]

    async def refresh(self) -> None:
        """Scan the command folders again (changed files are re-read)."""
        async with self._lock:
            if self._scanning:
                return  # an earlier scan is stuck on a slow file system: keep the last list
            self._scanning = True
            with anyio.move_on_after(SCAN_TIMEOUT):
                self.files = await anyio.to_thread.run_sync(self._scan, abandon_on_cancel=True)

    def _scan(self) -> list[UserCommand]:
        try:
            found: list[UserCommand] = []
            for folder in self.folders:
                try:
                    found.extend(folder.scan().values())
                except Exception:  # a bug here must not cost the user their prompt
                    log.exception("scanning %s failed", folder.path)
            return found
        finally:
            self._scanning = False


class CommandHost(Protocol):
    """What the command list needs of its session: a Protocol, so that this package does not
    import the session (which sits above it). `agent.session.Session` satisfies it."""

    commands: CommandSet | None  # made on first use (`commands_of`)

    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> Path: ...

    @property
    def connection(self) -> Connection: ...

    @property
    def mcp(self) -> McpManager | None: ...

    @property
    def closed(self) -> bool: ...

    def notify(self, update: dict[str, Any]) -> None:
        """Send a `session/update` about this session (`Session.notify`)."""


def commands_of(session: CommandHost) -> CommandSet:
    if session.commands is None:
        session.commands = CommandSet(session.cwd)
    return session.commands


def send_if_changed(session: CommandHost) -> None:
    """Send `available_commands_update` if the editor's list is not the current one."""
    commands = commands_of(session)
    listing = commands.listing()
    if listing == commands.sent:
        return
    commands.sent = listing
    session.notify({"sessionUpdate": "available_commands_update", "availableCommands": listing})
