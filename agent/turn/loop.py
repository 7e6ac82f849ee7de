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
from agent.context.history import note_unanswered
from agent.context.prompt import user_message
from agent.context.usage import chars_per_token
from agent.errors import ConfigBroken, NotConfigured
from agent.options.unnamed import name_the_model
from agent.steering import INJECTED, failed
from agent.store.replay import prompt_updates
from agent.turn.calls import ToolCalls
from agent.turn.model import Model, context_window
from agent.turn.updates import Updates

if TYPE_CHECKING:
    from agent.session import Session

CANCELLED = "Cancelled by the user."
# What the model reads as the answer to a request the turn ended without answering (see
# agent.context.history.note_unanswered): the next request must not send two user messages in
# a row, and the model should know the request was not dealt with.
UNANSWERED_CANCELLED = "[No answer: the user cancelled this request before it was answered.]"
UNANSWERED_FAILED = "[No answer: the request to the model failed before it was answered.]"
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
            per_token=lambda: chars_per_token(session.settings),
            told=session.told,
            notices=session.client_capabilities.session_notices,
            compaction=session.client_capabilities.session_compaction,
        )
        self.calls = ToolCalls(session, self.updates, scope)
        self.model = Model(session, self.updates, self.calls)
        self.asked = False  # the user's message is in the history, waiting for an answer
        session.undo.start_turn()  # file changes from here on belong to this turn (/undo)
        self.prompt_at = len(session.transcript.entries)  # where its prompt is recorded

    async def check_configured(self) -> None:
        """Raise ConfigBroken, NotConfigured or ModelUnnamed (agent.errors) unless a model can
        be asked; a server given without a model gets its only one (said once)."""
        settings = self.session.settings
        if settings.problem:
            raise ConfigBroken(settings.problem)
        if not settings.llm_configured:
            raise NotConfigured()
        if notice := await name_the_model(self.session):
            self.updates.say(notice)

    async def converse(self, blocks: list[PromptBlock], record: bool = True) -> StopReason:
        """The model ↔ tools loop on `blocks`; `record=False` when the transcript already
        shows what the user typed (a command's prompt is not what they typed)."""
        session = self.session
        await self.check_configured()
        session.history.append(await user_message(blocks, session.files))
        self.asked = True
        # The same for the whole session (rules, skills): a prompt cache keeps serving it.
        self.model.system = {"role": "system", "content": await session.system_prompt()}
        if record:
            self.record_prompt(blocks)
        await session.store_ready()
        self.updates.checkpoint()
        session.steering.start()
        for _ in range(session.settings.max_turn_requests):
            await self.take_steering()
            reply = await self.model.ask()
            if reply.calls and reply.finish_reason != "content_filter":
                await self.calls.run_all(reply.calls)
            stop = reply.stop_reason()
            if stop and not (stop == "end_turn" and session.steering.waiting):
                return stop
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
        """End the turn: fail what is still open, answer the model's dangling calls and the
        user's unanswered request, go quiet."""
        cancelled = self.scope.cancel_called
        reason = "The turn ended before this call ran."
        if cancelled:
            reason = CLOSED if self.session.closing else CANCELLED
        self.calls.close(reason)
        if self.asked:
            note = UNANSWERED_CANCELLED if cancelled else UNANSWERED_FAILED
            note_unanswered(self.session.history, note)
        self.session.steering.end()
        self.session.undo.end_turn()
        self.updates.closed = True
        self.updates.checkpoint()
