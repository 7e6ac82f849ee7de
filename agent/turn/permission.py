"""May this tool call run now? Decide by the mode and remembered answers, ask the user when
needed, and decide again after the answer (agent.permissions has the rules)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from agent.acp.protocol import (
    ContentItem,
    RequestPermissionParams,
    RequestPermissionResult,
    ToolCallFields,
)
from agent.acp.wire import ConnectionClosed, RpcError
from agent.errors import QuestionFailed, RejectedByUser, TargetChanged
from agent.permissions.labels import covered, options_for, unseen_note
from agent.permissions.policy import Decision, PermissionMemory, Verdict, decide, real_paths
from agent.tools.base import Preview, Tool, ToolContext

log = logging.getLogger("heron.turn")


@dataclass
class Gate:
    """What deciding on a session's tool call reads. The mode is read anew at each decision:
    it may change while a question is open."""

    mode: Callable[[], str]
    memory: PermissionMemory  # the session's "always" answers
    roots: list[Path]  # the workspace
    ctx: ToolContext  # the tools' context: the session id, the client's requests


async def permit(
    gate: Gate,
    scope: anyio.CancelScope,
    call_id: str,
    tool: Tool[Any],
    args: Any,
    preview: Preview,
    raw_args: dict[str, Any],
) -> None:
    """Return when the call may run now; else raise Refused saying why (agent.errors words
    it for the model and for the user), RejectedByUser when the user said no.

    A question the editor cancels (the user pressed Stop) cancels `scope`, the turn's.
    """
    ctx = gate.ctx
    verdict = decide(gate.mode(), tool, args, ctx, gate.memory, gate.roots)
    if verdict.refusal is not None:  # Decision.REFUSE
        raise verdict.refusal
    if verdict.decision is Decision.ALLOW:
        return
    before = real_paths(tool, args, ctx)
    if not await ask(gate, scope, call_id, tool, verdict, preview, raw_args):
        raise RejectedByUser(tool.kind)
    # The question may have been open for minutes: the mode, the remembered answers or
    # where a path leads (a symlink swapped in) may have changed. Decide again, now.
    after = real_paths(tool, args, ctx)
    if after != before:
        changed = zip(after, before, strict=False)
        moved = ", ".join(f"{now} (was {then})" for now, then in changed if now != then)
        raise TargetChanged(moved or ", ".join(after))
    again = decide(gate.mode(), tool, args, ctx, gate.memory, gate.roots)
    if again.refusal is not None:
        raise again.refusal
    # The user saw what sandboxed commands changed and let a program run outside: seen.
    ctx.sandbox_changes[:] = [p for p in ctx.sandbox_changes if p not in verdict.unseen]


async def ask(
    gate: Gate,
    scope: anyio.CancelScope,
    call_id: str,
    tool: Tool[Any],
    verdict: Verdict,
    preview: Preview,
    raw_args: dict[str, Any],
) -> bool:
    """`session/request_permission`; True if the user allowed, remembering "always" answers.

    Besides the call's preview the question shows what sandboxed commands changed (when that
    is why it asks) and, when the options' labels cannot say it all, what "always" covers.
    QuestionFailed when the editor answered the question with an error."""
    keys = verdict.keys
    notes = [unseen_note(verdict.unseen)] if verdict.unseen else []
    notes += [text] if (text := covered(keys)) else []
    content = [*preview.content, *(ContentItem.of(note) for note in notes)]
    request = RequestPermissionParams(
        session_id=gate.ctx.session_id,
        tool_call=ToolCallFields(
            tool_call_id=call_id,
            title=preview.title,
            kind=tool.kind,
            status="pending",
            content=content or None,
            locations=preview.locations or None,
            raw_input=raw_args,
        ),
        options=options_for(keys),
    )
    try:
        answer = await gate.ctx.client_request("session/request_permission", request.dump())
        outcome = RequestPermissionResult.model_validate(answer).outcome
    except RpcError as exc:
        log.warning("permission request failed: %s", exc)
        raise QuestionFailed(exc.reason) from None
    except ValidationError as exc:
        log.warning("permission request answered oddly: %s", exc)
        raise QuestionFailed("its answer was not understood") from None
    except ConnectionClosed:
        return False  # the editor is gone: the turn ends with the connection
    if outcome.outcome != "selected":
        scope.cancel()
        await anyio.lowlevel.checkpoint()
        return False
    gate.memory.remember(outcome.option_id, keys)
    return outcome.option_id in ("allow_once", "allow_always")
