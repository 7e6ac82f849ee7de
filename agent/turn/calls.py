"""Running the model's tool calls: announce, check permission, execute, report the result.

Each call is a `tool_call` the editor shows from `pending` to `completed` or `failed`; what the
model reads of its result goes into the history once the batch is done.
"""

from __future__ import annotations

import json
import logging
from contextlib import aclosing
from functools import cached_property
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from agent.acp.protocol import (
    ContentItem,
    PlanUpdate,
    ToolCallContent,
    ToolCallProgress,
    ToolCallStart,
)
from agent.acp.wire import RpcError
from agent.context.history import answer_dangling_calls
from agent.errors import EditorRefused, Refused
from agent.llm import RawToolCall
from agent.tools.base import PlanChanged, Preview, Progress, Safety, Tool, ToolError, ToolResult
from agent.turn.permission import Gate, permit
from agent.turn.updates import Updates

if TYPE_CHECKING:
    from agent.session import Session

log = logging.getLogger("heron.turn")


class ToolCalls:
    def __init__(self, session: Session, updates: Updates, scope: anyio.CancelScope) -> None:
        self.session = session
        self.updates = updates
        self.scope = scope  # the turn's: a permission question the editor cancels ends it
        self.open: set[str] = set()  # announced, not yet completed or failed
        self.results: dict[str, str] = {}  # call id → what the model reads of its result

    @cached_property
    def gate(self) -> Gate:
        """What the permission checks read (made at the first call: the tools' context is
        made on first use)."""
        session = self.session
        return Gate(lambda: session.mode, session.permissions, session.roots, session.tool_context)

    def announce(self, model_call_id: str, name: str, tool: Tool[Any] | None = None) -> str:
        """Show a call as soon as the model names it (or Heron's own `tool`, e.g. /undo's);
        returns its id in this session."""
        call_id = self.session.new_call_id(model_call_id)
        tool = tool or self.session.tools.get(name)
        self.open.add(call_id)
        self.updates.emit(
            ToolCallStart(
                tool_call_id=call_id,
                title=name,
                name=tool.name if tool else name,
                kind=tool.kind if tool else "other",
                status="pending",
            )
        )
        return call_id

    async def run_all(self, calls: list[tuple[str, RawToolCall]]) -> None:
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
        self.updates.checkpoint()

    async def _run_into_results(self, call_id: str, call: RawToolCall) -> None:
        self.results[call_id] = await self.run_one(call_id, call)

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

    async def run_one(self, call_id: str, call: RawToolCall) -> str:
        """Run one tool call from start to end; returns what the model reads."""
        session = self.session
        if call.problem:  # known from how it was written: nothing to ask about
            return self.fail(call_id, call.problem)
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
        try:
            return await self.run_tool(call_id, tool, args, raw_args)
        except Refused as exc:  # the call is failed already; the model reads why
            return exc.for_model

    async def run_tool(
        self, call_id: str, tool: Tool[Any], args: Any, raw_args: dict[str, Any]
    ) -> str:
        """Run an announced call of `tool` with parsed `args`: preview, permission, execute,
        result. Returns what the model reads; raises Refused (agent.errors), the call
        failed, when it may not run."""
        session = self.session
        preview = await self._describe(tool, args)
        self.updates.emit(
            ToolCallProgress(
                tool_call_id=call_id,
                title=preview.title,
                locations=preview.locations or None,
                content=preview.content or None,
                raw_input=raw_args,
            )
        )
        if preview.refused:  # the tool knows already that it would refuse: nothing to ask
            self.fail(call_id, preview.refused)
            raise Refused(preview.refused)
        if session.mode == "auto" and tool.sandboxed(args):
            self.updates.note(session.sandbox.notice())  # once: no sandbox here
        try:
            await permit(self.gate, self.scope, call_id, tool, args, preview, raw_args)
        except Refused as exc:
            self.finish(call_id, ToolResult.failure(exc.for_model, exc.for_user))
            raise
        self.updates.emit(ToolCallProgress(tool_call_id=call_id, status="in_progress"))
        preview.call_id = call_id
        session.undo.ran(tool, args)  # notes commands, whose changes /undo cannot take back
        result = await self._execute(call_id, tool, args, preview)
        self.finish(call_id, result)
        return truncate_middle(result.output, session.settings.max_tool_output_chars)

    async def _execute(
        self, call_id: str, tool: Tool[Any], args: Any, preview: Preview
    ) -> ToolResult:
        """The tool's own work, its progress streamed; a crash becomes a failed result."""
        emit = self.updates.emit
        try:
            async with aclosing(tool.execute(args, self.session.tool_context, preview)) as events:
                async for event in events:
                    if isinstance(event, ToolResult):
                        return event
                    if isinstance(event, PlanChanged):
                        emit(PlanUpdate(entries=event.entries))
                    elif isinstance(event, Progress):
                        emit(
                            ToolCallProgress(
                                tool_call_id=call_id,
                                title=event.title,
                                content=event.content,
                                locations=event.locations,
                            )
                        )
                    await self.updates.drain()  # back-pressure from a slow editor
        except ToolError as exc:
            return ToolResult.failure(str(exc))
        except Refused as exc:  # the editor refused what the call needed (agent.errors)
            return ToolResult.failure(exc.for_model, exc.for_user)
        except RpcError as exc:  # the editor's error, in its words: never "RpcError (code N)"
            refused = EditorRefused("do what the call needed", exc.reason)
            return ToolResult.failure(refused.for_model, refused.for_user)
        except Exception as exc:
            log.exception("tool %s crashed", tool.name)
            return ToolResult.failure(f"{tool.name} failed: {type(exc).__name__}: {exc}")
        return ToolResult.failure(f"{tool.name} ended without a result.")

    async def _describe(self, tool: Tool[Any], args: Any) -> Preview:
        try:
            return await tool.describe(args, self.session.tool_context)
        except Exception:  # describe() must not raise; a broken one must not end the turn
            log.exception("describe() of %s raised", tool.name)
            return Preview(title=tool.name)

    def fail(self, call_id: str, reason: str, raw_input: Any = None) -> str:
        self.finish(call_id, ToolResult.failure(reason), raw_input)
        return reason

    def finish(self, call_id: str, result: ToolResult, raw_input: Any = None) -> None:
        content: list[ToolCallContent] = (
            result.content if result.content is not None else [ContentItem.of(result.output)]
        )
        self.updates.emit(
            ToolCallProgress(
                tool_call_id=call_id,
                status="completed" if result.ok else "failed",
                content=content,
                locations=result.locations,
                raw_input=raw_input,
                raw_output=result.raw_output,
            )
        )
        self.open.discard(call_id)
        self.updates.checkpoint()

    def close(self, reason: str) -> None:
        """The turn ends: fail what is still open and answer the model's dangling calls."""
        for call_id in sorted(self.open):
            self.finish(call_id, ToolResult.failure(reason))
        # Every tool call in the history needs a tool message, or the next request is invalid.
        history = self.session.history
        history[:] = answer_dangling_calls(
            history, lambda call_id: self.results.get(call_id, reason)
        )


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


def _readable(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )
