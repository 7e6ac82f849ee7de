"""`agent.acp.dispatch` answers as jsonrpcserver 5 did, for what the wire hands it.

The wire used jsonrpcserver until its import (jsonschema, a compiled validator) was found to be
a third of Heron's start-up; these tests hold the replacement to the library's answers. One
difference is wanted: the params reach a method as one dict, never as Python arguments.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from agent.acp import dispatch

jsonrpcserver = pytest.importorskip("jsonrpcserver")
from jsonrpcserver.exceptions import JsonRpcError as LibJsonRpcError  # noqa: E402
from jsonrpcserver.sentinels import NODATA as LIB_NODATA  # noqa: E402


def methods_for(
    success: Any, error: type[Exception], nodata: Any, *, one_dict: bool = True
) -> dict[str, Any]:
    """The same handlers, wired to one implementation's result and error types (and its way
    of passing the params: one dict for Heron's, keyword arguments for jsonrpcserver's)."""

    async def echo(params: Any) -> Any:
        return success(params or {})

    async def fails(params: Any) -> Any:
        raise error(-32602, "Invalid params: cwd: Field required", nodata)

    async def fails_with_data(params: Any) -> Any:
        raise error(-32000, "Authentication required", {"why": "no model"})

    async def crashes(params: Any) -> Any:
        raise RuntimeError("boom")

    async def bad_result(params: Any) -> Any:
        return {"not": "wrapped"}

    methods = {
        "echo": echo,
        "fails": fails,
        "fails_with_data": fails_with_data,
        "crashes": crashes,
        "bad_result": bad_result,
    }
    if one_dict:
        return methods

    def spread(method: Any) -> Any:
        async def call(**params: Any) -> Any:
            return await method(params)

        return call

    return {name: spread(method) for name, method in methods.items()}


MESSAGES: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"a": 1}},
    {"jsonrpc": "2.0", "id": "x", "method": "echo"},
    {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": []},
    {"jsonrpc": "2.0", "id": 4, "method": "nope", "params": {}},
    {"jsonrpc": "2.0", "method": "nope", "params": {}},
    {"jsonrpc": "2.0", "id": 5, "method": "fails", "params": {}},
    {"jsonrpc": "2.0", "id": 6, "method": "fails_with_data", "params": {}},
    {"jsonrpc": "2.0", "id": 7, "method": "crashes", "params": {}},
    {"jsonrpc": "2.0", "method": "crashes", "params": {}},
    {"jsonrpc": "2.0", "id": 8, "method": "bad_result"},
    # Members the JSON-RPC schema does not allow: refused with id null, even a notification.
    {"jsonrpc": "2.0", "id": 13, "method": "echo", "params": {}, "extra": True},
    {"jsonrpc": "2.0", "method": "echo", "result": 1},
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: repr(m)[:60])
def test_the_same_answer_as_jsonrpcserver(message: dict[str, Any]) -> None:
    async def both() -> tuple[Any, Any]:
        ours = await dispatch.async_dispatch_to_serializable(
            "",
            methods=methods_for(dispatch.Success, dispatch.JsonRpcError, dispatch.NODATA),
            deserializer=lambda _: message,
        )
        theirs = await jsonrpcserver.async_dispatch_to_serializable(
            "",
            methods=methods_for(jsonrpcserver.Success, LibJsonRpcError, LIB_NODATA, one_dict=False),
            deserializer=lambda _: message,
        )
        return ours, theirs

    ours, theirs = asyncio.run(both())
    assert ours == theirs
    assert ours is None or list(ours) == list(theirs)  # the same member order on the wire


def answer(message: dict[str, Any]) -> Any:
    methods = methods_for(dispatch.Success, dispatch.JsonRpcError, dispatch.NODATA)
    return asyncio.run(
        dispatch.async_dispatch_to_serializable("", methods=methods, deserializer=lambda _: message)
    )


def test_params_are_one_dict_whatever_their_member_names() -> None:
    """A member named like a Python parameter (`self`, `params`) is data like any other."""
    params = {"self": 1, "params": 2, "method": 3}
    message = {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": params}
    assert answer(message) == {"jsonrpc": "2.0", "result": params, "id": 1}


def test_array_params_are_invalid_params() -> None:
    message = {"jsonrpc": "2.0", "id": 3, "method": "echo", "params": [1, 2]}
    assert answer(message)["error"]["code"] == -32602
    assert answer({**message, "params": []})["result"] == {}
    assert answer({"jsonrpc": "2.0", "method": "echo", "params": [1]}) is None  # notification


def cancel_during_cleanup(dispatcher: Any, success: Any) -> list[str]:
    """What a cancelled request's method got done of its cleanup (an await in `finally`,
    a shielded one): cancel the scope the wire holds around the dispatch."""
    done: list[str] = []

    async def slow(*args: Any, **params: Any) -> Any:
        try:
            await anyio.sleep(10)
        finally:
            try:
                await anyio.sleep(0)
                done.append("await")
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.01)
                    done.append("shielded")
        return success({})

    async def main() -> None:
        message = {"jsonrpc": "2.0", "id": 1, "method": "slow", "params": {}}
        scope = anyio.CancelScope()

        async def request() -> None:
            with scope:
                await dispatcher("", methods={"slow": slow}, deserializer=lambda _: message)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(request)
            await anyio.sleep(0.01)
            scope.cancel()

    anyio.run(main)
    return done


def test_a_cancelled_request_ends_as_with_jsonrpcserver() -> None:
    """jsonrpcserver ran the method in a task of its own (`asyncio.gather`), which the
    cancellation reaches natively, shields or not: kept as it was."""
    ours = cancel_during_cleanup(dispatch.async_dispatch_to_serializable, dispatch.Success)
    theirs = cancel_during_cleanup(
        jsonrpcserver.async_dispatch_to_serializable, jsonrpcserver.Success
    )
    assert ours == theirs
