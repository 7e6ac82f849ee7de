"""A prompt turn: `run_prompt` queues it behind the session's running one and runs the loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from agent.commands.live import announce
from agent.turn.loop import Turn

if TYPE_CHECKING:
    from agent.acp.protocol import PromptBlock, StopReason
    from agent.session import Session

__all__ = ["Turn", "run_prompt"]


async def run_prompt(session: Session, blocks: list[PromptBlock]) -> StopReason:
    """Answer a `session/prompt`: the turn's stop reason, `cancelled` if it was cancelled."""

    async def turn(scope: anyio.CancelScope) -> StopReason:
        running = Turn(session, scope)
        try:
            return await running.run(blocks)
        finally:
            running.close()
            announce(session)  # the turn may have written command files: the list follows

    return await session.run_turn(turn)
