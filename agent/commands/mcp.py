"""The MCP servers' prompts as slash commands: `/server.prompt`.

Servers start in the background after `session/new`; each time one becomes ready, fails, or
says its prompts changed (`prompts/list_changed`), the manager tells its listeners and the
editor gets the new list. Nothing here imports the MCP SDK: the prompts are read from the
manager's connections (agent.mcp).
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

from agent.commands.catalog import commands_of, send_if_changed
from agent.commands.command import Command, PromptRef
from agent.commands.files import MAX_DESCRIPTION, MAX_HINT, clean

if TYPE_CHECKING:
    from agent.commands.catalog import CommandHost

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_PROMPTS = 200  # per session: a server with thousands of prompts does not flood the list


def prompt_commands(session: CommandHost) -> list[Command]:
    """The session's MCP prompts as commands, in server order."""
    if session.mcp is None:
        return []
    commands: list[Command] = []
    for connection, prompt in session.mcp.prompts()[:MAX_PROMPTS]:
        server = _UNSAFE.sub("_", connection.name).strip("._-") or "mcp"
        name = f"{server}.{_UNSAFE.sub('_', prompt.name).strip('._-') or 'prompt'}"
        arguments = tuple((a.name, bool(a.required)) for a in prompt.arguments or ())
        hint = " ".join(n if required else f"[{n}]" for n, required in arguments)
        description = prompt.description or prompt.title or f"Prompt from MCP server {server}"
        ref = PromptRef(connection.name, prompt.name, arguments)
        commands.append(
            Command(
                name,
                clean(description, MAX_DESCRIPTION),
                clean(hint, MAX_HINT) or None,
                "mcp",
                prompt=ref,
                needs_model=True,
            )
        )
    return commands


def watch(session: CommandHost) -> None:
    """Keep the editor's list in step with the servers' prompts."""
    if session.mcp is None:
        return

    def changed() -> None:
        session.connection.start_soon(_changed, session)

    session.mcp.listeners.append(changed)


async def _changed(session: CommandHost) -> None:
    if session.mcp is None:
        return  # closed since
    await session.mcp.refresh_prompts()
    commands_of(session).prompts = prompt_commands(session)
    send_if_changed(session)


def prompt_arguments(ref: PromptRef, text: str) -> tuple[dict[str, str], list[str]]:
    """The typed text as the prompt's arguments, and the names of required ones missing.

    One argument takes the whole text; several take a word each (shell-like quoting), the
    last one the rest.
    """
    names = [name for name, _ in ref.arguments]
    values: dict[str, str] = {}
    if len(names) == 1:
        if text:
            values[names[0]] = text
    elif names:
        try:
            words = shlex.split(text)
        except ValueError:  # an unclosed quote: plain words
            words = text.split()
        for index, name in enumerate(names):
            if index >= len(words):
                break
            values[name] = " ".join(words[index:]) if index == len(names) - 1 else words[index]
    missing = [name for name, required in ref.arguments if required and name not in values]
    return values, missing


def find_connection(session: CommandHost, server: str) -> Any:
    if session.mcp is None:
        return None
    return next((c for c in session.mcp.connections if c.name == server), None)
