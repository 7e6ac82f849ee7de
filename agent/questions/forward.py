"""An MCP server's `elicitation/create`, passed on to the client (the package's docstring).

A form goes to the client as an ACP `elicitation/create` in form mode, linked to the tool call
that is running on that server (when exactly one is); its answer goes back to the server as
it came. Declined, with the reason in the result's `_meta.reason` and the log, when it cannot
be shown: the client shows no forms, nobody is there to answer, a URL elicitation (not
forwarded), a form the ACP schema cannot carry, or a client that answered with an error.
"""

from __future__ import annotations

import logging
from typing import Any

from agent.acp.wire import ConnectionClosed, RpcError
from agent.questions.ask import Asker

log = logging.getLogger("heron.questions")

FIELD_TYPES = ("string", "number", "integer", "boolean", "array")


def declined(reason: str) -> dict[str, Any]:
    log.info("an MCP server's elicitation was declined: %s", reason)
    return {"action": "decline", "_meta": {"reason": reason}}


async def forward(
    asker: Asker, server: str, call_id: str | None, mode: str, message: str, schema: Any
) -> dict[str, Any]:
    """The MCP `ElicitResult` (as a dict) for server `server`'s elicitation."""
    if not asker.present():
        return declined("nobody is there to answer (Heron runs without a user)")
    if mode != "form":
        return declined(f"Heron does not pass on {mode!r} elicitations")
    if not asker.form:
        return declined("the editor cannot show forms (it did not advertise elicitation.form)")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not all(
        isinstance(p, dict) and p.get("type") in FIELD_TYPES for p in properties.values()
    ):
        return declined("the form has fields ACP cannot carry")
    params: dict[str, Any] = {
        "sessionId": asker.session_id,
        "mode": "form",
        "message": f"{server}: {message}",
        "requestedSchema": {**schema, "type": "object"},
    }
    if call_id:
        params["toolCallId"] = call_id
    try:
        result = await asker.request("elicitation/create", params)
    except (RpcError, ConnectionClosed) as exc:
        reason = exc.reason if isinstance(exc, RpcError) else str(exc)
        return declined(f"the editor answered with an error: {reason}")
    action = result.get("action") if isinstance(result, dict) else None
    if action == "accept":
        content = result.get("content")
        return {"action": "accept", "content": content if isinstance(content, dict) else {}}
    return {"action": action if action in ("decline", "cancel") else "decline"}
