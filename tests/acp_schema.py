"""Validate ACP messages against the official v1 JSON schema, payload by payload.

Validating a whole JSON-RPC message against the schema's root catches almost
nothing (the open Ext* shapes accept any payload), so each params/result is
checked against its own ``$defs`` entry, found through ``x-method``/``x-side``.

Methods the stable schema does not define yet (`session/fork`, unstable in v1) are checked
against the unstable schema published beside it (``schema.unstable.json``); everything the
stable schema defines is checked against the stable one.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, relevance

__all__ = ["schema_path", "validate_agent_message", "validate_client_payload"]

RequestId = int | str | None


def schema_path() -> Path:
    """``$ACP_SCHEMA``, or the copy kept in the repository (``tests/data/acp-schema``)."""
    override = os.environ.get("ACP_SCHEMA")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent / "data" / "acp-schema" / "v1" / "schema.json"


@dataclass(frozen=True)
class _Schema:
    defs: dict[str, Any]
    agent_results: dict[str, str]  # method the agent handles -> its *Response def
    agent_sends: dict[str, str]  # method the agent may send -> its *Request/*Notification def
    unstable: _Schema | None = None  # for methods this one does not define


@functools.cache
def _schema() -> _Schema:
    path = schema_path()
    if not path.is_file():
        raise FileNotFoundError(f"ACP schema not found at {path} (set ACP_SCHEMA to override)")
    unstable_path = path.with_name("schema.unstable.json")
    unstable = _read(unstable_path) if unstable_path.is_file() else None
    stable = _read(path)
    return _Schema(stable.defs, stable.agent_results, stable.agent_sends, unstable)


def _read(path: Path) -> _Schema:
    defs = json.loads(path.read_text())["$defs"]
    agent_results: dict[str, str] = {}
    agent_sends: dict[str, str] = {}
    for name, d in defs.items():
        method, side = d.get("x-method"), d.get("x-side")
        if method is None:
            continue
        if side == "agent" and name.endswith("Response"):
            agent_results[method] = name
        # "client" methods are handled by the client, so the agent sends them;
        # "protocol" ones ($/cancel_request) may be sent by either side.
        elif side in ("client", "protocol") and name.endswith(("Request", "Notification")):
            agent_sends[method] = name
    return _Schema(defs, agent_results, agent_sends)


# The schema tags integers with Rust widths; enforce their ranges so an
# out-of-range number (which the Rust reference client would reject) is caught.
_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_formats = FormatChecker(formats=())
for _name, (_lo, _hi) in _INT_RANGES.items():
    _formats.checks(_name)(
        lambda v, lo=_lo, hi=_hi: not isinstance(v, int) or isinstance(v, bool) or lo <= v <= hi
    )


def _for_method(method: str) -> _Schema:
    """The stable schema, or the unstable one for a method only that one defines."""
    s = _schema()
    known = method in s.agent_results or method in s.agent_sends
    if not known and s.unstable is not None:
        return s.unstable
    return s


@functools.cache
def _validator(def_name: str, unstable: bool = False) -> Draft202012Validator:
    s = _schema()
    if unstable and s.unstable is not None:
        s = s.unstable
    if def_name not in s.defs:
        raise KeyError(f"no $defs entry {def_name!r} in the ACP schema")
    return Draft202012Validator(
        {"$ref": f"#/$defs/{def_name}", "$defs": s.defs}, format_checker=_formats
    )


def _short(value: Any, limit: int = 300) -> str:
    """JSON for a value, clipped so a huge payload does not flood the report."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _where(err: ValidationError) -> str:
    return "/".join(str(p) for p in err.absolute_path) or "<root>"


def _is_null_branch(errs: list[ValidationError]) -> bool:
    return len(errs) == 1 and errs[0].validator == "type" and errs[0].validator_value == "null"


def _explain(err: ValidationError) -> str:
    """Where and why ``err`` failed, looking inside oneOf/anyOf branch failures.

    ACP unions are tagged (``sessionUpdate``, ``type``, ``outcome``...): a branch
    whose tag did not match fails on a ``const``. If exactly one branch has the
    right tag, its own error is the real reason; if none has, the tag itself is
    wrong, so list the allowed values.
    """
    while err.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in err.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        # Nullable fields are anyOf [X, {"type": "null"}]; the null branch never explains.
        branches = {k: v for k, v in branches.items() if not _is_null_branch(v)}
        consts = [
            next((e for e in errs if e.validator == "const"), None) for errs in branches.values()
        ]
        if consts.count(None) == 1:  # exactly one branch accepted its tag
            err = max(branches[list(branches)[consts.index(None)]], key=relevance)
        elif None not in consts:
            tag = consts[0]
            allowed = [c.validator_value for c in consts if c is not None]
            return f"at {_where(tag)}: {_short(tag.instance)} is not one of {_short(allowed)}"
        else:
            break
    return f"at {_where(err)}: {err.message[:300]}"


def validate_client_payload(def_name: str, payload: Any, unstable: bool = False) -> list[str]:
    """Problems of ``payload`` against ``$defs[def_name]`` (empty list = valid); `unstable`:
    of the unstable schema."""
    errors = list(_validator(def_name, unstable).iter_errors(payload))
    if not errors:
        return []
    problem = f"{def_name} {_explain(max(errors, key=relevance))}"
    if len(errors) > 1:
        problem += f" (+{len(errors) - 1} more)"
    return [problem]


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def validate_agent_message(
    msg: Any, method_of_request: Callable[[RequestId], str | None]
) -> list[str]:
    """Problems with one message the agent wrote to stdout (empty list = valid).

    ``method_of_request(id)`` maps the id of a request the client sent to its
    method, or None when the client never sent such an id.
    """
    if not isinstance(msg, dict):
        return [f"message is not a JSON object: {_short(msg)}"]
    problems = []
    if msg.get("jsonrpc") != "2.0":
        problems.append(f'"jsonrpc" must be "2.0", got {_short(msg.get("jsonrpc"))}')
    if "method" in msg:
        problems += _check_outgoing(msg)
    elif "id" in msg:
        problems += _check_response(msg, method_of_request)
    else:
        problems.append("message has neither 'method' nor 'id'")
    return problems


def _check_outgoing(msg: dict[str, Any]) -> list[str]:
    """A request or notification the agent sends to the client."""
    method = msg["method"]
    extra = set(msg) - {"jsonrpc", "id", "method", "params"}
    problems = [f"unexpected top-level keys {sorted(extra)}"] if extra else []
    if not isinstance(method, str):
        return [*problems, f"'method' must be a string, got {_short(method)}"]
    if "id" in msg and not _is_request_id(msg["id"]):
        problems.append(f"{method}: request id must be a string or integer, got {msg['id']!r}")
    if method.startswith("_"):
        return problems  # extension methods have no schema
    schema = _for_method(method)
    def_name = schema.agent_sends.get(method)
    if def_name is None:
        return [*problems, f"agent sent unknown method {method!r}"]
    if def_name.endswith("Notification") and "id" in msg:
        problems.append(f"{method} is a notification but was sent with an id")
    if def_name.endswith("Request") and "id" not in msg:
        problems.append(f"{method} is a request but was sent without an id")
    unstable = schema is not _schema()
    problems += [
        f"{method}: {p}" for p in validate_client_payload(def_name, msg.get("params"), unstable)
    ]
    return problems


def _check_response(
    msg: dict[str, Any], method_of_request: Callable[[RequestId], str | None]
) -> list[str]:
    """A response to a request the client sent."""
    rid = msg["id"]
    extra = set(msg) - {"jsonrpc", "id", "result", "error"}
    problems = [f"unexpected top-level keys {sorted(extra)}"] if extra else []
    if ("result" in msg) == ("error" in msg):
        return [*problems, f"response {rid!r} must have exactly one of 'result' and 'error'"]
    if rid is not None and not _is_request_id(rid):
        return [*problems, f"response id must be a string, integer or null, got {_short(rid)}"]
    method = None if rid is None else method_of_request(rid)
    if rid is not None and method is None:
        problems.append(f"response to an id the client never sent: {rid!r}")
    if "error" in msg:
        return problems + [f"error: {p}" for p in validate_client_payload("Error", msg["error"])]
    if rid is None:
        return [*problems, "a response with id null must be an error (it answers a parse error)"]
    if method is None or method.startswith("_"):
        return problems
    schema = _for_method(method)
    def_name = schema.agent_results.get(method)
    if def_name is None:
        return [*problems, f"result for {method!r}, which has no response in the schema"]
    unstable = schema is not _schema()
    return problems + [
        f"{method}: {p}" for p in validate_client_payload(def_name, msg["result"], unstable)
    ]
