"""Units of agent/mcp: the ACP entries, tool names, result mapping, and the close hook that
session/close, session/delete and exit use (Session.aclose → McpManager.aclose)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from agent.acp.protocol import ToolCallProgress
from agent.mcp.config import HttpServer, StdioServer, parse_servers, tool_name
from agent.mcp.manager import McpManager
from agent.mcp.tool import to_tool_result

SERVER = str(Path(__file__).parent / "mcp_servers" / "tools_server.py")


def test_entries_are_parsed_and_unusable_ones_skipped(caplog):
    entries = [
        {"name": "a", "command": "/bin/a", "args": ["x"], "env": [{"name": "K", "value": "v"}]},
        {
            "type": "http",
            "name": "h",
            "url": "https://h/mcp",
            "headers": [{"name": "A", "value": "b"}],
        },
        {"type": "sse", "name": "s", "url": "http://s/sse", "headers": []},
        {"name": "a", "command": "/bin/again", "args": [], "env": []},  # duplicate name
        {"name": "noenv", "command": "/bin/x", "args": [], "env": {"K": "v"}},  # not a list
        {"type": "ws", "name": "w", "url": "ws://w"},
        "junk",
    ]
    servers = parse_servers(entries)
    assert servers == [
        StdioServer("a", "/bin/a", ["x"], {"K": "v"}),
        HttpServer("h", "https://h/mcp", {"A": "b"}, "http"),
        HttpServer("s", "http://s/sse", {}, "sse"),
    ]
    assert caplog.text.count("skipped") == 4


def test_tool_names_fit_openai_and_stay_unique():
    taken: set[str] = set()
    first = tool_name("srv", "x" * 80, taken)
    taken.add(first)
    second = tool_name("srv", "x" * 81, taken)
    assert len(first) == len(second) == 64
    assert first != second
    assert tool_name("a.b c", "t/1", set()) == "mcp__a_b_c__t_1"


def test_results_map_to_acp_content():
    blocks = [
        SimpleNamespace(type="text", text="hi"),
        SimpleNamespace(
            type="resource",
            resource=SimpleNamespace(uri="file:///a.txt", text="body", mime_type="text/plain"),
        ),
        SimpleNamespace(
            type="resource",
            resource=SimpleNamespace(uri="file:///b.bin", text=None, blob="AAAA", mime_type=None),
        ),
        SimpleNamespace(type="resource_link", uri="file:///c", name="c"),
    ]
    result = to_tool_result(
        SimpleNamespace(content=blocks, structured_content=None, is_error=False)
    )
    assert result.ok
    assert "hi" in result.output and "body" in result.output and "file:///b.bin" in result.output
    dumped = ToolCallProgress(tool_call_id="t", content=result.content).dump()
    kinds = [c["content"]["type"] for c in dumped["content"]]
    assert kinds == ["text", "resource", "resource", "resource_link"]
    assert dumped["content"][2]["content"]["resource"] == {"uri": "file:///b.bin", "blob": "AAAA"}


def test_aclose_stops_the_servers(tmp_path):
    async def main() -> list[int]:
        entries = [
            {
                "name": "t",
                "command": sys.executable,
                "args": [SERVER],
                "env": [{"name": "MARKER_DIR", "value": str(tmp_path)}],
            }
        ]
        manager = McpManager(parse_servers(entries), cwd=str(tmp_path), startup_timeout=60)
        async with anyio.create_task_group() as tg:
            manager.start(tg.start_soon)
            assert await manager.prepare() == []
            assert "mcp__t__echo" in [t.name for t in manager.tools()]
            pids = [int(p.name[4:]) for p in tmp_path.glob("pid-*")]
            assert pids and all(_alive(p) for p in pids)
            await manager.aclose()
        return pids

    pids = anyio.run(main)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level("WARNING", logger="heron.mcp")


def test_a_result_of_many_blocks_is_bounded_for_the_editor():
    blocks = [SimpleNamespace(type="text", text="z" * 50_000) for _ in range(1_000)]
    result = to_tool_result(
        SimpleNamespace(content=blocks, structured_content=None, is_error=False)
    )
    shown = ToolCallProgress(tool_call_id="t", content=result.content).dump()["content"]
    assert len(shown) == 101  # 100 blocks, then a note
    assert "900 more blocks not shown" in shown[-1]["content"]["text"]
    assert sum(len(c["content"]["text"]) for c in shown) < 200_000


def test_the_stderr_tail_is_bounded_by_bytes_and_keeps_the_last_words():
    from agent.mcp.client import STDERR_TAIL, StderrTail

    tail = StderrTail("t")
    for _ in range(50):
        tail.writer.write("y" * 100_000)
    tail.writer.write("\nfirst\nthe last words\n")
    tail.close_writer()
    tail._reader.join(10)
    assert len(tail.tail) <= STDERR_TAIL
    assert tail.lines[-2:] == ["first", "the last words"]
    assert tail.lines[0].startswith("…") and len(tail.lines[0]) <= 501
