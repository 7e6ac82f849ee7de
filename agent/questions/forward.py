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


def acp_form(schema: Any) -> dict[str, Any] | None:
    """The MCP server's form as ACP's `ElicitationSchema` can carry it: each field rebuilt from
    what ACP knows of its type (anything else left out), None when a field cannot be."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not 0 < len(properties) <= MAX_FIELDS:
        return None
    fields: dict[str, Any] = {}
    for name, field in properties.items():
        rebuilt = _field(field) if isinstance(name, str) and isinstance(field, dict) else None
        if rebuilt is None:
            return None
        fields[name] = rebuilt
    form: dict[str, Any] = {"type": "object", "properties": fields}
    required = schema.get("required")
    if isinstance(required, list):
        form["required"] = [r for r in required if isinstance(r, str) and r in fields]
    for key in ("title", "description"):
        if isinstance(schema.get(key), str):
            form[key] = schema[key]
    return form


MAX_FIELDS = 50
_FORMATS = ("email", "uri", "date", "date-time")


def _field(field: dict[str, Any]) -> dict[str, Any] | None:
    kind = field.get("type")
    if kind not in FIELD_TYPES:
        return None
    out: dict[str, Any] = {"type": kind}
    for key in ("title", "description"):
        if isinstance(field.get(key), str):
            out[key] = field[key]

    def keep(key: str, ok: Any) -> None:
        if key in field and ok(field[key]):
            out[key] = field[key]

    count = lambda v: type(v) is int and 0 <= v < 2**32  # noqa: E731
    strings = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
    if kind == "string":
        keep("minLength", count)
        keep("maxLength", count)
        keep("pattern", lambda v: isinstance(v, str))
        keep("format", lambda v: v in _FORMATS)
        keep("default", lambda v: isinstance(v, str))
        keep("enum", strings)
        keep("oneOf", _options)
    elif kind in ("number", "integer"):
        number = (lambda v: type(v) is int) if kind == "integer" else _is_number
        for key in ("minimum", "maximum", "default"):
            keep(key, number)
    elif kind == "boolean":
        keep("default", lambda v: type(v) is bool)
    else:
        items = field.get("items")
        if isinstance(items, dict) and strings(items.get("enum")):
            out["items"] = {"type": "string", "enum": items["enum"]}
        elif isinstance(items, dict) and _options(items.get("anyOf")):
            out["items"] = {"anyOf": items["anyOf"]}
        else:
            return None
        keep("minItems", count)
        keep("maxItems", count)
        keep("default", strings)
    return out


def _options(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(o, dict)
        and isinstance(o.get("const"), str)
        and isinstance(o.get("title"), str)
        and set(o) <= {"const", "title"}
        for o in value
    )


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and value == value and abs(value) != float("inf")


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
    form = acp_form(schema)
    if form is None:
        return declined("the form has fields ACP cannot carry")
    params: dict[str, Any] = {
        "sessionId": asker.session_id,
        "mode": "form",
        "message": f"{server}: {message}"[:4000],
        "requestedSchema": form,
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
