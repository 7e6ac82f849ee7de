"""What a turn shows the editor: its `session/update`s, through the session's one way out
(`Session.notify`).

Every update goes to the editor and into the session's transcript (for `session/load`); after
`closed` is set nothing more goes out, so no update of a turn follows its answer.

Message chunks carry `messageId`: one id for the chunks of one message, a new one whenever a
message begins. A message ends with anything else shown between two runs of text (a tool
call, a plan, a notice), with a change of kind (thought ↔ answer), with the end of a model
request, and around each line Heron says itself (`say`): the editor starts a new block there.
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
from agent.notices import Note, notice_update
from agent.store.transcript import new_message_id


class Updates:
    def __init__(
        self,
        notify: Callable[..., None],
        save: Callable[[], list[Note]],
        window: Callable[[], Awaitable[int]],
        drain: Callable[[], Awaitable[None]],
        tool_specs: Callable[[], list[dict[str, Any]]],
        per_token: Callable[[], float] = lambda: CAUTIOUS,
        told: set[str] | None = None,
        notices: bool = False,
        compaction: bool = False,
    ) -> None:
        self.notify = notify  # Session.notify: the one way out
        self.save = save  # Session.save: a step boundary; notes if it cannot be saved
        self.told = told if told is not None else set()  # the keys of the notes told
        self.notices = notices  # the client shows `notice` updates
        self.compaction = compaction  # the client shows `compaction_update`s
        self.window = window  # the context window's size, in tokens
        self.drain = drain  # waits while the editor reads slowly (back-pressure)
        self.tool_specs = tool_specs  # the tools a request sends (they count in the window)
        self.per_token = per_token  # characters per token, for estimates (agent.context.usage)
        self.closed = False
        self._message: tuple[str, str] | None = None  # (kind, id) of the message going on

    def emit(self, update: SessionUpdate) -> None:
        if self.closed:
            return
        if type(update) in (AgentMessageChunk, AgentThoughtChunk):
            # Streamed text, one per delta: its dump spelled out, without pydantic's walk.
            kind = update.session_update
            content = {"type": "text", "text": update.content.text}  # type: ignore[union-attr]
            message_id = self.message_id(kind)
            dumped = {"sessionUpdate": kind, "messageId": message_id, "content": content}
        else:
            dumped = update.dump()
            self.end_message()  # text after this is another message
        self.notify(dumped, record=True)

    def message_id(self, kind: str) -> str:
        """The id of the message a chunk of `kind` belongs to: the one going on, or a new one."""
        if self._message is None or self._message[0] != kind:
            self._message = (kind, new_message_id())
        return self._message[1]

    def end_message(self) -> None:
        """The message going on is complete: the next chunk starts another."""
        self._message = None

    def say(self, text: str) -> None:
        """A line of agent text (notices, summaries) as the model's own answer would appear,
        as a message of its own."""
        self.end_message()
        self.emit(AgentMessageChunk(content=TextContent(text=text)))
        self.end_message()

    def show_user(self, updates: list[dict[str, Any]]) -> None:
        """A user's message the client did not show itself (a steering message), as one
        message, sent and recorded."""
        for update in self.user_message(updates):
            if not self.closed:
                self.notify(update, record=True)

    def user_message(self, updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A user's message (`user_message_chunk`s, one per block) under one new id."""
        self.end_message()
        message_id = new_message_id()
        return [
            {"sessionUpdate": u["sessionUpdate"], "messageId": message_id, "content": u["content"]}
            for u in updates
        ]

    def note(self, note: Note | None) -> None:
        """Tell one of Heron's notes (agent.notices), once per session: a `notice` to a client
        that shows them, else a line of text."""
        if note is None or note.key in self.told or self.closed:
            return
        self.told.add(note.key)
        if self.notices:
            self.notify(notice_update(note), record=True)
            self.end_message()
        else:
            self.say(note.text)

    def begin_compaction(self) -> str | None:
        """A compaction starts: its id, told as `in_progress` to a client that shows
        compactions (None for the others, which are told how it ended in words)."""
        if not self.compaction or self.closed:
            return None
        compaction_id = new_message_id()
        update = {"sessionUpdate": "compaction_update", "compactionId": compaction_id}
        self.notify({**update, "status": "in_progress"}, record=True)
        self.end_message()
        return compaction_id

    def end_compaction(
        self, compaction_id: str | None, text: str, summary: str | None = None, ok: bool = True
    ) -> None:
        """How it ended: `text` says it in words (to a client without compactions, and in
        `_meta.heron.text` for one that loads the session later); `summary`, what the
        conversation became; a failed one's `text` is its error."""
        if compaction_id is None or self.closed:
            self.say(text)
            return
        update: dict[str, Any] = {
            "sessionUpdate": "compaction_update",
            "compactionId": compaction_id,
            "status": "completed" if ok else "failed",
        }
        if not ok:
            update["error"] = text.strip()
        elif summary:
            update["summary"] = [{"type": "text", "text": summary}]
        update["_meta"] = {"heron": {"text": text}}
        self.notify(update, record=True)
        self.end_message()

    def checkpoint(self) -> None:
        """A step boundary: the session saves what changed (never per streamed delta)."""
        for note in self.save():
            self.note(note)

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
