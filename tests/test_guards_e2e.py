"""Issue 21's guards, through the real `heron`: params are data, MCP permission keys cannot
collide, Heron's own configuration is protected, commands and MCP servers do not inherit
Heron's credentials, `heron exec --yes` lasts one run, project command files cannot shadow
the user's, and MCP servers are bounded (stderr, results, descriptions)."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp_client import RpcError
from fake_openai import Call, text, tool_calls
from test_mcp_e2e import ASK, agent, stdio
from test_tools_e2e import statuses


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


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


def test_mcp_always_allow_covers_one_server_and_tool_whatever_their_names(
    heron, fake_llm, workspace, markers
):
    """`list_repos` of server `gh:enterprise` and `enterprise:list_repos` of server `gh` once
    shared the key `mcp:gh:enterprise:list_repos`: allowing one always allowed the other."""
    first = Call("mcp__gh_enterprise__list_repos", {}, id="m1")
    second = Call("mcp__gh__enterprise_list_repos", {}, id="m2")
    fake_llm.script(tool_calls(first), text("ok"), tool_calls(second), text("ok"))
    client = agent(heron, *ASK)
    client.permission = "allow_always"
    servers = [
        stdio(markers, name="gh:enterprise", EXTRA_TOOL="list_repos"),
        stdio(markers, name="gh", EXTRA_TOOL="enterprise:list_repos"),
    ]
    sid = client.new_session(workspace, servers)
    client.prompt(sid, "go")
    asked = [r.params for r in client.agent_requests if r.method == "session/request_permission"]
    assert len(asked) == 1
    always = next(o["name"] for o in asked[0]["options"] if o["kind"] == "allow_always")
    assert "`list_repos`" in always and "`gh:enterprise`" in always
    client.permission = "reject_once"
    turn = client.prompt(sid, "again")
    asked = [r.params for r in client.agent_requests if r.method == "session/request_permission"]
    assert len(asked) == 2  # the other server's tool asks
    assert "`enterprise:list_repos`" in asked[1]["options"][1]["name"]
    assert statuses(turn["updates"], "m2")[-1] == "failed"
