"""MCP servers end to end: the real `heron`, a scripted model, and small MCP servers written
with the official SDK (tests/mcp_servers/), over stdio, streamable HTTP and SSE on 127.0.0.1.
"""

from __future__ import annotations

import os
import random
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls
from test_tools_e2e import for_call, last, statuses, survivors, tool_result, wait_until

SERVER = str(Path(__file__).parent / "mcp_servers" / "tools_server.py")
ASK = ("--mode", "ask")
FULL = ("--mode", "full-access")


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


def stdio(markers: Path, name: str = "tools", **env: str) -> dict[str, Any]:
    pairs = {"MARKER_DIR": str(markers), **env}
    return {
        "name": name,
        "command": sys.executable,
        "args": [SERVER],
        "env": [{"name": k, "value": v} for k, v in pairs.items()],
    }


def agent(heron: Any, *args: str, env: dict[str, str] | None = None) -> Any:
    """heron, with room for servers that start slowly on a loaded test machine."""
    return heron(*args, env={"HERON_MCP_STARTUP_TIMEOUT": "30", **(env or {})})


def content_texts(update: dict[str, Any]) -> list[str]:
    return [
        c["content"].get("text", "")
        for c in update.get("content") or []
        if c["type"] == "content" and c["content"]["type"] == "text"
    ]


def tool_names(request: Any) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def server_pids(markers: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in markers.glob("pid-*")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent, heron, may not have reaped it yet).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(markers: Path) -> Iterator[Any]:
    """Start tools_server.py over HTTP (`streamable-http` or `sse`); yields its base URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(transport: str) -> str:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, SERVER, transport, str(port)],
            env={**os.environ, "MARKER_DIR": str(markers)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, 20, "MCP HTTP server listening")
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(5)


# ------------------------------------------------------------------------------- 1. tools listed


def test_stdio_tools_are_listed_to_the_model_with_names_and_schemas(
    heron, fake_llm, workspace, markers
):
    fake_llm.script(text("hello"))
    client = agent(heron)
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "hi")
    assert turn["stopReason"] == "end_turn"
    request = fake_llm.requests[0]
    names = tool_names(request)
    assert "read_file" in names  # the built-in ones stay
    for tool in ("echo", "write_note", "picture", "refuse", "hang", "crash", "grow"):
        assert f"mcp__tools__{tool}" in names
    echo = next(t for t in request.body["tools"] if t["function"]["name"] == "mcp__tools__echo")
    assert echo["function"]["description"] == "Echo the text back."
    params = echo["function"]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["text"]["type"] == "string"
    assert params["required"] == ["text"]


def test_server_names_are_sanitized_to_openai_function_names(heron, fake_llm, workspace, markers):
    fake_llm.script(text("hello"))
    client = agent(heron)
    sid = client.new_session(workspace, [stdio(markers, name="my server/ü")])
    client.prompt(sid, "hi")
    names = tool_names(fake_llm.requests[0])
    assert "mcp__my_server____echo" in names  # " ", "/" and "ü" each become "_"
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names)


def test_unusable_entries_are_skipped_and_the_session_still_works(
    heron, fake_llm, workspace, markers
):
    fake_llm.script(text("hello"))
    client = agent(heron)
    entries = [
        {"name": "nocommand", "args": [], "env": []},
        {"type": "http", "name": "badurl", "url": "ftp://x", "headers": []},
        {"type": "carrier-pigeon", "name": "bird"},
        stdio(markers),
    ]
    sid = client.new_session(workspace, entries)
    turn = client.prompt(sid, "hi")
    assert turn["stopReason"] == "end_turn"
    assert "mcp__tools__echo" in tool_names(fake_llm.requests[0])
    assert "skipped" in client.stderr


# ------------------------------------------------------------------------------- 2. calls


def test_read_only_tool_runs_unasked_with_raw_input_and_text_result(
    heron, fake_llm, workspace, markers
):
    fake_llm.script(tool_calls(Call("mcp__tools__echo", {"text": "hi"}, id="c1")), text("done"))
    client = agent(heron, *ASK)
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "go")
    assert turn["stopReason"] == "end_turn"
    updates = turn["updates"]
    assert statuses(updates, "c1") == ["pending", "in_progress", "completed"]
    mine = for_call(updates, "c1")
    assert mine[0]["kind"] == "read"
    assert mine[1]["rawInput"] == {"text": "hi"}
    assert mine[1]["title"] == "echo (tools)"
    assert content_texts(last(updates, "c1")) == ["echo: hi"]
    assert not [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert tool_result(fake_llm.requests[1], "c1") == "echo: hi"


def test_a_changing_tool_asks_and_allow_always_covers_that_tool(
    heron, fake_llm, workspace, markers
):
    note = Call("mcp__tools__write_note", {"note": "one"}, id="n1")
    note2 = Call("mcp__tools__write_note", {"note": "two"}, id="n2")
    fake_llm.script(tool_calls(note), text("ok"), tool_calls(note2), text("ok"))
    client = agent(heron, *ASK)
    client.permission = "allow_always"
    sid = client.new_session(workspace, [stdio(markers)])
    client.prompt(sid, "go")
    asked = [r.params for r in client.agent_requests if r.method == "session/request_permission"]
    assert len(asked) == 1
    assert asked[0]["toolCall"]["rawInput"] == {"note": "one"}
    names = {o["kind"]: o["name"] for o in asked[0]["options"]}
    assert "tool `write_note` of MCP server `tools`" in names["allow_always"]
    turn = client.prompt(sid, "again")
    assert statuses(turn["updates"], "n2") == ["pending", "in_progress", "completed"]
    asked = [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert len(asked) == 1  # remembered
    assert (markers / "notes.txt").read_text() == "one\ntwo\n"


def test_a_rejected_call_does_not_reach_the_server(heron, fake_llm, workspace, markers):
    fake_llm.script(tool_calls(Call("mcp__tools__write_note", {"note": "no"}, id="n1")), text("ok"))
    client = agent(heron, *("--mode", "accept-edits"))
    client.permission = "reject_once"
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "go")
    assert statuses(turn["updates"], "n1") == ["pending", "failed"]
    assert "Rejected" in tool_result(fake_llm.requests[1], "n1")
    assert not (markers / "notes.txt").exists()


def test_image_result_is_shown_as_image_content(heron, fake_llm, workspace, markers):
    fake_llm.script(tool_calls(Call("mcp__tools__picture", {}, id="p1")), text("ok"))
    client = agent(heron, *FULL)
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "go")
    end = last(turn["updates"], "p1")
    assert end["status"] == "completed"
    image = end["content"][0]["content"]
    assert image["type"] == "image"
    assert image["mimeType"] == "image/png"
    assert image["data"]
    assert "[image image/png" in tool_result(fake_llm.requests[1], "p1")


def test_is_error_result_is_a_failed_call_with_the_reason(heron, fake_llm, workspace, markers):
    fake_llm.script(
        tool_calls(Call("mcp__tools__refuse", {"reason": "no disk"}, id="r1")), text("ok")
    )
    client = agent(heron, *FULL)
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "go")
    assert statuses(turn["updates"], "r1") == ["pending", "in_progress", "failed"]
    reason = tool_result(fake_llm.requests[1], "r1")
    assert "cannot do that: no disk" in reason
    assert "cannot do that: no disk" in " ".join(content_texts(last(turn["updates"], "r1")))


def test_invalid_arguments_are_reported_by_the_server(heron, fake_llm, workspace, markers):
    fake_llm.script(tool_calls(Call("mcp__tools__echo", {"txt": 1}, id="e1")), text("ok"))
    client = agent(heron, *FULL)
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "go")
    assert statuses(turn["updates"], "e1")[-1] == "failed"
    assert "text" in tool_result(fake_llm.requests[1], "e1")


# ------------------------------------------------------------------------------- 3. failures


def test_a_server_that_fails_to_start_is_reported_once_and_the_session_works(
    heron, fake_llm, workspace, markers
):
    fake_llm.script(text("one"), text("two"))
    client = agent(heron)
    sid = client.new_session(
        workspace, [stdio(markers, name="broken", CRASH_ON_START="1"), stdio(markers)]
    )
    turn = client.prompt(sid, "hi")
    assert turn["stopReason"] == "end_turn"
    said = "".join(
        u["content"]["text"] for u in turn["updates"] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "broken" in said
    assert "the database is locked" in said  # its stderr's last lines
    names = tool_names(fake_llm.requests[0])
    assert "mcp__tools__echo" in names
    assert not [n for n in names if n.startswith("mcp__broken__")]
    turn = client.prompt(sid, "again")
    said = "".join(
        u["content"]["text"] for u in turn["updates"] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "broken" not in said  # once


def test_a_missing_command_is_reported(heron, fake_llm, workspace):
    fake_llm.script(text("one"))
    client = agent(heron)
    entry = {"name": "ghost", "command": "/nonexistent/mcp-server", "args": [], "env": []}
    sid = client.new_session(workspace, [entry])
    turn = client.prompt(sid, "hi")
    said = "".join(
        u["content"]["text"] for u in turn["updates"] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "ghost" in said
    assert "not found" in said


def test_a_crash_mid_call_fails_the_call_and_the_server_restarts_on_next_use(
    heron, fake_llm, workspace, markers
):
    fake_llm.script(
        tool_calls(Call("mcp__tools__crash", {}, id="x1")),
        tool_calls(Call("mcp__tools__echo", {"text": "back"}, id="x2")),
        text("ok"),
    )
    client = agent(heron, *FULL)
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "go")
    assert turn["stopReason"] == "end_turn"
    assert statuses(turn["updates"], "x1")[-1] == "failed"
    reason = tool_result(fake_llm.requests[1], "x1")
    assert "tools" in reason
    assert "segfault simulated" in reason
    assert statuses(turn["updates"], "x2")[-1] == "completed"
    assert tool_result(fake_llm.requests[2], "x2") == "echo: back"
    assert len(server_pids(markers)) == 2  # restarted once


def test_cancel_during_a_call_stops_it_on_the_server(heron, fake_llm, workspace, markers):
    fake_llm.script(tool_calls(Call("mcp__tools__hang", {}, id="h1")))
    client = agent(heron, *FULL)
    sid = client.new_session(workspace, [stdio(markers)])
    pending = client.prompt_async(sid, "go")
    client.wait_for_update(lambda u: u.get("status") == "in_progress", 20)
    client.cancel(sid)
    assert pending.result(30)["stopReason"] == "cancelled"  # the call hangs: only this ends it
    assert statuses(pending.updates(), "h1")[-1] == "failed"
    wait_until(lambda: (markers / "hang-cancelled").exists(), 30, "the server saw the cancel")


def test_list_changed_refreshes_the_tools_before_the_next_request(
    heron, fake_llm, workspace, markers
):
    fake_llm.script(
        tool_calls(Call("mcp__tools__grow", {}, id="g1")),
        tool_calls(Call("mcp__tools__fresh", {}, id="f1")),
        text("ok"),
    )
    client = agent(heron, *FULL)
    sid = client.new_session(workspace, [stdio(markers)])
    turn = client.prompt(sid, "go")
    assert turn["stopReason"] == "end_turn"
    assert "mcp__tools__fresh" not in tool_names(fake_llm.requests[0])
    assert "mcp__tools__fresh" in tool_names(fake_llm.requests[1])
    assert tool_result(fake_llm.requests[2], "f1") == "fresh result"


# ------------------------------------------------------------------------------- 4. transports


@pytest.mark.parametrize(
    ("transport", "kind", "path"), [("streamable-http", "http", "/mcp"), ("sse", "sse", "/sse")]
)
def test_http_transports(heron, fake_llm, workspace, http_server, transport, kind, path):
    base = http_server(transport)
    fake_llm.script(tool_calls(Call("mcp__web__echo", {"text": "net"}, id="w1")), text("ok"))
    client = agent(heron, *FULL)
    caps = client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert caps["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}
    entry = {
        "type": kind,
        "name": "web",
        "url": base + path,
        "headers": [{"name": "X-Test", "value": "1"}],
    }
    sid = client.new_session(workspace, [entry])
    turn = client.prompt(sid, "go")
    assert statuses(turn["updates"], "w1")[-1] == "completed"
    assert tool_result(fake_llm.requests[1], "w1") == "echo: net"


# ------------------------------------------------------------------------------- 5. lifetime


def test_a_server_that_never_answers_delays_neither_session_new_nor_the_prompt_much(
    heron, fake_llm, workspace, markers
):
    # `sleep` never speaks MCP: session/new answers anyway, the prompt waits for it at most
    # mcp_startup_timeout, then runs without it and says so; closing stdin stops it.
    fake_llm.script(text("hello"))
    client = agent(heron, env={"HERON_MCP_STARTUP_TIMEOUT": "3"})
    seconds = f"61.{random.randrange(10**7, 10**8)}"
    mute = {"name": "mute", "command": "sleep", "args": [seconds], "env": []}
    sid = client.new_session(workspace, [mute, stdio(markers)])
    turn = client.prompt(sid, "hi", timeout=20)
    assert turn["stopReason"] == "end_turn"
    said = "".join(
        u["content"]["text"] for u in turn["updates"] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "'mute' is still starting after 3 s" in said
    names = tool_names(fake_llm.requests[0])
    assert not [n for n in names if n.startswith("mcp__mute")]
    assert survivors(f"sleep {seconds}")
    client.close_stdin()
    assert client.wait_exit(30) == 0
    wait_until(lambda: not survivors(f"sleep {seconds}"), 30, "the mute server stopped")


def test_no_orphans_after_stdin_closes(heron, fake_llm, workspace, markers):
    fake_llm.script(text("hi"))
    client = agent(heron)
    seconds = f"62.{random.randrange(10**7, 10**8)}"
    entries = [stdio(markers, name="a", SPAWN_CHILD=seconds), stdio(markers, name="b")]
    sid = client.new_session(workspace, entries)
    client.prompt(sid, "hi")
    pids = server_pids(markers)
    assert len(pids) == 2
    assert all(alive(p) for p in pids)
    client.close_stdin()
    assert client.wait_exit(30) == 0
    wait_until(lambda: not any(alive(p) for p in pids), 30, "servers gone")
    wait_until(lambda: not survivors(f"sleep {seconds}"), 30, "the server's child gone")
