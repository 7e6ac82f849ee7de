"""Issue 21's guards, through the real `heron`: params are data, MCP permission keys cannot
collide, Heron's own configuration is protected, commands and MCP servers do not inherit
Heron's credentials, `heron exec --yes` lasts one run, project command files cannot shadow
the user's, and MCP servers are bounded (stderr, results, descriptions)."""

from __future__ import annotations

import pytest
from acp_client import RpcError


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("initialize", {"protocolVersion": 1, "self": 1}),
        ("session/new", {"cwd": "WORKSPACE", "mcpServers": [], "self": {}}),
        ("session/list", {"self": None, "params": 1}),
        ("session/set_mode", {"sessionId": "nope", "modeId": "ask", "self": 1}),
        ("session/load", {"sessionId": "nope", "cwd": "WORKSPACE", "mcpServers": [], "self": 1}),
    ],
)
def test_a_member_named_self_is_data_not_a_python_argument(heron, workspace, method, params):
    client = heron()
    params = {k: workspace if v == "WORKSPACE" else v for k, v in params.items()}
    try:
        client.request(method, params)
    except RpcError as exc:
        assert exc.code == -32602, exc  # never -32603 with a traceback
    assert "Traceback" not in client.stderr
    assert client.new_session(workspace)  # and it keeps serving
