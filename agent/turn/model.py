"""One model request of a turn: the history compacted when it would not fit, the answer
streamed to the editor as it arrives, tool calls announced as soon as they are named."""

from __future__ import annotations

import json
import logging
import weakref
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.acp.protocol import AgentMessageChunk, AgentThoughtChunk, TextContent
from agent.acp.wire import INTERNAL_ERROR, RpcError
from agent.context.compaction import compact, needs_compaction
from agent.context.prompt import without_audio
from agent.context.usage import context_size
from agent.llm import (
    ContextTooLong,
    Finished,
    LLMError,
    RawToolCall,
    TextDelta,
    ThoughtDelta,
    ToolCallNamed,
    stream_chat,
)
from agent.llm.errors import where
from agent.llm.probe import NO_TOOLS, known_tool_support, probe_tool_support, should_probe
from agent.options.notice import thought_notice
from agent.turn.calls import ToolCalls
from agent.turn.updates import Updates

if TYPE_CHECKING:
    from agent.session import Session

log = logging.getLogger("heron.turn")

# Sessions already told that the server's template cannot take tools (told once per session).
_told_no_tools: weakref.WeakSet[Session] = weakref.WeakSet()

AUDIO_REFUSED = (
    "The model did not accept the audio in this prompt ({error}). The audio is left out of "
    "the conversation from now on: send the prompt again as text, or pick a model that takes "
    "audio input."
)
EMPTY_ANSWER = (
    "(The model returned an empty answer: no text and no tool calls. With a local server, "
    "check its chat template.)"
)


@dataclass
class Reply:
    """What the model answered in one request."""

    finish_reason: str | None
    calls: list[tuple[str, RawToolCall]] = field(default_factory=list)  # (our id, the call)


class Model:
    def __init__(self, session: Session, updates: Updates, calls: ToolCalls) -> None:
        self.session = session
        self.updates = updates
        self.calls = calls
        self.system: dict[str, Any] = {}  # the system message, built once per turn
        # History length after this turn's last compaction: a summary that is still too big
        # is not summarized again before the turn has moved on a few messages.
        self.compacted_at = 0

    async def ask(self) -> Reply:
        """One model request. The history is compacted first when it would not fit, and once
        more (then the request is retried) when the server says it was too long."""
        await self.compact_history(force=False)
        try:
            return await self._ask_once()
        except RpcError as exc:
            too_long = isinstance(exc.__cause__, ContextTooLong)
            if not too_long or not await self.compact_history(force=True):
                raise
        return await self._ask_once()

    async def compact_history(self, force: bool) -> bool:
        """Replace the older history with a summary (agent.context.compaction); True if it did."""
        session = self.session
        window = await context_size(session.settings)
        if not force and (
            (self.compacted_at and len(session.history) < self.compacted_at + 4)
            or not needs_compaction([self.system, *session.history], window)
        ):
            return False
        try:
            compacted = await compact(session.settings, session.history, window)
        except LLMError as exc:
            log.warning("compaction failed: %s", exc)
            return False
        if compacted is None:
            return False
        session.history, summarized = compacted
        self.compacted_at = len(session.history)
        self.updates.say(
            f"(Compacted the conversation: {summarized} earlier messages are now a summary.)\n\n"
        )
        self.updates.checkpoint()
        return True

    async def _ask_once(self) -> Reply:
        session, emit = self.session, self.updates.emit
        self.check_tool_support()
        for notice in await session.prepare_tools():  # MCP servers ready, tool list current
            self.updates.say(notice)
        messages = [self.system, *session.history]
        text: list[str] = []
        ids: dict[int, str] = {}  # stream index → tool call id
        finished: Finished | None = None
        try:
            async with aclosing(
                stream_chat(session.settings, messages, session.tool_specs())
            ) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                        emit(AgentMessageChunk(content=TextContent(text=event.text)))
                    elif isinstance(event, ThoughtDelta):
                        emit(AgentThoughtChunk(content=TextContent(text=event.text)))
                    elif isinstance(event, ToolCallNamed):
                        ids[event.index] = self.calls.announce(event.call_id, event.name)
                    else:
                        finished = event
                    await session.connection.drain()  # back-pressure from a slow editor
        except LLMError as exc:
            if text or not self._drop_refused_audio(exc):
                raise RpcError(INTERNAL_ERROR, str(exc)) from exc
            # Told as the answer, and the prompt ends normally: the session goes on in text
            # (and a client that only checks the prompt succeeds is not told it failed).
            notice = AUDIO_REFUSED.format(error=exc)
            self.updates.say(notice)
            session.history.append({"role": "assistant", "content": notice})
            self.updates.checkpoint()
            return Reply("stop")
        finally:
            if finished is None and text:  # cut off: keep what the user already saw
                session.history.append({"role": "assistant", "content": "".join(text)})
        assert finished is not None
        if notice := thought_notice(session):
            self.updates.say(notice)
        calls = [(ids[c.index], c) for c in finished.tool_calls if c.index in ids]
        if finished.finish_reason == "length":
            # The arguments may be cut mid-way: nothing of this answer runs.
            for call_id in ids.values():
                self.calls.fail(
                    call_id, "The model hit its output token limit before finishing this call."
                )
            calls = []
        if finished.finish_reason == "stop" and not text and not finished.tool_calls:
            # Ending silently would look like Heron hung; this is a server/template problem.
            self.updates.say(EMPTY_ANSWER)
        # Strict servers (llama-cpp-python) reject a null content beside tool_calls; "" is
        # accepted everywhere.
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _json_or_wrapped(call.arguments)},
                }
                for call_id, call in calls
            ]
        session.history.append(message)
        self.updates.checkpoint()
        await self.updates.report_usage(finished.usage, messages, message.get("content") or "")
        return Reply(finished.finish_reason, calls)

    def _drop_refused_audio(self, exc: LLMError) -> bool:
        """True if the request carried audio and the server refused it (a 4xx that says
        nothing more specific, or words about audio): the audio leaves the history, so the
        session goes on and later prompts do not send it again."""
        session = self.session
        if exc.status not in (400, 415, 422) and "audio" not in str(exc).lower():
            return False
        history = without_audio(session.history)
        if history is None:
            return False
        session.history = history
        if session.saver is not None:
            session.saver.history_saved = 0  # rewritten in place: saved whole at the next step
        return True

    def check_tool_support(self) -> None:
        """Tell the user once if the server cannot take tools; asking it never delays the turn."""
        session = self.session
        if should_probe(session.settings):
            session.connection.start_soon(self._probe_tool_support)
        elif known_tool_support(session.settings) is False and session not in _told_no_tools:
            _told_no_tools.add(session)
            self.updates.say(NO_TOOLS.format(where=where(session.settings)))

    async def _probe_tool_support(self) -> None:
        if await probe_tool_support(self.session.settings) is False and not self.updates.closed:
            self.check_tool_support()


def _json_or_wrapped(arguments: str) -> str:
    """Arguments as sent back to the model: invalid JSON is wrapped so servers accept it."""
    try:
        json.loads(arguments or "{}")
        return arguments or "{}"
    except ValueError:
        return json.dumps({"invalid_json_arguments": arguments})
