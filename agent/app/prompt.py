"""A prompt arrives: at a session's first, the question whether to trust the project (when
nobody decided and it holds something inert); then a slash command runs its handler, with the
turn as its conversation; any other text is a model turn (`Turn.converse`).

Imported once the warm-up has imported the turn (see `agent.app.warmup`), never before the
`session/new` answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from agent.commands.live import announce
from agent.commands.parse import slash_word
from agent.commands.run import find_command, run_command
from agent.commands.trust import ask_first_time
from agent.turn import Turn

if TYPE_CHECKING:
    from agent.acp.protocol import PromptBlock, StopReason
    from agent.session import Session


async def run_prompt(
    session: Session, scope: anyio.CancelScope, blocks: list[PromptBlock]
) -> StopReason:
    """One prompt turn in `scope` (Session.run_turn queues it); its stop reason."""
    turn = Turn(session, scope)
    try:
        call = await find_command(session, blocks)
        if call is None and slash_word(blocks):  # maybe a command of the untrusted project
            await anyio.to_thread.run_sync(session.trust.look_for_inert)
        recorded = session.trust.should_ask() and not (call and call.command.name == "trust")
        if recorded:  # the question follows what the user typed, also in a replay
            turn.record_prompt(blocks)
            await ask_first_time(turn)  # trust the project? (agent.commands.trust)
            call = await find_command(session, blocks)  # its commands, if it is trusted now
        if call is not None:
            return await run_command(turn, call, record=not recorded)
        return await turn.converse(blocks, record=not recorded)
    finally:
        turn.close()
        announce(session)  # the turn may have written command files: the list follows
