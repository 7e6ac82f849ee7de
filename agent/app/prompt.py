"""A prompt arrives: a slash command runs its handler, with the turn as its conversation; any
other text is a model turn (`Turn.converse`).

Imported once the warm-up has imported the turn (see `agent.app.warmup`), never before the
`session/new` answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from agent.commands.live import announce
from agent.commands.run import find_command, run_command
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
        if call is not None:
            return await run_command(turn, call)
        return await turn.converse(blocks)
    finally:
        turn.close()
        announce(session)  # the turn may have written command files: the list follows
