"""A prompt turn: the loop (loop.py), one model request (model.py), one tool call (calls.py),
asking permission (permission.py) and the updates it sends (updates.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from agent.commands.live import announce
from agent.turn.loop import Turn

if TYPE_CHECKING:
    from agent.acp.protocol import PromptBlock, StopReason
    from agent.session import Session

__all__ = ["Turn", "run_turn"]


async def run_turn(
    session: Session, scope: anyio.CancelScope, blocks: list[PromptBlock]
) -> StopReason:
    """One prompt turn in `scope` (Session.run_turn queues it); its stop reason."""
    turn = Turn(session, scope)
    try:
        return await turn.run(blocks)
    finally:
        turn.close()
        announce(session)  # the turn may have written command files: the list follows
