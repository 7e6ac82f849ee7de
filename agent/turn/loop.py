"""The model ↔ tools loop of one prompt turn.

    user prompt → model (streamed) → tool calls? → permission → run → results → model → …

A turn ends when the model stops asking for tools (`end_turn`), runs out of tokens
(`max_tokens`), is refused (`refusal`), exceeds the request cap (`max_turn_requests`) or is
cancelled. Every update of the turn goes out before the turn's answer and none after: `close()`
fails the tool calls still open and silences the updates. One model request is
`agent.turn.model`, one tool call `agent.turn.calls`, asking permission `agent.turn.permission`.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import anyio

from agent.acp.protocol import (
    PromptBlock,
    ResourceLinkIn,
    StopReason,
    TextBlockIn,
    TextContent,
    UserMessageChunk,
)
from agent.context.prompt import user_message
from agent.errors import ConfigBroken, NotConfigured
from agent.store.replay import user_link_update
from agent.turn.calls import ToolCalls
from agent.turn.model import Model, context_window
from agent.turn.updates import Updates

if TYPE_CHECKING:
    from agent.session import Session

CANCELLED = "Cancelled by the user."


class Turn:
    def __init__(self, session: Session, scope: anyio.CancelScope) -> None:
        self.session = session
        self.scope = scope
        self.updates = Updates(
            notify=session.notify,
            save=session.save,
            window=partial(context_window, session),
            drain=session.connection.drain,
            tool_specs=session.tool_specs,
        )
        self.calls = ToolCalls(session, self.updates, scope)
        self.model = Model(session, self.updates, self.calls)
        session.undo.start_turn()  # file changes from here on belong to this turn (/undo)

    def check_configured(self) -> None:
        """Raise ConfigBroken or NotConfigured (agent.errors) unless a model can be asked."""
        settings = self.session.settings
        if settings.problem:
            raise ConfigBroken(settings.problem)
        if not settings.llm_configured:
            raise NotConfigured()

    async def converse(self, blocks: list[PromptBlock], record: bool = True) -> StopReason:
        """The model ↔ tools loop on `blocks`; `record=False` when the transcript already
        shows what the user typed (a command's prompt is not what they typed)."""
        session = self.session
        self.check_configured()
        session.history.append(await user_message(blocks, session.files))
        # The same for the whole session (rules, skills): a prompt cache keeps serving it.
        instructions = await session.find_instructions()
        self.model.system = {"role": "system", "content": instructions.prompt}
        if record:
            self.record_prompt(blocks)
        await session.store_ready()
        self.updates.checkpoint()
        for _ in range(session.settings.max_turn_requests):
            reply = await self.model.ask()
            if reply.finish_reason == "length":
                return "max_tokens"
            if reply.finish_reason == "content_filter":
                return "refusal"
            if not reply.calls:
                return "end_turn"
            await self.calls.run_all(reply.calls)
        return "max_turn_requests"

    def record_prompt(self, blocks: list[PromptBlock]) -> None:
        """The user's prompt in the transcript, so `session/load` replays it."""
        for block in blocks:
            if isinstance(block, TextBlockIn):
                self.session.transcript.record(
                    UserMessageChunk(content=TextContent(text=block.text)).dump()
                )
            elif isinstance(block, ResourceLinkIn):
                self.session.transcript.record(
                    user_link_update(block.uri, block.name, block.title, block.mime_type)
                )

    def close(self) -> None:
        """End the turn: fail what is still open, answer the model's dangling calls, go quiet."""
        reason = CANCELLED if self.scope.cancel_called else "The turn ended before this call ran."
        self.calls.close(reason)
        self.session.undo.end_turn()
        self.updates.closed = True
        self.updates.checkpoint()
