"""Keeping the editor's command list current.

It is sent right after the answer that creates the session (Zed drops updates for a session
it does not know yet), then again whenever it changes: the command folders are scanned at
every prompt and after every turn (one `stat` per file, in a worker thread), and the MCP
servers' prompts are followed as the servers start, stop or change them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.commands.catalog import commands_of, send_if_changed
from agent.commands.mcp import prompt_commands, watch

if TYPE_CHECKING:
    from agent.commands.catalog import CommandHost


async def refresh(session: CommandHost) -> None:
    """Scan the command files again and tell the editor if the list changed."""
    commands = commands_of(session)
    if not commands.watching:
        commands.watching = True
        watch(session)
    await commands.refresh()
    commands.prompts = prompt_commands(session)
    send_if_changed(session)


def announce(session: CommandHost) -> None:
    """Refresh in the background (the scan reads files; nothing waits for it)."""
    session.connection.start_soon(refresh, session)
