"""Calling a method for one JSON-RPC request, with jsonrpcserver 5's answers.

jsonrpcserver cannot be imported without jsonschema (its package compiles a request validator
at import), about a third of everything Heron imported before it could answer `session/new`.
This module gives the same answers for what `agent.acp.wire` hands it — one request or
notification whose envelope the wire has already checked — with one difference: the params are
data, handed to the method as one dict, never spread into Python arguments (jsonrpcserver
called `method(**params)`, so a member named `self` answered -32603 with a traceback):

- a member other than `jsonrpc`, `method`, `id`, `params` fails jsonrpcserver's schema:
  -32600 "Invalid request" with `id: null`, even for a notification;
- an unknown method: -32601 "Method not found", `data` the method's name;
- params that are not an object (a non-empty array): -32602 "Invalid params"; absent or `[]`
  params are the empty object;
- `JsonRpcError` raised by the method: that error; any other exception: -32603 "Internal
  error" with the exception's text (and the traceback on stderr);
- a notification gets no answer, whatever happened.

The method runs in a task of its own, as jsonrpcserver ran it (`asyncio.gather`): cancelling
the request delivers one CancelledError to the method, whose cleanup may still await.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

log = logging.getLogger("heron.dispatch")

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000

_MEMBERS = frozenset(("jsonrpc", "method", "id", "params"))


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


NODATA: Any = _Sentinel("NoData")  # an error without `data`
_NOID: Any = _Sentinel("NoId")  # a notification


class JsonRpcError(Exception):
    """Raised by a method to answer this error instead of a result."""

    def __init__(self, code: int, message: str, data: Any = NODATA) -> None:
        super().__init__(code, message, data)
        self.code, self.message, self.data = code, message, data


class Success:
    """What a method returns: the request's result."""

    __slots__ = ("result",)

    def __init__(self, result: Any = None) -> None:
        self.result = result

    def __repr__(self) -> str:
        return f"Success({self.result!r})"


Method = Callable[[dict[str, Any]], Awaitable[Success]]  # called with the params object


async def async_dispatch_to_serializable(
    request: str,
    methods: Mapping[str, Method],
    *,
    deserializer: Callable[[str], Any],
) -> dict[str, Any] | None:
    """The answer to send for `deserializer(request)` (a dict), or None for a notification."""
    try:
        message = deserializer(request)
        if not _MEMBERS.issuperset(message):
            return _error(INVALID_REQUEST, "Invalid request", _SCHEMA_FAILED, None)
        request_id = message.get("id", _NOID)
        params = message.get("params", {})
        error = _problem(methods, message["method"], params)
        if error is None:
            call = _call(methods[message["method"]], params or {})
            (outcome,) = await asyncio.gather(call)
            if isinstance(outcome, Success):
                if request_id is _NOID:
                    return None
                return {"jsonrpc": "2.0", "result": outcome.result, "id": request_id}
            error = outcome
        if request_id is _NOID:
            return None
        return _error(*error, request_id)
    except Exception as exc:  # a bug here: jsonrpcserver answered a server error
        log.exception("dispatching a request failed")
        return _error(SERVER_ERROR, "Server error", str(exc), None)


_SCHEMA_FAILED = "The request failed schema validation"


def _problem(methods: Mapping[str, Method], name: str, params: Any) -> tuple[int, str, Any] | None:
    method = methods.get(name)
    if method is None:
        return METHOD_NOT_FOUND, "Method not found", name
    if params and not isinstance(params, dict):
        return INVALID_PARAMS, "Invalid params", "params must be an object"
    return None


async def _call(method: Method, params: dict[str, Any]) -> Success | tuple[int, str, Any]:
    try:
        result = await method(params)
        if not isinstance(result, Success):
            raise TypeError(f"The method did not return a valid Result (returned {result!r})")
    except JsonRpcError as exc:
        return exc.code, exc.message, exc.data
    except Exception as exc:
        log.exception("method failed")
        return INTERNAL_ERROR, "Internal error", str(exc)
    return result


def _error(code: int, message: str, data: Any, request_id: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not NODATA:
        error["data"] = data
    return {"jsonrpc": "2.0", "error": error, "id": request_id}
