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

from agent.acp.protocol import AgentMessageChunk, AgentThoughtChunk, StopReason, TextContent
from agent.context.compaction import (
    MIN_ROOM,
    Budget,
    Compacted,
    compact,
    needs_compaction,
    summary_of,
)
from agent.context.history import alternating
from agent.context.prompt import without_audio
from agent.context.usage import (
    FIXED,
    HISTORY,
    chars_per_token,
    context_size,
    estimate_tokens,
    measure,
    overflowed,
    size_of,
)
from agent.errors import ModelFailure, WindowTooSmall
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
    STOP,
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
EMPTY_TEXT_ANSWER = (
    "(The model returned an empty answer. With tool calls as text this usually means it began "
    "to write a tool's result itself (<tool_response>), where Heron stops it. Ask again, or "
    "use a larger model.)"
)
CUT_NATIVE = "The model hit its output token limit before finishing this call."
REQUEST_CUT = (
    "(Your message is longer than this model's context window leaves room for ({window:,} "
    "tokens, Heron's instructions and tools included): the model reads its start and its end, "
    "and {cut:,} characters in the middle are left out. The conversation here keeps all of it.)"
    "\n\n"
)


@dataclass
class Reply:
    """What the model answered in one request."""

    finish_reason: str | None
    calls: list[tuple[str, RawToolCall]] = field(default_factory=list)  # (our id, the call)

    def stop_reason(self) -> StopReason | None:
        """How the turn ends after this answer (once its calls ran); None: it goes on.
        An answer cut by the token limit goes on when a call of it can run (text blocks
        closed before the cut): the model reads the results, as after any tool call."""
        if self.finish_reason == "content_filter":
            return "refusal"
        if self.finish_reason == "length" and all(call.problem for _, call in self.calls):
            return "max_tokens"
        return None if self.calls else "end_turn"


class Model:
    def __init__(self, session: Session, updates: Updates, calls: ToolCalls) -> None:
        self.session = session
        self.updates = updates
        self.calls = calls
        self.system: dict[str, Any] = {}  # the system message, built once per turn
        # History length after this turn's last compaction: a summary that is still too big
        # is not summarized again before the turn has moved on a few messages.
        self.compacted_at = 0
        # The last request's size (agent.context.usage.size_of): Heron's part, the conversation.
        self.sent: tuple[int, int] = (0, 0)

    async def ask(self) -> Reply:
        """One model request. The history is compacted first when it would not fit, and once
        more for the size the server names (then the request is retried) when it says it was
        too long; a server that refuses `tools` is asked again with the tools in text. A window
        too small for Heron's own instructions is said before any request."""
        self.session.fit_tools(await context_window(self.session))
        await self.check_room()
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
        """The request was too long: remember the size the server named and the tokens it
        counted, then compact for them."""
        settings = self.session.settings
        if error.size:
            self.session.context_limit = error.size
            overflowed(settings, error.size)
        measure(settings, *self.sent, error.prompt_tokens)
        self.session.fit_tools(await context_window(self.session))
        await self.check_room()  # the server's count may show Heron's own part cannot fit
        return await self.compact_history(force=True)

    async def check_room(self) -> None:
        """Raise WindowTooSmall when the window cannot hold Heron's instructions and tools and
        a conversation (counted as the server counts, else generously: only what surely
        cannot work is refused)."""
        window = await context_window(self.session)
        per_token = chars_per_token(self.session.settings, FIXED, cautious=False)
        needed = estimate_tokens(self.fixed_parts(), per_token)
        if needed + MIN_ROOM > window:
            raise WindowTooSmall(window, needed, window == self.session.settings.context_window)

    async def compact_history(self, force: bool) -> bool:
        """Replace the older history with a summary (agent.context.compaction); True if it did."""
        session = self.session
        fixed = estimate_tokens(self.fixed_parts(), chars_per_token(session.settings, FIXED))
        per_token = chars_per_token(session.settings, HISTORY)
        budget = Budget(await context_window(session), fixed, per_token)
        if not force and (
            (self.compacted_at and len(session.history) < self.compacted_at + 4)
            or not needs_compaction(session.history, budget)
        ):
            return False
        compaction = self.updates.begin_compaction()
        try:
            compacted = await compact(session.settings, session.history, budget)
        except LLMError as exc:
            log.warning("compaction failed: %s", exc)
            self.updates.end_compaction(compaction, NOT_COMPACTED.format(why=exc), ok=False)
            return False
        if compacted is None:
            why = "nothing older could be summarized or shortened"
            self.updates.end_compaction(compaction, NOT_COMPACTED.format(why=why), ok=False)
            return False
        before = len(session.history)
        session.history = compacted.history
        session.history_rewritten(compacted.summarized, before)
        self.compacted_at = len(session.history)
        self.tell_compacted(compaction, compacted, budget)
        self.updates.checkpoint()
        return True

    def tell_compacted(self, compaction: str | None, compacted: Compacted, budget: Budget) -> None:
        """How the compaction `begin_compaction` announced ended, and what the user should
        know of it."""
        said = []
        if compacted.summarized:
            said.append(f"{compacted.summarized} earlier messages are now a summary")
        if compacted.shortened:
            said.append(f"{compacted.shortened} large messages were shortened")
        if said or compaction is not None:
            done = "; ".join(said) or "the latest request was cut to fit"
            text = f"(Compacted the conversation: {done}.)\n\n"
            summary = summary_of(self.session.history, compacted.summarized)
            self.updates.end_compaction(compaction, text, summary)
        if compacted.request_cut:
            self.updates.say(REQUEST_CUT.format(window=budget.window, cut=compacted.request_cut))

    def fixed_parts(self) -> list[dict[str, Any]]:
        """What every request carries besides the history: the system message and the tool
        schemas (in text mode, the tools are in the system message)."""
        system, tools = self._system_and_tools()
        return [system, *tools]

    def _system_and_tools(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        session = self.session
        if not uses_text(session.settings):
            return self.system, session.tool_specs()
        described = f"{self.system.get('content', '')}\n\n{tools_prompt(session.tool_specs())}"
        return {"role": "system", "content": described}, []

    def request_parts(self) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        """The system message, the history and the tools as this request sends them: the
        tools as the API's parameter, or (text mode) described in the system prompt."""
        system, tools = self._system_and_tools()
        history = self.session.history
        text = uses_text(self.session.settings)
        return system, as_text(history) if text else alternating(history), tools

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
        self.sent = (size_of([system]) + size_of(tools), size_of(history))
        self.updates.end_message()  # each answer is a message of its own
        text: list[str] = []
        ids: dict[int, str] = {}  # stream index → tool call id
        finished: Finished | None = None
        text_mode = uses_text(session.settings)
        stream = stream_chat(session.settings, messages, tools, STOP if text_mode else None)
        if parses_text(session.settings):
            stream = text_tool_calls(stream, native=bool(tools))
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
        measure(session.settings, *self.sent, (finished.usage or {}).get("prompt_tokens"))
        self.updates.note(thought_notice(session.settings))
        calls = [(ids[c.index], c) for c in finished.tool_calls if c.index in ids]
        if tools and any(is_text_call(c) for _, c in calls):
            self.use_text(Switch.WRITTEN)  # `tools` was sent, yet the model wrote its calls
        if finished.finish_reason == "length":
            # Native arguments may be cut mid-way: none of them runs. Text blocks closed
            # before the cut are whole and run; the one still open fails (agent.textcalls).
            calls = [(call_id, call) for call_id, call in calls if is_text_call(call)]
            kept = {call_id for call_id, _ in calls}
            for call_id in ids.values():
                if call_id not in kept:
                    self.calls.fail(call_id, CUT_NATIVE)
        if finished.finish_reason == "stop" and not text and not finished.tool_calls:
            # Ending silently would look like Heron hung; this is a server/template problem.
            self.updates.say(EMPTY_TEXT_ANSWER if text_mode else EMPTY_ANSWER)
        # Strict servers (llama-cpp-python) reject a null content beside tool_calls; "" is
        # accepted everywhere.
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    # A block Heron could not read has no name; servers refuse an empty one.
                    "function": {
                        "name": call.name or "tool_call",
                        "arguments": _json_or_wrapped(call.arguments),
                    },
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
