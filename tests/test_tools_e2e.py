"""Tool calls end to end: the real `heron` executable, a scripted model, a test editor.

Each test scripts the model's tool calls, runs one prompt turn and checks what the editor saw
(the `tool_call` / `tool_call_update` sequence of each call id, requests to the client) and
what the model read back (the `tool` messages of its next request), plus the files on disk.
Permission answers and modes are covered in `test_permissions_e2e.py`.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls

NO_CAPS: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
FS_CAPS: dict[str, Any] = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
TERMINAL_CAPS: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": True,
}
FULL = ("--mode", "full-access")


# --------------------------------------------------------------------------- helpers


def for_call(updates: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    """The `tool_call` and `tool_call_update`s of one call, in order."""
    return [u for u in updates if u.get("toolCallId") == call_id]


def statuses(updates: list[dict[str, Any]], call_id: str) -> list[str]:
    return [u["status"] for u in for_call(updates, call_id) if "status" in u]


def last(updates: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return for_call(updates, call_id)[-1]


def texts(update: dict[str, Any]) -> str:
    """The text of an update's `content` items, joined."""
    return "\n".join(
        c["content"]["text"] for c in update.get("content") or [] if c["type"] == "content"
    )


def tool_results(request: Any) -> list[tuple[str, str]]:
    """(tool_call_id, content) of the `tool` messages the model was sent, in order."""
    return [
        (m["tool_call_id"], m["content"]) for m in request.body["messages"] if m["role"] == "tool"
    ]


def tool_result(request: Any, call_id: str) -> str:
    found = [content for cid, content in tool_results(request) if cid == call_id]
    assert len(found) == 1, f"expected one tool message for {call_id}: {tool_results(request)}"
    return found[0]


def client_methods(client: Any, prefix: str = "") -> list[str]:
    return [r.method for r in client.agent_requests if r.method.startswith(prefix)]


def wait_until(predicate: Callable[[], Any], timeout: float = 10, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout}s")
        time.sleep(0.02)
    return value


def run_turn(heron, fake_llm, workspace, *responses, args=FULL, caps=None, prompt="go"):
    """Script the model, start the agent, run one prompt turn; returns (client, turn)."""
    fake_llm.script(*responses)
    client = heron(*args, client_capabilities=caps)
    turn = client.prompt(client.new_session(workspace), prompt)
    return client, turn


def assert_lifecycle(
    updates: list[dict[str, Any]],
    call_id: str,
    *,
    name: str,
    kind: str,
    title: str,
    raw_input: dict[str, Any],
    locations: list[dict[str, Any]] | None,
    end: str = "completed",
) -> list[dict[str, Any]]:
    """tool_call (pending, named) → described (title/locations/rawInput) → in_progress → end."""
    mine = for_call(updates, call_id)
    assert mine[0] == {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": name,
        "kind": kind,
        "status": "pending",
    }
    described = mine[1]
    assert described["sessionUpdate"] == "tool_call_update"
    assert "status" not in described
    assert described["title"] == title
    assert described.get("locations") == locations
    assert described["rawInput"] == raw_input
    assert mine[2] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "in_progress",
    }
    assert statuses(updates, call_id) == ["pending", "in_progress", end]
    assert mine[-1]["status"] == end
    assert all(u["sessionUpdate"] == "tool_call_update" for u in mine[1:])
    return mine


def unique_sleep() -> tuple[str, str]:
    """A sleep command pgrep can find (and bash cannot exec away), and its pgrep pattern."""
    n = random.randrange(10**7, 10**8)
    return f"sleep 60.{n}; echo finished", rf"sleep 60\.{n}"


def survivors(pattern: str) -> str:
    found = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
    return found.stdout.strip()


# --------------------------------------------------------------------------- a local web server


class _Web(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/hello.txt":
            status, body = 200, b"Hello from the local web server.\n"
        else:
            status, body = 404, b"no such page\n"
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def web() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# --------------------------------------------------------------------------- 1. every tool


def test_read_file(heron, fake_llm, workspace):
    path = Path(workspace, "a.txt")
    path.write_text("alpha\nbeta\ngamma\n")
    args = {"path": "a.txt", "offset": 2, "limit": 1}
    client, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("read_file", args, id="c1")), text("done")
    )
    assert turn["stopReason"] == "end_turn"
    mine = assert_lifecycle(
        turn["updates"],
        "c1",
        name="read_file",
        kind="read",
        title="Read a.txt (2-2)",
        raw_input=args,
        locations=[{"path": str(path), "line": 2}],
    )
    assert "beta" in texts(mine[-1])
    result = tool_result(fake_llm.requests[1], "c1")
    assert result.startswith("     2\tbeta\n")
    assert "alpha" not in result and "offset=3" in result
    # the model's own call is in the history right before its result
    assistant = fake_llm.requests[1].body["messages"][-2]
    assert assistant["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": json.dumps(args)}}
    ]
    assert client_methods(client) == []  # no fs capability: nothing asked of the editor


def test_list_directory(heron, fake_llm, workspace):
    Path(workspace, "src").mkdir()
    Path(workspace, "b.txt").write_text("b")
    Path(workspace, "a.txt").write_text("a")
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("list_directory", {}, id="ls")), text("ok")
    )
    assert_lifecycle(
        turn["updates"],
        "ls",
        name="list_directory",
        kind="read",
        title="List .",
        raw_input={},
        locations=[{"path": workspace}],
    )
    assert tool_result(fake_llm.requests[1], "ls") == "a.txt\nb.txt\nsrc/"


def test_find_path(heron, fake_llm, workspace):
    Path(workspace, "pkg", "sub").mkdir(parents=True)
    for name in ("pkg/one.py", "pkg/sub/two.py", "pkg/notes.md", "top.py"):
        Path(workspace, name).write_text("x\n")
    args = {"pattern": "*.py", "path": "pkg"}
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("find_path", args, id="fp")), text("ok")
    )
    assert_lifecycle(
        turn["updates"],
        "fp",
        name="find_path",
        kind="search",
        title="Find `*.py` in pkg",
        raw_input=args,
        locations=[{"path": f"{workspace}/pkg"}],
    )
    result = tool_result(fake_llm.requests[1], "fp")
    assert "pkg/one.py" in result and "pkg/sub/two.py" in result
    assert "notes.md" not in result and "top.py" not in result


def test_grep(heron, fake_llm, workspace):
    Path(workspace, "a.py").write_text("x = 1\nneedle = 2\n")
    Path(workspace, "b.py").write_text("nothing here\n")
    args = {"pattern": "needle"}
    _, turn = run_turn(heron, fake_llm, workspace, tool_calls(Call("grep", args, id="g")), text("ok"))
    mine = assert_lifecycle(
        turn["updates"],
        "g",
        name="grep",
        kind="search",
        title="Grep `needle`",
        raw_input=args,
        locations=[{"path": workspace}],
    )
    # the final update points at the match
    assert mine[-1]["locations"] == [{"path": f"{workspace}/a.py", "line": 2}]
    result = tool_result(fake_llm.requests[1], "g")
    assert result.startswith("a.py:2:needle = 2\n")
    assert "b.py" not in result


def test_edit_file(heron, fake_llm, workspace):
    path = Path(workspace, "app.py")
    path.write_text("def main():\n    print('hi')\n")
    args = {"path": "app.py", "old_string": "print('hi')", "new_string": "print('hello')"}
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("edit_file", args, id="e")), text("ok")
    )
    diff = {
        "type": "diff",
        "path": str(path),
        "oldText": "def main():\n    print('hi')\n",
        "newText": "def main():\n    print('hello')\n",
    }
    mine = assert_lifecycle(
        turn["updates"],
        "e",
        name="edit_file",
        kind="edit",
        title="Edit app.py",
        raw_input=args,
        locations=[{"path": str(path), "line": 2}],
    )
    assert mine[1]["content"] == [diff]
    assert mine[-1]["content"] == [diff]
    assert path.read_text() == "def main():\n    print('hello')\n"
    assert tool_result(fake_llm.requests[1], "e").startswith("Edited app.py.")


def test_write_file_creates_a_new_file(heron, fake_llm, workspace):
    path = Path(workspace, "docs", "new.md")
    args = {"path": "docs/new.md", "content": "# New\n"}
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("write_file", args, id="w")), text("ok")
    )
    mine = assert_lifecycle(
        turn["updates"],
        "w",
        name="write_file",
        kind="edit",
        title="Create docs/new.md",
        raw_input=args,
        locations=[{"path": str(path), "line": 1}],
    )
    assert mine[1]["content"] == [
        {"type": "diff", "path": str(path), "oldText": None, "newText": "# New\n"}
    ]
    assert path.read_text() == "# New\n"
    assert tool_result(fake_llm.requests[1], "w") == "Created docs/new.md (1 line)."


def test_delete_path(heron, fake_llm, workspace):
    path = Path(workspace, "old.txt")
    path.write_text("bye")
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("delete_path", {"path": "old.txt"}, id="d")),
        text("ok"),
    )
    assert_lifecycle(
        turn["updates"],
        "d",
        name="delete_path",
        kind="delete",
        title="Delete old.txt",
        raw_input={"path": "old.txt"},
        locations=[{"path": str(path)}],
    )
    assert not path.exists()
    assert tool_result(fake_llm.requests[1], "d") == "Deleted old.txt."


def test_move_path(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("moved text")
    args = {"source": "a.txt", "destination": "sub/b.txt"}
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("move_path", args, id="m")), text("ok")
    )
    assert_lifecycle(
        turn["updates"],
        "m",
        name="move_path",
        kind="move",
        title="Move a.txt → sub/b.txt",
        raw_input=args,
        locations=[{"path": f"{workspace}/sub/b.txt"}],
    )
    assert not Path(workspace, "a.txt").exists()
    assert Path(workspace, "sub", "b.txt").read_text() == "moved text"
    assert tool_result(fake_llm.requests[1], "m") == "Moved a.txt to sub/b.txt."


def test_bash(heron, fake_llm, workspace):
    args = {"command": "echo hello; pwd"}
    _, turn = run_turn(heron, fake_llm, workspace, tool_calls(Call("bash", args, id="b")), text("ok"))
    mine = assert_lifecycle(
        turn["updates"],
        "b",
        name="bash",
        kind="execute",
        title="Run `echo hello; pwd`",
        raw_input=args,
        locations=None,
    )
    assert f"hello\n{workspace}" in texts(mine[-1])  # runs in the session's cwd
    assert mine[-1]["rawOutput"] == {"exitCode": 0}
    assert tool_result(fake_llm.requests[1], "b") == f"Exit code 0\nhello\n{workspace}\n"


def test_fetch(heron, fake_llm, workspace, web):
    url = f"{web}/hello.txt"
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("fetch", {"url": url}, id="f")), text("ok")
    )
    mine = assert_lifecycle(
        turn["updates"],
        "f",
        name="fetch",
        kind="fetch",
        title=f"Fetch {url}",
        raw_input={"url": url},
        locations=None,
    )
    assert "Hello from the local web server." in texts(mine[-1])
    assert tool_result(fake_llm.requests[1], "f") == "Hello from the local web server.\n"


def test_fetch_of_a_missing_page_fails(heron, fake_llm, workspace, web):
    url = f"{web}/nope"
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("fetch", {"url": url}, id="f")), text("ok")
    )
    assert statuses(turn["updates"], "f") == ["pending", "in_progress", "failed"]
    assert tool_result(fake_llm.requests[1], "f").startswith(f"HTTP 404 Not Found from {url}")
    assert turn["stopReason"] == "end_turn"


def test_todo_write(heron, fake_llm, workspace):
    todos = [
        {"content": "Read the code", "status": "completed", "priority": "high"},
        {"content": "Fix the bug", "status": "in_progress", "priority": "medium"},
        {"content": "Run the tests", "status": "pending", "priority": "low"},
    ]
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("todo_write", {"todos": todos}, id="t")),
        text("ok"),
    )
    assert_lifecycle(
        turn["updates"],
        "t",
        name="todo_write",
        kind="think",
        title="Update plan",
        raw_input={"todos": todos},
        locations=None,
    )
    assert tool_result(fake_llm.requests[1], "t") == (
        "Plan updated: 1 in progress, 1 pending, 1 completed"
    )


def test_zz_probe(heron, fake_llm, workspace):
    fake_llm.script(text("hi"))
    client = heron(*FULL)
    def hwm():
        for line in Path(f"/proc/{client.proc.pid}/status").read_text().splitlines():
            if line.startswith(("VmHWM", "VmRSS")):
                print(line)
    hwm()
    sid = client.new_session(workspace)
    client.prompt(sid, "x")
    hwm()
    fake_llm.script(tool_calls(Call("bash", {"command": "head -c 100000000 /dev/zero | tr '\\0' a"}, id="big")), text("ok"))
    t = time.monotonic()
    turn = client.prompt(sid, "y")
    print("took", time.monotonic() - t, len(turn["updates"]))
    hwm()
    r = tool_result(fake_llm.requests[2], "big")
    print(len(r), r[:100], r[9000:11000].replace("a", ""))
