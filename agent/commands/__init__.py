"""Slash commands: the built-ins (/help, /compact, /init, /undo, /model, /mode), the user's
command files and the MCP servers' prompts.

- `catalog`: the session's command list and the `available_commands_update` that carries it
  (cheap to import: `session/new` uses it);
- `files`, `frontmatter`: the command files of `.heron/commands/` and
  `~/.config/heron/commands/`;
- `parse`: a prompt → the command it invokes; `run`: the turn's entry; `builtins`: what each
  command does; `mcp`: MCP prompts as commands; `pickers`: a stand-in for agent.options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.session import Session


def announce_after_answer(session: Session) -> None:
    """List the session's commands right after the answer being prepared (session/new, load,
    resume): Zed drops updates for a session it does not know yet. Nothing is imported or
    read before that answer goes out."""
    connection = session.connection
    connection.after_answer(lambda: connection.start_soon(_announce, session))


async def _announce(session: Session) -> None:
    from agent.commands.live import refresh

    await refresh(session)
