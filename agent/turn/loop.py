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

from agent.acp.protocol import PromptBlock, StopReason
from agent.context.prompt import system_prompt, user_message
from agent.errors import ConfigBroken, NotConfigured
from agent.steering import INJECTED, failed
from agent.store.replay import prompt_updates
from agent.turn.calls import ToolCalls
from agent.turn.model import Model, context_window
from agent.turn.updates import Updates

if TYPE_CHECKING:
    from agent.session import Session

CANCELLED = "Cancelled by the user."
CLOSED = "The session was closed."


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
            told=session.told,
            notices=session.client_capabilities.session_notices,
            compaction=session.client_capabilities.session_compaction,
        )
        self.calls = ToolCalls(session, self.updates, scope)
        self.model = Model(session, self.updates, self.calls)
        session.undo.start_turn()  # file changes from here on belong to this turn (/undo)
        self.prompt_at = len(session.transcript.entries)  # where its prompt is recorded

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
        # Read AGENTS.md once per turn, not on every model request of the turn.
        prompt = await system_prompt(
            session.cwd,
            confine=session.mode != "full-access",
            additional_directories=session.additional_directories,
            today=session.started_on,
        )
        self.model.system = {"role": "system", "content": prompt}
        if record:
            self.record_prompt(blocks)
        await session.store_ready()
        self.updates.checkpoint()
        session.steering.start()
        for _ in range(session.settings.max_turn_requests):
            await self.take_steering()
            reply = await self.model.ask()
            if reply.finish_reason == "length":
                return "max_tokens"
            if reply.finish_reason == "content_filter":
                return "refusal"
            if not reply.calls and not session.steering.waiting:
                return "end_turn"
            await self.calls.run_all(reply.calls)
        return "max_turn_requests"

    async def take_steering(self) -> None:
        """The boundary (agent.steering): messages sent while the model worked go in now,
        each a user message of its own, shown, recorded, in the history."""
        steers = self.session.steering.take()
        try:
            for steer in steers:
                self.session.history.append(await user_message(steer.blocks, self.session.files))
                self.updates.show_user(prompt_updates(steer.blocks))
                steer.settle(INJECTED)
        finally:
            for steer in steers:  # the turn failed or was cancelled before taking it in
                steer.settle(failed("the turn ended before the message could be added"))
        if steers:
            self.updates.checkpoint()

    def record_prompt(self, blocks: list[PromptBlock]) -> None:
        """The user's prompt in the transcript, so `session/load` replays it."""
        self.prompt_at = len(self.session.transcript.entries)
        for update in self.updates.user_message(prompt_updates(blocks)):
            self.session.transcript.record(update)

    def close(self) -> None:
        """End the turn: fail what is still open, answer the model's dangling calls, go quiet."""
        reason = "The turn ended before this call ran."
        if self.scope.cancel_called:
            reason = CLOSED if self.session.closing else CANCELLED
        self.calls.close(reason)
        self.session.steering.end()
        self.session.undo.end_turn()
        self.updates.closed = True
        self.updates.checkpoint()
