"""`agent.acp.params` reads `initialize` and `session/new` params exactly as the pydantic models do.

The readers take the usual shapes without pydantic (start-up) and hand everything else to the
models; whichever way a params object goes, the result must be the models' result.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.acp import params, protocol
from agent.acp.wire import RpcError

INITIALIZE: list[Any] = [
    {"protocolVersion": 1},
    {"protocolVersion": 1, "clientCapabilities": {}},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {}, "terminal": True}},
    {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": False},
            "terminal": False,
            "auth": {"terminal": True},
            "_meta": {"x": 1},
        },
        "clientInfo": {"name": "zed", "version": "0.200.0", "title": "Zed"},
    },
    {"protocolVersion": 7, "clientInfo": {"name": "x"}},
    {"protocolVersion": 1, "clientInfo": None},
    # Shapes only the model knows what to do with:
    {"protocolVersion": "1"},
    {"protocolVersion": 1.0},
    {"protocolVersion": True},
    {"protocol_version": 1},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": "yes"}, "terminal": 1}},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"read_text_file": True}}},
    {"protocolVersion": 1, "clientCapabilities": {"fs": None, "terminal": None}},
    {"protocolVersion": 1, "clientCapabilities": {"fs": "all"}},
    {"protocolVersion": 1, "clientCapabilities": None},
    {"protocolVersion": 1, "clientCapabilities": []},
    {"protocolVersion": 1, "client_capabilities": {"terminal": True}},
    {"protocolVersion": 1, "clientInfo": {"name": 3}},
    {"protocolVersion": 1, "clientInfo": {"name": "x", "version": None}},
    {"protocolVersion": 1, "clientInfo": {"name": "x", "title": 5}},
    {"protocolVersion": 1, "clientInfo": "zed"},
    {"protocolVersion": 1, "client_info": {"name": "x"}},
    # Invalid: the model's error.
    {},
    {"protocolVersion": None},
    {"protocolVersion": "one"},
]

NEW_SESSION: list[Any] = [
    {"cwd": "/w"},
    {"cwd": "/w", "mcpServers": []},
    {"cwd": "/w", "mcpServers": [{"name": "a", "command": "x", "args": [], "env": []}]},
    {"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/a", "/b"], "_meta": {}},
    {"cwd": "relative/is/checked/later"},
    # Shapes only the model knows what to do with:
    {"cwd": "/w", "mcpServers": "none"},
    {"cwd": "/w", "mcpServers": None},
    {"cwd": "/w", "mcpServers": [{"name": "a"}, "junk", 3, None]},
    {"cwd": "/w", "additionalDirectories": ["/a", 3, None]},
    {"cwd": "/w", "additionalDirectories": "/a"},
    {"cwd": "/w", "mcp_servers": [{"name": "a"}]},
    {"cwd": "/w", "mcpServers": [{}], "mcp_servers": [{"name": "a"}]},
    {"cwd": "/w", "additional_directories": ["/a"]},
    # Invalid: the model's error.
    {},
    {"cwd": None},
    {"cwd": 5},
    {"cwd": ["/w"]},
]


def outcome(read: Any, params_: dict[str, Any]) -> Any:
    try:
        return read(params_)
    except RpcError as exc:
        return ("error", exc.code, exc.message)


def initialize_by_model(params_: dict[str, Any]) -> Any:
    parsed = params.parse(protocol.InitializeParams, params_)
    caps, info = parsed.client_capabilities, parsed.client_info
    return (
        (caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal),
        (info.name, info.version) if info is not None else None,
    )


def initialize_by_reader(params_: dict[str, Any]) -> Any:
    parsed = params.read_initialize(params_)
    caps, info = parsed.client_capabilities, parsed.client_info
    return (
        (caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal),
        (info.name, info.version) if info is not None else None,
    )


@pytest.mark.parametrize("params_", INITIALIZE, ids=repr)
def test_initialize_params_are_read_as_the_model_reads_them(params_: dict[str, Any]) -> None:
    assert outcome(initialize_by_reader, params_) == outcome(initialize_by_model, params_)


def new_session_by_model(params_: dict[str, Any]) -> Any:
    parsed = params.parse(protocol.NewSessionParams, params_)
    return (parsed.cwd, parsed.mcp_servers, parsed.additional_directories)


def new_session_by_reader(params_: dict[str, Any]) -> Any:
    parsed = params.read_new_session(params_)
    return (parsed.cwd, parsed.mcp_servers, parsed.additional_directories)


@pytest.mark.parametrize("params_", NEW_SESSION, ids=repr)
def test_new_session_params_are_read_as_the_model_reads_them(params_: dict[str, Any]) -> None:
    assert outcome(new_session_by_reader, params_) == outcome(new_session_by_model, params_)


def test_what_a_session_keeps_is_a_copy_of_the_params() -> None:
    servers = [{"name": "a", "command": "x"}]
    directories = ["/a"]
    parsed = params.read_new_session(
        {"cwd": "/w", "mcpServers": servers, "additionalDirectories": directories}
    )
    servers[0]["command"] = "changed"
    directories.append("/b")
    assert parsed.mcp_servers == [{"name": "a", "command": "x"}]
    assert parsed.additional_directories == ["/a"]


SESSION_ID: list[Any] = [
    {"sessionId": "s"},
    {"sessionId": "s", "prompt": []},
    {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}, {"type": 3}, "junk"]},
    {"sessionId": "s", "prompt": "not a list"},
    {"sessionId": "s", "prompt": None},
    {"sessionId": "s", "session_id": "t", "prompt": []},
    {"session_id": "s", "prompt": []},
    {"sessionId": 5, "prompt": []},
    {"sessionId": None},
    {"prompt": []},
    {},
]


@pytest.mark.parametrize("params_", SESSION_ID, ids=repr)
def test_a_certain_session_id_is_one_the_models_accept(params_: dict[str, Any]) -> None:
    for model, required in ((protocol.SessionIdParams, ()), (protocol.PromptParams, ("prompt",))):
        certain = params.certain_session_id(params_, *required)
        if certain is not None:
            assert params.parse(model, params_).session_id == certain
    # The usual shapes are certain (they are what every editor sends).
    if params_ in ({"sessionId": "s"}, {"sessionId": "s", "prompt": []}):
        assert params.certain_session_id(params_) == "s"


def test_prompt_blocks_read_later_are_the_models() -> None:
    params_ = {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}, "junk"]}
    assert params.read_prompt_blocks(params_) == params.parse(protocol.PromptParams, params_).prompt
