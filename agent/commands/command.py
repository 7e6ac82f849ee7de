"""One slash command as the editor lists it and the turn runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.commands.files import UserCommand

if TYPE_CHECKING:
    from agent.skills.discovery import Skill


@dataclass(frozen=True)
class PromptRef:
    """An MCP prompt: which server, which prompt, its arguments as (name, required)."""

    server: str
    name: str
    arguments: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class Command:
    name: str  # without the slash
    description: str
    hint: str | None = None  # set when the command takes text after its name
    source: str = "built-in"  # built-in, project, user, mcp or skill
    file: UserCommand | None = None  # a command file's prompt
    prompt: PromptRef | None = None  # an MCP server's prompt
    skill: Skill | None = None  # a skill (agent.skills): its instructions, then the request
    needs_model: bool = False  # it asks the model: fails like a prompt when none is set up

    def listing(self) -> dict[str, Any]:
        """As an ACP `AvailableCommand`."""
        entry: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.hint:
            entry["input"] = {"hint": self.hint}
        return entry
