"""Tool calls end to end: the real `heron` executable, a scripted model, a test editor.

Each test scripts the model's tool calls, runs one prompt turn and checks what the editor saw
(the `tool_call` / `tool_call_update` sequence of each call id, requests to the client) and
what the model read back (the `tool` messages of its next request), plus the files on disk.
Permission answers and modes are covered in `test_permissions_e2e.py`.
"""

from __future__ import annotations

import json
import random
import re
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


# ---------------------------------------------------------------------------------------- helpers


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


# The fake of a test running in text mode (test_textcalls_e2e), whose model writes its calls
# as `<tool_call>` blocks: the results go back as `<tool_response>` blocks, in call order.
TEXT_FAKE: Any = None


def tool_results(request: Any) -> list[tuple[str, str]]:
    """(tool_call_id, content) of the `tool` messages the model was sent, in order."""
    messages = request.body["messages"]
    if TEXT_FAKE is not None and "tools" not in request.body:
        users = [m["content"] for m in messages if m["role"] == "user"]
        found = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", "\n".join(users), re.S)
        return list(zip(TEXT_FAKE.text_call_ids, found, strict=False))
    return [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]


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


def run_turn(heron, fake_llm, workspace, *responses, args=FULL, caps=None, permission="allow_once"):
    """Script the model, start the agent, run one prompt turn; returns (client, turn)."""
    fake_llm.script(*responses)
    client = heron(*args, client_capabilities=caps)
    client.permission = permission
    turn = client.prompt(client.new_session(workspace), "go")
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
    """tool_call (pending, named: the `name` field too) → described (title/locations/rawInput)
    → in_progress → end."""
    mine = for_call(updates, call_id)
    assert mine[0] == {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": name,
        "name": name,
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


def assert_gone(pattern: str, within: float = 30.0) -> None:
    """The command's processes end soon after the answer: Heron answers first and stops the
    tree in the background (SIGTERM, then SIGKILL after a short grace)."""
    deadline = time.monotonic() + within
    while (alive := survivors(pattern)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert alive == "", f"still running {within} s after the answer:\n{alive}"


# ----------------------------------------------------------------------------- a local web server


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


# ---------------------------------------------------------------------------------- 1. every tool


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
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps(args)},
        }
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
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("grep", args, id="g")), text("ok")
    )
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
    _, turn = run_turn(
        heron, fake_llm, workspace, tool_calls(Call("bash", args, id="b")), text("ok")
    )
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
    assert mine[-1]["rawOutput"] == {"exitCode": 0, "output": f"hello\n{workspace}\n"}
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


def test_allow_always_for_a_fetch_covers_the_host(heron, fake_llm, workspace, web):
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("fetch", {"url": f"{web}/hello.txt"}, id="f1")),
        tool_calls(Call("fetch", {"url": f"{web}/other"}, id="f2")),
        text("ok"),
        args=(),
        permission="allow_always",
    )
    asked = [r.params for r in client.agent_requests if r.method == "session/request_permission"]
    assert [p["toolCall"]["toolCallId"] for p in asked] == ["f1"]  # the same host: asked once
    # per scheme, host and port
    assert [o["name"] for o in asked[0]["options"]][1] == f"Always allow fetches from `{web}`"
    assert statuses(turn["updates"], "f1")[-1] == "completed"
    assert statuses(turn["updates"], "f2")[-1] == "failed"  # a 404, but it ran
    assert tool_result(fake_llm.requests[2], "f2").startswith("HTTP 404")


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


def test_todo_write_sends_the_complete_plan_each_time(heron, fake_llm, workspace):
    first = [
        {"content": "Read the code", "status": "in_progress", "priority": "high"},
        {"content": "Fix the bug", "status": "pending", "priority": "medium"},
    ]
    second = [
        {"content": "Read the code", "status": "completed", "priority": "high"},
        {"content": "Fix the bug", "status": "in_progress", "priority": "medium"},
    ]
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("todo_write", {"todos": first}, id="t1")),
        tool_calls(Call("todo_write", {"todos": second}, id="t2")),
        text("ok"),
    )
    plans = [u for u in turn["updates"] if u["sessionUpdate"] == "plan"]
    assert plans == [
        {"sessionUpdate": "plan", "entries": first},
        {"sessionUpdate": "plan", "entries": second},
    ]
    # the plan goes out while its call runs: after in_progress, before completed
    kinds = [
        (u["sessionUpdate"], u.get("status"))
        for u in turn["updates"]
        if u.get("toolCallId") in (None, "t1")
        and u["sessionUpdate"] in ("tool_call", "tool_call_update", "plan")
    ][:5]
    assert kinds == [
        ("tool_call", "pending"),
        ("tool_call_update", None),
        ("tool_call_update", "in_progress"),
        ("plan", None),
        ("tool_call_update", "completed"),
    ]


# ----------------------------------------------------------------------- 5. fs through the client


def test_with_fs_capability_files_go_through_the_editor(heron, fake_llm, workspace):
    a, b = Path(workspace, "a.txt"), Path(workspace, "b.txt")
    a.write_text("saved on disk\n")
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "a.txt"}, id="r")),
        tool_calls(
            Call(
                "edit_file",
                {"path": "a.txt", "old_string": "unsaved", "new_string": "edited"},
                id="e",
            )
        ),
        tool_calls(Call("write_file", {"path": "b.txt", "content": "new file\n"}, id="w")),
        text("ok"),
    )
    client = heron(*FULL, client_capabilities=FS_CAPS)
    client.buffers[str(a)] = "unsaved buffer line\n"
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "go")
    assert turn["stopReason"] == "end_turn"
    # read_file reads the editor's buffer, not the disk
    assert tool_result(fake_llm.requests[1], "r") == "     1\tunsaved buffer line"
    # the edit is computed from (and shown against) the buffer
    assert last(turn["updates"], "e")["content"] == [
        {
            "type": "diff",
            "path": str(a),
            "oldText": "unsaved buffer line\n",
            "newText": "edited buffer line\n",
        }
    ]
    assert statuses(turn["updates"], "w")[-1] == "completed"
    # writes went through fs/write_text_file, so the editor saw them
    assert client.fs_writes == [(str(a), "edited buffer line\n"), (str(b), "new file\n")]
    assert client.buffers[str(a)] == "edited buffer line\n"
    fs = [r for r in client.agent_requests if r.method.startswith("fs/")]
    assert {r.method for r in fs} == {"fs/read_text_file", "fs/write_text_file"}
    assert all(r.params["sessionId"] == session_id for r in fs)
    assert [r.params["path"] for r in fs if r.method == "fs/write_text_file"] == [str(a), str(b)]
    # every write is preceded by a read of the same file (what the change was computed from);
    # b.txt too, though not on disk: the editor may hold it as an unsaved buffer (issue 21)
    for i, r in enumerate(fs):
        if r.method == "fs/write_text_file":
            assert any(
                p.params["path"] == r.params["path"]
                for p in fs[:i]
                if p.method == "fs/read_text_file"
            )


def test_write_file_asks_the_editor_about_a_file_missing_on_disk(heron, fake_llm, workspace):
    """A file missing on disk may live on as an unsaved editor buffer (here: one Heron read
    through the editor, deleted on disk since), so the editor is asked for it and the change
    is shown against it; the editor's "not found" makes it a new file (issue 21; issue 10 had
    new files not asked, which wrote over unsaved buffers of files never saved)."""
    kept = Path(workspace, "kept.txt")
    kept.write_text("in the editor\n")
    fresh = Path(workspace, "new", "deep", "fresh.txt")
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "kept.txt"}, id="r")),
        tool_calls(Call("write_file", {"path": "new/deep/fresh.txt", "content": "hi\n"}, id="n")),
        tool_calls(Call("write_file", {"path": "kept.txt", "content": "rewritten\n"}, id="k")),
        text("ok"),
    )
    client = heron(*FULL, client_capabilities=FS_CAPS)
    served = client.handlers["fs/read_text_file"]

    def read_then_delete_on_disk(params: dict[str, Any]) -> Any:
        answer = served(params)
        if params["path"] == str(kept) and kept.exists():
            client.buffers[str(kept)] = kept.read_text()  # only the editor has it now
            kept.unlink()
        return answer

    client.handlers["fs/read_text_file"] = read_then_delete_on_disk
    turn = client.prompt(client.new_session(workspace), "go")
    assert turn["stopReason"] == "end_turn"
    reads = [r.params["path"] for r in client.agent_requests if r.method == "fs/read_text_file"]
    # The read_file, then for each write (its preview, and again just before writing).
    assert reads[0] == str(kept) and set(reads) == {str(kept), str(fresh)} and len(reads) > 2
    assert statuses(turn["updates"], "n")[-1] == "completed"
    assert fresh.read_text() == "hi\n"
    assert last(turn["updates"], "n")["content"][0]["oldText"] is None  # shown as new
    assert statuses(turn["updates"], "k")[-1] == "completed"
    assert last(turn["updates"], "k")["content"] == [
        {"type": "diff", "path": str(kept), "oldText": "in the editor\n", "newText": "rewritten\n"}
    ]
    assert client.fs_writes == [(str(fresh), "hi\n"), (str(kept), "rewritten\n")]


def test_without_fs_capability_files_are_read_and_written_locally(heron, fake_llm, workspace):
    a = Path(workspace, "a.txt")
    a.write_text("saved on disk\n")
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "a.txt"}, id="r")),
        tool_calls(
            Call(
                "edit_file",
                {"path": "a.txt", "old_string": "saved", "new_string": "edited"},
                id="e",
            )
        ),
        text("ok"),
    )
    client = heron(*FULL, client_capabilities=NO_CAPS)
    client.buffers[str(a)] = "unsaved buffer line\n"  # the editor has it, but did not offer fs
    turn = client.prompt(client.new_session(workspace), "go")
    assert turn["stopReason"] == "end_turn"
    assert tool_result(fake_llm.requests[1], "r") == "     1\tsaved on disk"
    assert a.read_text() == "edited on disk\n"
    assert client_methods(client, "fs/") == [] and client.fs_writes == []


# --------------------------------------------------------------------- 6. bash: terminal or local


def test_bash_runs_in_the_client_terminal(heron, fake_llm, workspace):
    command = "echo out; echo err >&2; exit 3"
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("bash", {"command": command}, id="b")),
        text("ok"),
        caps=TERMINAL_CAPS,
    )
    assert client_methods(client, "terminal/") == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    create, *rest = [r.params for r in client.agent_requests if r.method.startswith("terminal/")]
    assert create["args"][-2:] == ["-c", command] and create["cwd"] == workspace
    terminal_id = rest[0]["terminalId"]
    assert all(p["terminalId"] == terminal_id for p in rest)
    embed = [{"type": "terminal", "terminalId": terminal_id}]
    mine = for_call(turn["updates"], "b")
    # the live terminal is embedded while the command runs, and stays at the end
    running = mine[
        mine.index(
            {"sessionUpdate": "tool_call_update", "toolCallId": "b", "status": "in_progress"}
        )
        + 1 :
    ]
    assert running[0] == {"sessionUpdate": "tool_call_update", "toolCallId": "b", "content": embed}
    # Exit code 3 fails the call: the terminal stays, with the status and the last lines for
    # clients that do not render terminals.
    assert mine[-1]["status"] == "failed" and mine[-1]["content"][:1] == embed
    assert texts({"content": mine[-1]["content"][1:]}) == "Exit code 3\n```\nout\nerr\n```"
    assert mine[-1]["rawOutput"]["exitCode"] == 3
    # Clients that show only the terminal's id (acpx) print the output from here (issue 10):
    # the text the model read, after its status line.
    assert mine[-1]["rawOutput"]["output"] == "out\nerr\n"
    assert tool_result(fake_llm.requests[1], "b") == "Exit code 3\nout\nerr\n"
    assert client.terminals == {}  # released


@pytest.mark.parametrize("caps", [NO_CAPS, TERMINAL_CAPS], ids=["local", "client-terminal"])
def test_a_long_output_reaches_raw_output_as_the_model_read_it(
    heron, fake_llm, workspace, tmp_path, caps
):
    config = tmp_path / "heron.toml"
    config.write_text("max_tool_output_chars = 2000\n")
    fake_llm.script(tool_calls(Call("bash", {"command": "seq 1 20000"}, id="b")), text("ok"))
    client = heron(*FULL, client_capabilities=caps, env={"HERON_CONFIG": str(config)})
    turn = client.prompt(client.new_session(workspace), "go")
    assert turn["stopReason"] == "end_turn"
    output = last(turn["updates"], "b")["rawOutput"]["output"]
    read = tool_result(fake_llm.requests[1], "b")
    assert read == f"Exit code 0\n{output}"  # the same shortened text, not the whole output
    assert "bytes omitted" in output and len(output) < 2000
    assert output.startswith("1\n2\n") and output.endswith("19999\n20000\n")


def test_bash_locally_streams_its_output(heron, fake_llm, workspace):
    command = "echo first; sleep 0.5; echo second; exit 4"
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("bash", {"command": command}, id="b")),
        text("ok"),
        caps=NO_CAPS,
    )
    mine = for_call(turn["updates"], "b")
    progress = [
        texts(u)
        for u in mine
        if u["sessionUpdate"] == "tool_call_update" and "status" not in u and "content" in u
    ]
    assert "```\nfirst\n```" in progress  # shown before the command ended
    final = mine[-1]
    assert final["status"] == "failed"  # exit code 4: what Zed, acpx and Toad show as an error
    assert texts(final) == "Exit code 4\n```\nfirst\nsecond\n```"
    assert final["rawOutput"] == {"exitCode": 4, "output": "first\nsecond\n"}
    assert tool_result(fake_llm.requests[1], "b") == "Exit code 4\nfirst\nsecond\n"
    assert client_methods(client) == []


# -------------------------------------------------------------------- 7. cancel a running command


@pytest.mark.parametrize("caps", [NO_CAPS, TERMINAL_CAPS], ids=["local", "client-terminal"])
def test_cancel_stops_a_running_command(heron, fake_llm, workspace, caps):
    command, pattern = unique_sleep()
    fake_llm.script(tool_calls(Call("bash", {"command": command}, id="b")), text("never"))
    client = heron(*FULL, client_capabilities=caps)
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "go")
    client.wait_for_update(lambda u: u.get("status") == "in_progress")
    wait_until(lambda: survivors(pattern), what="the command to start")
    client.cancel(session_id)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}  # not after the 60 s sleep
    assert_gone(pattern)
    updates = pending.updates()
    assert statuses(updates, "b") == ["pending", "in_progress", "failed"]
    assert "Cancelled" in texts(last(updates, "b"))
    assert len(fake_llm.requests) == 1
    if caps["terminal"]:
        assert client_methods(client, "terminal/") == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/release",
        ]
    else:
        assert client_methods(client) == []


# --------------------------------------------------------------------------------- 8. stale edits


def test_a_file_changed_after_the_preview_is_not_overwritten(heron, fake_llm, workspace):
    path = Path(workspace, "a.txt")
    path.write_text("hello world\n")
    asked: list[dict[str, Any]] = []

    def user_edits_then_allows(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        path.write_text("hello world, says the user\n")
        return {"outcome": "selected", "optionId": "allow_once"}

    fake_llm.script(
        tool_calls(
            Call(
                "edit_file", {"path": "a.txt", "old_string": "world", "new_string": "heron"}, id="e"
            )
        ),
        text("ok"),
    )
    client = heron("--mode", "ask")
    client.permission = user_edits_then_allows
    turn = client.prompt(client.new_session(workspace), "go")
    assert len(asked) == 1
    assert statuses(turn["updates"], "e") == ["pending", "in_progress", "failed"]
    reason = tool_result(fake_llm.requests[1], "e")
    assert "changed since this change was prepared" in reason and "Read the file again" in reason
    assert texts(last(turn["updates"], "e")) == reason
    assert path.read_text() == "hello world, says the user\n"
    assert turn["stopReason"] == "end_turn"


# --------------------------------------------------------------------------------- 9. huge output


def test_a_100_mb_command_output_keeps_memory_flat(heron, fake_llm, workspace):
    fake_llm.script(text("warm up"))
    client = heron(*FULL, client_capabilities=NO_CAPS)
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")  # loads the model client, so the baseline is realistic
    command = "head -c 100000000 /dev/zero | tr '\\0' a; echo; echo THE-END"
    fake_llm.script(tool_calls(Call("bash", {"command": command}, id="big")), text("ok"))
    turn = client.prompt(session_id, "flood", timeout=60)
    assert turn["stopReason"] == "end_turn"
    assert statuses(turn["updates"], "big")[-1] == "completed"
    # The memory it takes: scripts/bench_memory.py. Here: only head and tail were kept.
    result = tool_result(fake_llm.requests[2], "big")
    assert result.startswith("Exit code 0\naaaa")
    assert "bytes omitted" in result and result.endswith("THE-END\n")
    assert len(result) <= 30_000
    # what the editor was shown stays bounded too
    assert max(len(json.dumps(u)) for u in turn["updates"]) < 200_000


# ---------------------------------------------------------------------------------- 10. bad calls


def test_invalid_arguments_and_unknown_tools_fail_and_the_turn_goes_on(heron, fake_llm, workspace):
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(
            Call("read_file", "{not json", id="bad"),
            Call("frobnicate", {"x": 1}, id="unknown"),
            Call("read_file", {"line": 3}, id="invalid"),
        ),
        text("sorry"),
    )
    assert turn["stopReason"] == "end_turn"
    updates = turn["updates"]
    for call_id in ("bad", "unknown", "invalid"):
        assert statuses(updates, call_id) == ["pending", "failed"]
    assert for_call(updates, "unknown")[0]["kind"] == "other"
    results = dict(tool_results(fake_llm.requests[1]))
    assert list(results) == ["bad", "unknown", "invalid"]
    assert results["bad"].startswith("The arguments for read_file are not valid JSON")
    assert "Call it again with a JSON object" in results["bad"]
    assert results["unknown"].startswith("Unknown tool 'frobnicate'. Available tools: read_file,")
    assert "todo_write" in results["unknown"]
    assert results["invalid"] == "Invalid arguments for read_file: path: Field required"
    for call_id, reason in results.items():
        assert texts(last(updates, call_id)) == reason
    # the broken call goes back to the model as valid JSON, so the next request is accepted
    calls = fake_llm.requests[1].body["messages"][-4]["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"invalid_json_arguments": "{not json"}


# -------------------------------------------------------------------------------- 11. request cap


def test_max_turn_requests_stops_a_model_that_keeps_calling_tools(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("a\n")
    read = {"path": "a.txt"}
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("read_file", read, id="r1")),
        tool_calls(Call("read_file", read, id="r2")),
        tool_calls(Call("read_file", read, id="r3")),
        args=(*FULL, "--max-turn-requests", "2"),
    )
    assert turn["stopReason"] == "max_turn_requests"
    assert len(fake_llm.requests) == 2 and fake_llm.pending == 1
    assert statuses(turn["updates"], "r1")[-1] == "completed"
    assert statuses(turn["updates"], "r2")[-1] == "completed"
    assert for_call(turn["updates"], "r3") == []


# ---------------------------------------------------------------------- 12. several calls at once


def test_several_calls_in_one_response_run_in_order(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("first\n")
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(
            Call("read_file", {"path": "a.txt"}, id="r1"),
            Call("write_file", {"path": "a.txt", "content": "second\n"}, id="w"),
            Call("read_file", {"path": "a.txt"}, id="r2"),
            Call("bash", {"command": "cat a.txt"}, id="b"),
        ),
        text("ok"),
    )
    for call_id in ("r1", "w", "r2", "b"):
        assert statuses(turn["updates"], call_id) == ["pending", "in_progress", "completed"]
    results = tool_results(fake_llm.requests[1])
    assert results == [
        ("r1", "     1\tfirst"),
        ("w", "Wrote a.txt (1 line)."),
        ("r2", "     1\tsecond"),
        ("b", "Exit code 0\nsecond\n"),
    ]
    # one assistant message with the four calls, then their four results
    messages = fake_llm.requests[1].body["messages"]
    assert [m["role"] for m in messages[-5:]] == ["assistant", "tool", "tool", "tool", "tool"]
    assert [c["id"] for c in messages[-5]["tool_calls"]] == ["r1", "w", "r2", "b"]


def test_read_only_calls_in_one_response_run_side_by_side(heron, fake_llm, workspace):
    for name in ("a.txt", "b.txt"):
        Path(workspace, name).write_text(f"text of {name}\n")
    fake_llm.script(
        tool_calls(
            Call("read_file", {"path": "a.txt"}, id="r1"),
            Call("read_file", {"path": "b.txt"}, id="r2"),
            Call("grep", {"pattern": "text of"}, id="g"),
        ),
        text("ok"),
    )
    client = heron(*FULL, client_capabilities=FS_CAPS)
    # Each editor read waits for the other one: only calls running side by side get through.
    both_reading = threading.Barrier(2, timeout=5)
    overlapped: list[bool] = []
    builtin_read = client.handlers["fs/read_text_file"]

    def read_when_both_wait(params: dict[str, Any]) -> dict[str, Any]:
        try:
            both_reading.wait()
            overlapped.append(True)
        except threading.BrokenBarrierError:
            overlapped.append(False)
        return builtin_read(params)

    client.handlers["fs/read_text_file"] = read_when_both_wait
    turn = client.prompt(client.new_session(workspace), "go")
    assert overlapped == [True, True]
    for call_id in ("r1", "r2", "g"):
        assert statuses(turn["updates"], call_id) == ["pending", "in_progress", "completed"]
    results = tool_results(fake_llm.requests[1])
    assert [cid for cid, _ in results] == ["r1", "r2", "g"]
    assert results[0][1] == "     1\ttext of a.txt"
    assert results[1][1] == "     1\ttext of b.txt"
    assert results[2][1].startswith("a.txt:1:text of a.txt\nb.txt:1:text of b.txt\n")


def test_the_client_terminal_is_released_when_the_editor_fails(heron, fake_llm, workspace):
    from acp_client import RpcError

    command, pattern = unique_sleep()
    fake_llm.script(tool_calls(Call("bash", {"command": command}, id="b")), text("ok"))
    client = heron(*FULL, client_capabilities=TERMINAL_CAPS)

    def broken_wait(params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError(-32603, "the terminal view crashed")

    client.handlers["terminal/wait_for_exit"] = broken_wait
    turn = client.prompt(client.new_session(workspace), "go")
    assert client_methods(client, "terminal/") == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    ]
    assert_gone(pattern)
    assert statuses(turn["updates"], "b") == ["pending", "in_progress", "failed"]
    assert "the terminal view crashed" in tool_result(fake_llm.requests[1], "b")
    assert turn["stopReason"] == "end_turn"


@pytest.mark.parametrize("caps", [NO_CAPS, TERMINAL_CAPS], ids=["local", "client-terminal"])
def test_a_command_that_times_out_is_stopped_and_fails(heron, fake_llm, workspace, caps):
    command, pattern = unique_sleep()
    client, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("bash", {"command": f"echo started; {command}", "timeout": 1}, id="b")),
        text("ok"),
        caps=caps,
    )
    assert_gone(pattern)
    assert statuses(turn["updates"], "b") == ["pending", "in_progress", "failed"]
    raw_output = last(turn["updates"], "b")["rawOutput"]
    assert raw_output["timedOut"] is True
    result = tool_result(fake_llm.requests[1], "b")
    assert raw_output["output"] == result.split("\n", 1)[1]  # what the model read, unlabelled
    assert result.startswith("Timed out after 1 s; the command was stopped. Output so far:\n")
    assert "started" in result
    if caps["terminal"]:
        assert "terminal/kill" in client_methods(client, "terminal/")
        assert client_methods(client, "terminal/")[-1] == "terminal/release"


def test_a_long_tool_result_is_cut_for_the_model_with_a_note(heron, fake_llm, workspace):
    lines = [f"line {n:04d} " + "x" * 90 for n in range(1, 3001)]
    Path(workspace, "long.txt").write_text("\n".join(lines) + "\n")
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("read_file", {"path": "long.txt"}, id="r")),
        text("ok"),
    )
    assert statuses(turn["updates"], "r")[-1] == "completed"
    result = tool_result(fake_llm.requests[1], "r")
    assert len(result) < 30_500
    assert result.startswith("     1\tline 0001 ")
    assert "characters omitted" in result
    # the tail, where read_file says how to read on, survives the cut
    assert result.endswith(
        "[Showed lines 1-2000; the file goes on. To read on, call read_file with offset=2001.]"
    )
