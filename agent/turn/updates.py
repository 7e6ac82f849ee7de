"""The one place a turn's `session/update` notifications leave from.

Every update goes to the editor and into the session's transcript (for `session/load`); after
`closed` is set nothing more goes out, so no update of a turn follows its answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.acp.protocol import (
    AgentMessageChunk,
    AgentThoughtChunk,
    SessionNotification,
    SessionUpdate,
    TextContent,
)
from agent.context.usage import context_size, tokens_used

if TYPE_CHECKING:
    from agent.session import Session


class Updates:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.closed = False

    def emit(self, update: SessionUpdate) -> None:
        if self.closed:
            return
        if type(update) in (AgentMessageChunk, AgentThoughtChunk):
            # Streamed text, one per delta: its dump spelled out, without pydantic's walk.
            content = {"type": "text", "text": update.content.text}  # type: ignore[union-attr]
            message: dict[str, Any] = {
                "sessionId": self.session.id,
                "update": {"sessionUpdate": update.session_update, "content": content},
            }
        else:
            message = SessionNotification(session_id=self.session.id, update=update).dump()
        self.session.notify(message["update"])
        self.session.record(message["update"])

    def say(self, text: str) -> None:
        """A line of agent text (notices, summaries) as the model's own answer would appear."""
        self.emit(AgentMessageChunk(content=TextContent(text=text)))

    def checkpoint(self) -> None:
        """A step boundary: the session saves what changed (never per streamed delta)."""
        if notice := self.session.save():
            self.say(notice)

    async def report_usage(
        self, usage: dict[str, Any] | None, messages: list[dict[str, Any]], reply: str
    ) -> None:
        """usage_update: how full the context is after this response (agent.context.usage).
        `messages` is what a request sends, the system message included."""
        size = await context_size(self.session.settings, self.session.context_limit)
        if self.closed:
            return
        used = tokens_used(usage, messages, reply, self.session.tool_specs())
        self.session.notify({"sessionUpdate": "usage_update", "used": used, "size": size})
