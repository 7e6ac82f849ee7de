"""The turn's entry into commands: is this prompt a command, and if so run it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agent.acp.protocol import PromptBlock, StopReason
from agent.commands.builtins import BUILTIN_HANDLERS, Handler
from agent.commands.catalog import commands_of
from agent.commands.live import refresh
from agent.commands.parse import Invocation, parse
from agent.commands.prompts import mcp_prompt, user_command

if TYPE_CHECKING:
    from agent.turn.loop import Turn

log = logging.getLogger("heron.commands")


async def run_command(turn: Turn, blocks: list[PromptBlock]) -> StopReason | None:
    """Run the command the prompt invokes and return the turn's stop reason; None when the
    prompt is not a command (it goes to the model as typed)."""
    session = turn.session
    await refresh(session)  # command files added or changed since: usable now, and listed
    call = parse(blocks, commands_of(session))
    if call is None:
        return None
    log.info("session %s: /%s (%s)", session.id, call.command.name, call.command.source)
    if call.command.needs_model:
        turn.check_configured()
    turn.record_prompt(blocks)  # what the user typed, so session/load replays it
    await session.store_ready()
    turn.updates.checkpoint()
    stop_reason = await handler_for(call)(turn, call)
    turn.updates.checkpoint()
    return stop_reason


def handler_for(call: Invocation) -> Handler:
    if call.command.file is not None:
        return user_command
    if call.command.prompt is not None:
        return mcp_prompt
    return BUILTIN_HANDLERS[call.command.name]
