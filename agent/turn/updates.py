"""What a turn shows the editor: its `session/update`s, through the session's one way out
(`Session.notify`).

Every update goes to the editor and into the session's transcript (for `session/load`); after
`closed` is set nothing more goes out, so no update of a turn follows its answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent.acp.protocol import (
    AgentMessageChunk,
    AgentThoughtChunk,
    SessionUpdate,
    TextContent,
)
from agent.context.usage import CAUTIOUS, tokens_used


class Updates:
    def __init__(
        self,
        notify: Callable[..., None],
        save: Callable[[], str | None],
        window: Callable[[], Awaitable[int]],
        drain: Callable[[], Awaitable[None]],
        tool_specs: Callable[[], list[dict[str, Any]]],
        per_token: Callable[[], float] = lambda: CAUTIOUS,
    ) -> None:
        self.notify = notify  # Session.notify: the one way out
        self.save = save  # Session.save: a step boundary; a notice if it cannot be saved
        self.window = window  # the context window's size, in tokens
        self.drain = drain  # waits while the editor reads slowly (back-pressure)
        self.tool_specs = tool_specs  # the tools a request sends (they count in the window)
        self.per_token = per_token  # characters per token, for estimates (agent.context.usage)
        self.closed = False

    def emit(self, update: SessionUpdate) -> None:
        if self.closed:
            return
        if type(update) in (AgentMessageChunk, AgentThoughtChunk):
            # Streamed text, one per delta: its dump spelled out, without pydantic's walk.
            content = {"type": "text", "text": update.content.text}  # type: ignore[union-attr]
            dumped = {"sessionUpdate": update.session_update, "content": content}
        else:
            dumped = update.dump()
        self.notify(dumped, record=True)

    def say(self, text: str) -> None:
        """A line of agent text (notices, summaries) as the model's own answer would appear."""
        self.emit(AgentMessageChunk(content=TextContent(text=text)))

    def checkpoint(self) -> None:
        """A step boundary: the session saves what changed (never per streamed delta)."""
        if notice := self.save():
            self.say(notice)

    async def report_usage(
        self, usage: dict[str, Any] | None, messages: list[dict[str, Any]], reply: str
    ) -> None:
        """usage_update: how full the context is after this response (agent.context.usage).
        `messages` is what a request sends, the system message included."""
        used = tokens_used(usage, messages, reply, self.tool_specs(), self.per_token())
        await self.report_tokens(used)

    async def report_tokens(self, used: int) -> None:
        """usage_update: `used` tokens of the window."""
        size = await self.window()
        if self.closed:
            return
        self.notify({"sessionUpdate": "usage_update", "used": used, "size": size})
