"""Is this prompt a command (`find_command`), and running it (`run_command`); `agent.app.prompt`
decides between a command and a model turn."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agent.acp.protocol import PromptBlock, StopReason
from agent.commands.builtins import BUILTIN_HANDLERS, Handler
from agent.commands.catalog import commands_of
from agent.commands.live import refresh
from agent.commands.parse import Invocation, parse
from agent.commands.prompts import mcp_prompt, skill_command, user_command

if TYPE_CHECKING:
    from agent.commands.catalog import CommandHost
    from agent.commands.conversation import Conversation

log = logging.getLogger("heron.commands")


async def find_command(session: CommandHost, blocks: list[PromptBlock]) -> Invocation | None:
    """The command the prompt invokes; None when it is not a command (it goes to the model as
    typed). The command files are scanned first: one added or changed since is usable now."""
    await refresh(session)  # ... and listed
    return parse(blocks, commands_of(session))


async def run_command(turn: Conversation, call: Invocation, record: bool = True) -> StopReason:
    """Run the invoked command in the running turn; the turn's stop reason. `record=False`
    when the transcript already shows what the user typed."""
    session = turn.session
    log.info("session %s: /%s (%s)", session.id, call.command.name, call.command.source)
    if call.command.needs_model:
        await turn.check_configured()
    if record:
        turn.record_prompt(call.blocks)  # what the user typed, so session/load replays it
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
    if call.command.skill is not None:
        return skill_command
    return BUILTIN_HANDLERS[call.command.name]
