"""A session's slash commands: the built-ins, the user's command files, the user's skills, the
MCP servers' prompts (the user's, through the editor), then the project's command files and
the project's skills (both only while the project is trusted: agent.trust); and the
`available_commands_update` that lists them. In a name clash the earlier wins: a cloned
repository cannot replace what the user set up.

Importing this module is cheap (no pydantic, no model client, no MCP SDK).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from agent.commands.command import Command
from agent.commands.files import CommandFolder, UserCommand
from agent.config import default_config_path
from agent.trust.inventory import PROJECT_COMMANDS

if TYPE_CHECKING:
    from agent.acp.wire import Connection
    from agent.mcp.manager import McpManager
    from agent.skills.discovery import SkillSet
    from agent.trust.state import WorkspaceTrust

log = logging.getLogger("heron.commands")

SCAN_TIMEOUT = 2.0  # seconds a prompt waits for a slow file system before using the last list
PROJECT_FOLDER = PROJECT_COMMANDS


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
    Command(
        "trust",
        "Show whether this folder is trusted, and change it",
        "optional: always, session, off or never",
    ),
    Command("rules", "Show the rules files and skills in force, and what was skipped"),
)


def user_folder() -> Path:
    """`$XDG_CONFIG_HOME/heron/commands` (`~/.config/heron/commands`)."""
    return default_config_path().parent / "commands"


class CommandSet:
    """The commands one session offers, kept current by `refresh()`."""

    def __init__(self, cwd: Path, trusted: Callable[[], bool] = lambda: True) -> None:
        self.folders = (
            CommandFolder(cwd / PROJECT_FOLDER, "project", confine=cwd),
            CommandFolder(user_folder(), "user"),
        )
        self.trusted = trusted  # the project's trust, read at each scan (agent.trust)
        self.files: list[UserCommand] = []  # the command files of both folders
        self.prompts: list[Command] = []  # the MCP servers' prompts (agent.commands.mcp)
        self.skills: list[Command] = []  # the skills (agent.skills), user's and project's
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

        def skills(scope: str) -> list[Command]:
            return [c for c in self.skills if c.skill is not None and c.skill.scope == scope]

        found: dict[str, Command] = {}
        for command in (
            *BUILTINS,
            *of("user"),
            *skills("user"),
            *self.prompts,
            *of("project"),
            *skills("project"),
        ):
            found.setdefault(command.name, command)
        return found

    def shadowed_skills(self) -> list[tuple[Command, Command]]:
        """(skill, the command that holds its name): skills without a slash command."""
        commands = self.commands()
        return [
            (skill, commands[skill.name])
            for skill in self.skills
            if commands.get(skill.name) is not skill
        ]

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
                if folder.source == "project" and not self.trusted():
                    continue  # inert until the user trusts the project (agent.trust)
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
    def trust(self) -> WorkspaceTrust:
        """Whether the project is trusted (its command files and skills are in use)."""

    async def find_skills(self) -> SkillSet:
        """The session's skills (`Session.find_skills`)."""

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
        trust = session.trust
        session.commands = CommandSet(session.cwd, lambda: trust.trusted)
    return session.commands


def send_if_changed(session: CommandHost) -> None:
    """Send `available_commands_update` if the editor's list is not the current one."""
    commands = commands_of(session)
    listing = commands.listing()
    if listing == commands.sent:
        return
    commands.sent = listing
    session.notify({"sessionUpdate": "available_commands_update", "availableCommands": listing})
