"""Steering a running turn: a message the user sends while the model works goes into that turn
instead of cancelling it (`_session/steering`, the extension codex-acp and claude-agent-acp
answer, advertised as `_meta.steering.supported` in the `initialize` answer).

A session's `SteeringInbox` is open while a model turn runs (`agent.turn.loop`). A message
waits there, in order with the others, until the turn's next boundary: after the tool calls
now running have finished, before the next model request (never inside a streamed answer,
never between a tool call and its result). Then it is shown as a `user_message_chunk` of its
own, recorded in the transcript and the history, and its request is answered `injected`. A
turn that ends with messages still waiting answers them `promptRequired` (the client sends
them as a prompt: nothing is lost), one being cancelled answers them `failed` with the
reason, and so does a steer that arrives during the cancel. With no model turn running the
answer is `promptRequired` with the reason `noRunningTurn`, claude-agent-acp's answer for
clients that opt into it, and Heron's for every client: a turn that no `session/prompt`
answers would have nowhere to report its end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

INJECTED = {"outcome": "injected"}
MAX_WAITING = 64  # messages waiting for one boundary: more are refused, never held unbounded
PROMPT_REQUIRED = {"outcome": "promptRequired", "reason": "noRunningTurn"}
CANCELLING = (
    "The turn is being cancelled, so the message was not added to it. Send it as a new prompt."
)


def failed(reason: str) -> dict[str, Any]:
    return {"outcome": "failed", "reason": reason}


@dataclass
class Steer:
    """One message waiting for the turn's next boundary, and its answer once known."""

    blocks: list[Any]  # the prompt's content blocks (agent.acp.protocol)
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: dict[str, Any] = field(default_factory=dict)

    def settle(self, answer: dict[str, Any]) -> None:
        if not self.answered.is_set():
            self.answer = answer
            self.answered.set()


class SteeringInbox:
    def __init__(self) -> None:
        self.open = False  # a model turn runs and takes messages at its boundaries
        self.cancelling = False
        self._waiting: list[Steer] = []

    @property
    def waiting(self) -> bool:
        return bool(self._waiting)

    async def submit(self, blocks: list[Any]) -> dict[str, Any]:
        """A message for the running turn; the answer once the turn took it or ended."""
        if self.cancelling:
            return failed(CANCELLING)
        if not self.open:
            return dict(PROMPT_REQUIRED)
        if len(self._waiting) >= MAX_WAITING:
            return failed(f"{MAX_WAITING} messages already wait for this turn's next step")
        steer = Steer(blocks)
        self._waiting.append(steer)
        try:
            await steer.answered.wait()
        finally:
            if steer in self._waiting:  # the client gave up on it ($/cancel_request)
                self._waiting.remove(steer)
        return steer.answer

    def take(self) -> list[Steer]:
        """The messages that arrived since the last boundary, in order (the turn answers
        them once they are in)."""
        taken, self._waiting = self._waiting, []
        return taken

    def start(self) -> None:
        """A model turn begins."""
        self.open, self.cancelling = True, False

    def cancel(self) -> None:
        """The turn is being cancelled: what waits fails, and so does what comes meanwhile."""
        if self.open:
            self.cancelling = True
        for steer in self.take():
            steer.settle(failed(CANCELLING))

    def end(self) -> None:
        """The turn has ended: what still waits goes back to the client as a prompt to send."""
        self.open, self.cancelling = False, False
        for steer in self.take():
            steer.settle(dict(PROMPT_REQUIRED))
