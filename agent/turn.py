"""The model ↔ tools loop of one prompt turn, and the one place that emits `session/update`.

    user prompt → model (streamed) → tool calls? → permission → run → results → model → …

A turn ends when the model stops asking for tools (`end_turn`), runs out of tokens
(`max_tokens`), is refused (`refusal`), exceeds the request cap (`max_turn_requests`) or is
cancelled. Every update of the turn goes out before the turn's answer and none after: `close()`
fails the tool calls still open and shuts the emitter.
"""

from __future__ import annotations

import json
import logging
import weakref
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from agent.acp.protocol import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentItem,
    PlanUpdate,
    PromptBlock,
    RequestPermissionParams,
    RequestPermissionResult,
    ResourceLinkIn,
    SessionNotification,
    SessionUpdate,
    StopReason,
    TextBlockIn,
    TextContent,
    ToolCallFields,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)
from agent.acp.wire import INTERNAL_ERROR, ConnectionClosed, RpcError
from agent.compaction import compact, needs_compaction
from agent.context import system_prompt, user_message
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
from agent.permissions.policy import Decision, decide, options_for, real_paths
from agent.store.replay import user_link_update
from agent.tools.base import PlanChanged, Preview, Progress, Safety, Tool, ToolError, ToolResult
from agent.usage import context_size, tokens_used

if TYPE_CHECKING:
    from agent.session import Session

log = logging.getLogger("heron.turn")

# Sessions already told that the server's template cannot take tools (told once per session).
_told_no_tools: weakref.WeakSet[Session] = weakref.WeakSet()

NOT_CONFIGURED = (
    "Heron has no model configured. Set OPENAI_API_KEY (and HERON_MODEL to pick a model) for "
    "OpenAI, or OPENAI_BASE_URL for another OpenAI-compatible server (Ollama, vLLM, LM Studio, "
    "OpenRouter, llama.cpp): in the `env` of Heron's entry in your editor's agent settings, "
    "as --base-url/--model flags, or in ~/.config/heron/config.toml (api_key, base_url, model)."
)
EMPTY_ANSWER = (
    "(The model returned an empty answer: no text and no tool calls. With a local server, "
    "check its chat template.)"
)


def broken_config(problem: str) -> str:
    return (
        f"Heron cannot use its settings: {problem}. Fix it (or run `heron setup`) and "
        "send the prompt again."
    )


REJECTED = "Rejected by the user: the call was not run. Do not retry it; ask or take another way."
CANCELLED = "Cancelled by the user."


@dataclass
class Reply:
    """What the model answered in one request."""

    finish_reason: str | None
    calls: list[tuple[str, RawToolCall]] = field(default_factory=list)  # (our id, the call)


class Turn:
    def __init__(self, session: Session, scope: anyio.CancelScope) -> None:
        self.session = session
        self.scope = scope
        self.open_calls: set[str] = set()  # announced, not yet completed or failed
        self.results: dict[str, str] = {}  # call id → what the model reads of its result
        self.system: dict[str, Any] = {}  # the system message, built once per turn
        self.closed = False
        # History length after this turn's last compaction: a summary that is still too big
        # is not summarized again before the turn has moved on a few messages.
        self.compacted_at = 0

    # -- the loop ----------------------------------------------------------------------------

    async def run(self, blocks: list[PromptBlock]) -> StopReason:
        session = self.session
        if session.settings.problem:
            raise RpcError(INTERNAL_ERROR, broken_config(session.settings.problem))
        if not session.settings.llm_configured:
            raise RpcError(INTERNAL_ERROR, NOT_CONFIGURED)
        session.history.append(await user_message(blocks, session.files))
        # Read AGENTS.md once per turn, not on every model request of the turn.
        prompt = await system_prompt(session.cwd, confine=session.mode != "full-access")
        self.system = {"role": "system", "content": prompt}
        for block in blocks:
            if isinstance(block, TextBlockIn):
                session.record(UserMessageChunk(content=TextContent(text=block.text)).dump())
            elif isinstance(block, ResourceLinkIn):
                session.record(
                    user_link_update(block.uri, block.name, block.title, block.mime_type)
                )
        await session.store_ready()
        self.checkpoint()
        for _ in range(session.settings.max_turn_requests):
            reply = await self.ask_model()
            if reply.finish_reason == "length":
                return "max_tokens"
            if reply.finish_reason == "content_filter":
                return "refusal"
            if not reply.calls:
                return "end_turn"
            await self.run_tools(reply.calls)
        return "max_turn_requests"

    async def ask_model(self) -> Reply:
        """One model request. The history is compacted first when it would not fit, and once
        more (then the request is retried) when the server says it was too long."""
        await self.compact_history(force=False)
        try:
            return await self._ask_model_once()
        except RpcError as exc:
            too_long = isinstance(exc.__cause__, ContextTooLong)
            if not too_long or not await self.compact_history(force=True):
                raise
        return await self._ask_model_once()

    async def compact_history(self, force: bool) -> bool:
        """Replace the older history with a summary (agent.compaction); True if it did."""
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
        note = f"(Compacted the conversation: {summarized} earlier messages are now a summary.)"
        self.emit(AgentMessageChunk(content=TextContent(text=note + "\n\n")))
        self.checkpoint()
        return True

    async def _ask_model_once(self) -> Reply:
        session = self.session
        self.check_tool_support()
        for notice in await session.prepare_tools():  # MCP servers ready, tool list current
            self.emit(AgentMessageChunk(content=TextContent(text=notice)))
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
                        self.emit(AgentMessageChunk(content=TextContent(text=event.text)))
                    elif isinstance(event, ThoughtDelta):
                        self.emit(AgentThoughtChunk(content=TextContent(text=event.text)))
                    elif isinstance(event, ToolCallNamed):
                        ids[event.index] = self.announce(event.call_id, event.name)
                    else:
                        finished = event
                    await session.connection.drain()  # back-pressure from a slow editor
        except LLMError as exc:
            raise RpcError(INTERNAL_ERROR, str(exc)) from exc
        finally:
            if finished is None and text:  # cut off: keep what the user already saw
                session.history.append({"role": "assistant", "content": "".join(text)})
        assert finished is not None
        calls = [(ids[c.index], c) for c in finished.tool_calls if c.index in ids]
        if finished.finish_reason == "length":
            # The arguments may be cut mid-way: nothing of this answer runs.
            for call_id in ids.values():
                self.fail(
                    call_id, "The model hit its output token limit before finishing this call."
                )
            calls = []
        if finished.finish_reason == "stop" and not text and not finished.tool_calls:
            # Ending silently would look like Heron hung; this is a server/template problem.
            self.emit(AgentMessageChunk(content=TextContent(text=EMPTY_ANSWER)))
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
        self.checkpoint()
        await self.report_usage(finished.usage, messages, message.get("content") or "")
        return Reply(finished.finish_reason, calls)

    def check_tool_support(self) -> None:
        """Tell the user once if the server cannot take tools; asking it never delays the turn."""
        if should_probe(self.session.settings):
            self.session.connection.start_soon(self._probe_tool_support)
        elif (
            known_tool_support(self.session.settings) is False
            and self.session not in _told_no_tools
        ):
            _told_no_tools.add(self.session)
            text = NO_TOOLS.format(where=where(self.session.settings))
            self.emit(AgentMessageChunk(content=TextContent(text=text)))

    async def _probe_tool_support(self) -> None:
        if await probe_tool_support(self.session.settings) is False and not self.closed:
            self.check_tool_support()

    # -- tools -------------------------------------------------------------------------------

    def announce(self, model_call_id: str, name: str) -> str:
        call_id = self.session.new_call_id(model_call_id)
        tool = self.session.tools.get(name)
        self.open_calls.add(call_id)
        self.emit(
            ToolCallStart(
                tool_call_id=call_id,
                title=name,
                kind=tool.kind if tool else "other",
                status="pending",
            )
        )
        return call_id

    async def run_tools(self, calls: list[tuple[str, RawToolCall]]) -> None:
        """Run in order; consecutive read-only calls run side by side. Results go to history."""
        batch: list[tuple[str, RawToolCall]] = []

        async def run_batch() -> None:
            async with anyio.create_task_group() as tg:
                for call_id, call in batch:
                    tg.start_soon(self._run_into_results, call_id, call)
            batch.clear()

        for call_id, call in calls:
            if self._is_read_only(call):
                batch.append((call_id, call))
                continue
            await run_batch()
            await self._run_into_results(call_id, call)
        await run_batch()
        for call_id, _ in calls:
            self.session.history.append(
                {"role": "tool", "tool_call_id": call_id, "content": self.results[call_id]}
            )
        self.checkpoint()

    async def _run_into_results(self, call_id: str, call: RawToolCall) -> None:
        self.results[call_id] = await self.run_call(call_id, call)

    def _is_read_only(self, call: RawToolCall) -> bool:
        tool = self.session.tools.get(call.name)
        try:
            return (
                tool is not None
                and tool.safety(tool.parse_args(json.loads(call.arguments or "{}")))
                is Safety.READ_ONLY
            )
        except (ValueError, ValidationError, TypeError):
            return False

    async def run_call(self, call_id: str, call: RawToolCall) -> str:
        """Run one tool call from start to end; returns what the model reads."""
        session = self.session
        tool = session.tools.get(call.name)
        if tool is None:
            known = ", ".join(session.tools)
            return self.fail(call_id, f"Unknown tool {call.name!r}. Available tools: {known}.")
        try:
            raw_args = json.loads(call.arguments or "{}")
            if not isinstance(raw_args, dict):
                raise ValueError("expected a JSON object")
        except ValueError as exc:
            return self.fail(
                call_id,
                f"The arguments for {call.name} are not valid JSON ({exc}). Call it again with "
                "a JSON object that matches its schema.",
            )
        try:
            args = tool.parse_args(raw_args)
        except ValidationError as exc:
            return self.fail(
                call_id, f"Invalid arguments for {call.name}: {_readable(exc)}", raw_args
            )

        ctx = session.tool_context
        preview = await self._describe(tool, args)
        self.emit(
            ToolCallProgress(
                tool_call_id=call_id,
                title=preview.title,
                locations=preview.locations or None,
                content=preview.content or None,
                raw_input=raw_args,
            )
        )
        problem = await self.check_permission(call_id, tool, args, preview, raw_args)
        if problem:
            return self.fail(call_id, problem)

        self.emit(ToolCallProgress(tool_call_id=call_id, status="in_progress"))
        result: ToolResult | None = None
        try:
            async with aclosing(tool.execute(args, ctx, preview)) as events:
                async for event in events:
                    if isinstance(event, ToolResult):
                        result = event
                        break
                    if isinstance(event, PlanChanged):
                        self.emit(PlanUpdate(entries=event.entries))
                    elif isinstance(event, Progress):
                        self.emit(
                            ToolCallProgress(
                                tool_call_id=call_id,
                                title=event.title,
                                content=event.content,
                                locations=event.locations,
                            )
                        )
                    await session.connection.drain()  # back-pressure from a slow editor
        except ToolError as exc:
            result = ToolResult.failure(str(exc))
        except Exception as exc:
            log.exception("tool %s crashed", call.name)
            result = ToolResult.failure(f"{call.name} failed: {type(exc).__name__}: {exc}")
        if result is None:
            result = ToolResult.failure(f"{call.name} ended without a result.")
        self.finish(call_id, result)
        return truncate_middle(result.output, session.settings.max_tool_output_chars)

    async def _describe(self, tool: Tool[Any], args: Any) -> Preview:
        try:
            return await tool.describe(args, self.session.tool_context)
        except Exception:  # describe() must not raise; a broken one must not end the turn
            log.exception("describe() of %s raised", tool.name)
            return Preview(title=tool.name)

    async def check_permission(
        self, call_id: str, tool: Tool[Any], args: Any, preview: Preview, raw_args: dict[str, Any]
    ) -> str | None:
        """None when the call may run now; else why not (what the model is told)."""
        session = self.session
        ctx = session.tool_context
        verdict = decide(session.mode, tool, args, ctx, session.permissions, session.roots)
        if verdict.decision is Decision.REFUSE:
            return verdict.reason
        if verdict.decision is Decision.ALLOW:
            return None
        before = real_paths(tool, args, ctx)
        if not await self.ask_permission(call_id, tool, verdict.keys, preview, raw_args):
            return REJECTED
        # The question may have been open for minutes: the mode, the remembered answers or
        # where a path leads (a symlink swapped in) may have changed. Decide again, now.
        after = real_paths(tool, args, ctx)
        if after != before:
            changed = zip(after, before, strict=False)
            moved = ", ".join(f"{now} (was {then})" for now, then in changed if now != then)
            return (
                f"Not run: while permission was asked, the target changed; it now leads to "
                f"{moved or ', '.join(after)}. Nothing was written. Look at it again before "
                "retrying."
            )
        again = decide(session.mode, tool, args, ctx, session.permissions, session.roots)
        if again.decision is Decision.REFUSE:
            return again.reason
        return None

    async def ask_permission(
        self,
        call_id: str,
        tool: Tool[Any],
        keys: list[str],
        preview: Preview,
        raw_args: dict[str, Any],
    ) -> bool:
        session = self.session
        request = RequestPermissionParams(
            session_id=session.id,
            tool_call=ToolCallFields(
                tool_call_id=call_id,
                title=preview.title,
                kind=tool.kind,
                status="pending",
                content=preview.content or None,
                locations=preview.locations or None,
                raw_input=raw_args,
            ),
            options=options_for(keys),
        )
        try:
            answer = await session.connection.request("session/request_permission", request.dump())
            outcome = RequestPermissionResult.model_validate(answer).outcome
        except (RpcError, ConnectionClosed, ValidationError) as exc:
            log.warning("permission request failed: %s", exc)
            return False
        if outcome.outcome != "selected":
            # The editor cancelled the question (the user pressed Stop): the turn ends.
            self.scope.cancel()
            await anyio.lowlevel.checkpoint()
            return False
        session.permissions.remember(outcome.option_id, keys)
        return outcome.option_id in ("allow_once", "allow_always")

    def fail(self, call_id: str, reason: str, raw_input: Any = None) -> str:
        self.finish(call_id, ToolResult.failure(reason), raw_input)
        return reason

    def finish(self, call_id: str, result: ToolResult, raw_input: Any = None) -> None:
        content = result.content if result.content is not None else [ContentItem.of(result.output)]
        self.emit(
            ToolCallProgress(
                tool_call_id=call_id,
                status="completed" if result.ok else "failed",
                content=content,
                locations=result.locations,
                raw_input=raw_input,
                raw_output=result.raw_output,
            )
        )
        self.open_calls.discard(call_id)
        self.checkpoint()

    # -- updates -----------------------------------------------------------------------------

    def emit(self, update: SessionUpdate) -> None:
        if self.closed:
            return
        if type(update) in (AgentMessageChunk, AgentThoughtChunk):
            # Streamed text, one per delta: its dump spelled out, without pydantic's walk.
            content = {"type": "text", "text": update.content.text}  # type: ignore[union-attr]
            message = {
                "sessionId": self.session.id,
                "update": {"sessionUpdate": update.session_update, "content": content},
            }
        else:
            message = SessionNotification(session_id=self.session.id, update=update).dump()
        self.session.connection.notify("session/update", message)
        self.session.record(message["update"])

    def checkpoint(self) -> None:
        """A step boundary: the session saves what changed (never per streamed delta)."""
        if notice := self.session.save():
            self.emit(AgentMessageChunk(content=TextContent(text=notice)))

    async def report_usage(
        self, usage: dict[str, Any] | None, messages: list[dict[str, Any]], reply: str
    ) -> None:
        """usage_update: how full the context is after this response (agent.usage)."""
        size = await context_size(self.session.settings)
        if self.closed:
            return
        used = tokens_used(usage, messages, reply)
        update = {"sessionUpdate": "usage_update", "used": used, "size": size}
        self.session.connection.notify(
            "session/update", {"sessionId": self.session.id, "update": update}
        )

    def close(self) -> None:
        """End the turn: fail what is still open, answer the model's dangling calls, go quiet."""
        reason = CANCELLED if self.scope.cancel_called else "The turn ended before this call ran."
        for call_id in sorted(self.open_calls):
            self.finish(call_id, ToolResult.failure(reason))
        self.closed = True
        self._answer_dangling_calls(reason)
        self.checkpoint()

    def _answer_dangling_calls(self, reason: str) -> None:
        # Every tool call in the history needs a tool message, or the next request is invalid.
        history = self.session.history
        for index in range(len(history) - 1, -1, -1):
            message = history[index]
            if message["role"] == "assistant" and message.get("tool_calls"):
                answered = {
                    m.get("tool_call_id") for m in history[index + 1 :] if m["role"] == "tool"
                }
                for call in message["tool_calls"]:
                    if call["id"] not in answered:
                        content = self.results.get(call["id"], reason)
                        history.append(
                            {"role": "tool", "tool_call_id": call["id"], "content": content}
                        )
                return
            if message["role"] == "user":
                return


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of a long tool result, saying what was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return (
        f"{text[:head]}\n\n[... {omitted} characters omitted: the result had {len(text)}; "
        f"showing the first {head} and the last {tail}. Ask for less (a range, a narrower "
        f"pattern) to see the middle ...]\n\n{text[-tail:]}"
    )


def _json_or_wrapped(arguments: str) -> str:
    """Arguments as sent back to the model: invalid JSON is wrapped so servers accept it."""
    try:
        json.loads(arguments or "{}")
        return arguments or "{}"
    except ValueError:
        return json.dumps({"invalid_json_arguments": arguments})


def _readable(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )
