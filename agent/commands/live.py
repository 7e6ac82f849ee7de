"""Keeping the editor's command list current.

It is sent right after the answer that creates the session (Zed drops updates for a session
it does not know yet), then again whenever it changes: the command folders are scanned at
every prompt and after every turn (one `stat` per file, in a worker thread), the MCP
servers' prompts are followed as the servers start, stop or change them, and the skills are
the session's (found once, again when its trust changes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.commands.catalog import commands_of, send_if_changed
from agent.commands.command import Command
from agent.commands.files import MAX_DESCRIPTION, clean
from agent.commands.mcp import prompt_commands, watch

if TYPE_CHECKING:
    from agent.commands.catalog import CommandHost
    from agent.skills.discovery import SkillSet


async def refresh(session: CommandHost) -> None:
    """Scan the command files again and tell the editor if the list changed."""
    commands = commands_of(session)
    if not commands.watching:
        commands.watching = True
        watch(session)
    await commands.refresh()
    commands.prompts = prompt_commands(session)
    commands.skills = skill_commands(await session.find_skills())
    send_if_changed(session)


def announce(session: CommandHost) -> None:
    """Refresh in the background (the scan reads files; nothing waits for it)."""
    session.connection.start_soon(refresh, session)


def skill_commands(skills: SkillSet) -> list[Command]:
    """Each skill the user may start as `/name`: a model turn with its instructions loaded."""
    return [
        Command(
            skill.name,
            clean(skill.description, MAX_DESCRIPTION),
            "optional: the request",
            "skill",
            skill=skill,
            needs_model=True,
        )
        for skill in skills.skills
        if skill.for_user
    ]
