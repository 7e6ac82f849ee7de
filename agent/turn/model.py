"""One model request of a turn: the history compacted when it would not fit, the answer
streamed to the editor as it arrives, tool calls announced as soon as they are named.

Tools travel as the API's `tools` parameter or, for servers without native tool calling, as
text (agent.textcalls): the `tool_calls` setting, `auto` switching to text when the server
shows it cannot take them. Either way the calls come back as the same events.
"""

from __future__ import annotations

import json
import logging
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from agent.acp.protocol import AgentMessageChunk, AgentThoughtChunk, TextContent
from agent.context.compaction import compact, needs_compaction, summary_of
from agent.context.prompt import without_audio
from agent.context.usage import context_size, estimate_tokens, overflowed
from agent.errors import ModelFailure
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
from agent.llm.events import ToolsRefused
from agent.llm.probe import NO_TOOLS, known_tool_support, probe_tool_support, should_probe
from agent.notices import Note
from agent.options.notice import thought_notice
from agent.textcalls import (
    Switch,
    as_text,
    is_text_call,
    parses_text,
    switch_to_text,
    switched,
    text_tool_calls,
    tools_prompt,
    uses_text,
)
from agent.turn.calls import ToolCalls
from agent.turn.updates import Updates

if TYPE_CHECKING:
    from agent.session import Session

log = logging.getLogger("heron.turn")

TEXT_MODE = (
    "Note: {why}, so Heron now describes the tools in the system prompt and the model calls "
    "them by writing <tool_call> blocks ({model} at {where}; set tool_calls to native or "
    "text to choose).\n\n"
)

PROPS_WAIT = 3.0  # seconds the first request of `auto` waits for llama-server's /props

AUDIO_REFUSED = (
    "The model did not accept the audio in this prompt ({error}). The audio is left out of "
    "the conversation from now on: send the prompt again as text, or pick a model that takes "
    "audio input."
)
NOT_COMPACTED = "(The conversation could not be compacted: {why}.)\n\n"
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
        more for the size the server names (then the request is retried) when it says it was
        too long; a server that refuses `tools` is asked again with the tools in text."""
        await self.compact_history(force=False)
        try:
            return await self._ask_once()
        except ModelFailure as exc:
            cause = exc.__cause__
            if isinstance(cause, ToolsRefused) and self.use_text(Switch.REFUSED):
                return await self._ask_once()
            if not isinstance(cause, ContextTooLong) or not await self.overflowed(cause):
                raise
        return await self._ask_once()

    async def overflowed(self, error: ContextTooLong) -> bool:
        """The request was too long: remember the size the server named, compact for it."""
        if error.size:
            self.session.context_limit = error.size
            overflowed(self.session.settings, error.size)
        return await self.compact_history(force=True)

    async def compact_history(self, force: bool) -> bool:
        """Replace the older history with a summary (agent.context.compaction); True if it did."""
        session = self.session
        window = await context_window(session)
        system, _, tools = self.request_parts()
        fixed = estimate_tokens([system, *tools])
        if not force and (
            (self.compacted_at and len(session.history) < self.compacted_at + 4)
            or not needs_compaction(session.history, window, fixed)
        ):
            return False
        compaction = self.updates.begin_compaction()
        try:
            compacted = await compact(session.settings, session.history, window, fixed=fixed)
        except LLMError as exc:
            log.warning("compaction failed: %s", exc)
            self.updates.end_compaction(compaction, NOT_COMPACTED.format(why=exc), ok=False)
            return False
        if compacted is None:
            why = "nothing older could be summarized or shortened"
            self.updates.end_compaction(compaction, NOT_COMPACTED.format(why=why), ok=False)
            return False
        before = len(session.history)
        session.history, summarized, shortened = compacted
        session.history_rewritten(summarized, before)
        self.compacted_at = len(session.history)
        done = [f"{summarized} earlier messages are now a summary"] if summarized else []
        done += [f"{shortened} large messages were shortened"] if shortened else []
        text = f"(Compacted the conversation: {'; '.join(done)}.)\n\n"
        self.updates.end_compaction(compaction, text, summary_of(session.history, summarized))
        self.updates.checkpoint()
        return True

    def request_parts(self) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        """The system message, the history and the tools as this request sends them: the
        tools as the API's parameter, or (text mode) described in the system prompt."""
        session = self.session
        if not uses_text(session.settings):
            return self.system, session.history, session.tool_specs()
        described = f"{self.system.get('content', '')}\n\n{tools_prompt(session.tool_specs())}"
        return {"role": "system", "content": described}, as_text(session.history), []

    def use_text(self, why: Switch) -> bool:
        """`auto`: tool calls go as text from now on (told once). False if they already did
        (or the setting says otherwise)."""
        news = switch_to_text(self.session.settings, why)
        self.tell_text()
        return news

    def tell_text(self) -> None:
        """Tell each session once that `auto` sends its tool calls as text, and why."""
        session = self.session
        why = switched(session.settings)
        if why is not None:
            model, at = session.settings.model, where(session.settings)
            text = TEXT_MODE.format(why=why.value, model=model, where=at)
            title = "Tool calls are now written as text"
            self.updates.note(Note("text tool calls", title, text, "info"))

    async def _ask_once(self) -> Reply:
        session, emit = self.session, self.updates.emit
        await self.check_tool_support()
        for note in await session.prepare_tools():  # MCP servers ready, tool list current
            self.updates.note(note)
        system, history, tools = self.request_parts()
        messages = [system, *history]
        self.updates.end_message()  # each answer is a message of its own
        text: list[str] = []
        ids: dict[int, str] = {}  # stream index → tool call id
        finished: Finished | None = None
        stream = stream_chat(session.settings, messages, tools)
        if parses_text(session.settings):
            stream = text_tool_calls(stream)
        try:
            async with aclosing(stream) as events:
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
                    await self.updates.drain()  # back-pressure from a slow editor
        except LLMError as exc:
            if text or not self._drop_refused_audio(exc):
                raise ModelFailure(str(exc)) from exc
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
        self.updates.note(thought_notice(session.settings))
        calls = [(ids[c.index], c) for c in finished.tool_calls if c.index in ids]
        if tools and any(is_text_call(c) for _, c in calls):
            self.use_text(Switch.WRITTEN)  # `tools` was sent, yet the model wrote its calls
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

    async def check_tool_support(self) -> None:
        """Tell the user once if the server cannot take tools, or (`auto`) switch to text.
        Only `auto` waits for the server's answer (asked when the session opened)."""
        session = self.session
        if session.settings.tool_calls == "auto" and session.settings.base_url:
            with anyio.move_on_after(PROPS_WAIT):
                await probe_tool_support(session.settings)
        if should_probe(session.settings):
            session.connection.start_soon(self._probe_tool_support)
        self.tell_text()  # auto switched for another session of this endpoint and model
        if known_tool_support(session.settings) is False:
            if session.settings.tool_calls == "auto":
                self.use_text(Switch.TEMPLATE)
            elif session.settings.tool_calls == "native":
                title = "The model server's chat template cannot take tools"
                text = NO_TOOLS.format(where=where(session.settings))
                self.updates.note(Note("no tools", title, text, "warning"))

    async def _probe_tool_support(self) -> None:
        if await probe_tool_support(self.session.settings) is False and not self.updates.closed:
            await self.check_tool_support()


async def context_window(session: Session) -> int:
    """The size of the session's context window, in tokens (agent.context.usage)."""
    return await context_size(session.settings, session.context_limit)


def _json_or_wrapped(arguments: str) -> str:
    """Arguments as sent back to the model: invalid JSON is wrapped so servers accept it."""
    try:
        json.loads(arguments or "{}")
        return arguments or "{}"
    except ValueError:
        return json.dumps({"invalid_json_arguments": arguments})
