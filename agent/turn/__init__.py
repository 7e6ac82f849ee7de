"""A prompt turn: `run_prompt` queues it behind the session's running one and runs the loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

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
            if _is_undo(blocks):
                return await _undo(running, blocks)
            return await running.run(blocks)
        finally:
            running.close()

    return await session.run_turn(turn)


# TEMPORARY, replaced at merge by the command registry (agent/commands): a prompt that is
# exactly `/undo` runs agent.undo instead of the model.
def _is_undo(blocks: list[PromptBlock]) -> bool:
    from agent.acp.protocol import TextBlockIn

    return (
        len(blocks) == 1
        and isinstance(blocks[0], TextBlockIn)
        and blocks[0].text.strip() == "/undo"
    )


async def _undo(running: Turn, blocks: list[PromptBlock]) -> StopReason:
    from agent.undo.command import run_undo

    running.record_prompt(blocks)
    running.updates.checkpoint()
    await run_undo(running)
    return "end_turn"
