"""grep and find_path never hang Heron: a catastrophic regex in the Python search (no rg on
PATH) is cancelled at once and fails readably after its time budget, and FIFOs in the
workspace are never opened."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls

NO_RG = {"PATH": "/nonexistent"}  # heron's shebang is absolute; grep then searches in Python


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process and its living descendants (the search runs in a
    worker process) have used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        children = [
            int(child)
            for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()
        ]
    except OSError:
        return 0.0  # gone meanwhile
    return total + sum(_cpu_seconds(child) for child in children)


def wait_until(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def tool_message(request: Any, call_id: str) -> str:
    return next(
        m["content"]
        for m in request.body["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == call_id
    )


def catastrophic(workspace: str) -> dict[str, Any]:
    Path(workspace, "bad.txt").write_text("a" * 40 + "!\n")
    return {"pattern": "(a+)+$", "path": "bad.txt"}


def test_cancel_stops_a_catastrophic_python_grep_at_once(heron, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("grep", catastrophic(workspace), id="g")), text("never"))
    client = heron(env=NO_RG)
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "go")
    client.wait_for_update(lambda u: u.get("status") == "in_progress")
    busy = _cpu_seconds(client.proc.pid) + 0.3
    wait_until(lambda: _cpu_seconds(client.proc.pid) > busy)  # the regex is well under way
    client.cancel(session_id)
    # 2^40 steps: only stopping the regex answers the cancel (scripts/bench_grep.py says how fast)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}


def test_a_catastrophic_python_grep_fails_after_its_budget(heron, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("grep", catastrophic(workspace), id="g")), text("ok"))
    client = heron(env={**NO_RG, "HERON_SEARCH_TIMEOUT": "1"})
    turn = client.prompt(client.new_session(workspace), "go", timeout=60)  # 2^40 steps otherwise
    assert turn["stopReason"] == "end_turn"
    reason = tool_message(fake_llm.requests[1], "g")
    assert reason.startswith("grep stopped after 1 s without finishing.")
    assert "(a+)+" in reason


@pytest.mark.parametrize("env", [None, NO_RG], ids=["rg", "python"])
def test_fifos_in_the_workspace_are_never_opened(heron, fake_llm, workspace, env):
    ws = Path(workspace)
    (ws / "a.txt").write_text("needle here\n")
    os.mkfifo(ws / "pipe")
    (ws / "sub").mkdir()
    if env is not None:  # the Python walk reads .gitignore files (rg would block on this one)
        os.mkfifo(ws / "sub" / ".gitignore")
    (ws / "sub" / "b.txt").write_text("needle there\n")
    fake_llm.script(
        tool_calls(
            Call("grep", {"pattern": "needle", "path": "."}, id="dir"),
            Call("grep", {"pattern": "needle", "path": "pipe"}, id="fifo"),
            Call("find_path", {"pattern": "*.txt"}, id="find"),
        ),
        text("ok"),
    )
    client = heron("--mode", "full-access", env={**(env or {}), "HERON_SEARCH_TIMEOUT": "5"})
    turn = client.prompt(client.new_session(workspace), "go", timeout=60)
    assert turn["stopReason"] == "end_turn"
    request = fake_llm.requests[1]
    found = tool_message(request, "dir")
    assert found.startswith("a.txt:1:needle here\nsub/b.txt:1:needle there\n")  # no timeout
    assert tool_message(request, "fifo") == (
        "pipe is not a regular file or a folder (a FIFO, socket or device); grep searches "
        "files only."
    )
    assert tool_message(request, "find") == "a.txt\nsub/b.txt"
