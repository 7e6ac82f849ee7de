"""`_session/steering` (agent.steering): a message for the turn that is running.

Params as codex-acp and claude-agent-acp take them: `{sessionId, prompt: ContentBlock[],
_meta?: {steering: {idleBehavior?: "promptRequired"}}}`; invalid params (no session id, an
empty prompt, an unknown idle behavior, an unknown session) are answered -32602, as they do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.acp.wire import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from agent.session import Session

IDLE_BEHAVIORS = (None, "promptRequired")


class SteeringMethod:
    def __init__(self, session: Callable[[str], Session]) -> None:
        self.session = session  # the live session a request is about (or RpcError)

    async def steer(self, params: dict[str, Any]) -> dict[str, Any]:
        from agent.acp.params import parse
        from agent.acp.protocol import PromptParams

        session_id, prompt = params.get("sessionId"), params.get("prompt")
        if not isinstance(session_id, str) or not session_id.strip():
            raise RpcError(INVALID_PARAMS, "steering params require a non-empty sessionId")
        if not isinstance(prompt, list) or not prompt:
            raise RpcError(INVALID_PARAMS, "steering params require a non-empty prompt array")
        meta = params.get("_meta")
        steering = meta.get("steering") if isinstance(meta, dict) else None
        idle = steering.get("idleBehavior") if isinstance(steering, dict) else None
        if idle not in IDLE_BEHAVIORS:
            raise RpcError(INVALID_PARAMS, f"unknown steering idleBehavior: {idle!r}")
        blocks = parse(PromptParams, {"sessionId": session_id, "prompt": prompt}).prompt
        if not blocks:
            raise RpcError(INVALID_PARAMS, "the steering prompt has no content block Heron reads")
        return await self.session(session_id).steering.submit(blocks)
