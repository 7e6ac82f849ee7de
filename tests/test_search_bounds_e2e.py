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
    time.sleep(0.5)  # the regex is well under way
    started = time.monotonic()
    client.cancel(session_id)
    assert pending.result(timeout=10) == {"stopReason": "cancelled"}
    answered = time.monotonic() - started
    assert answered < 0.5, f"cancel answered after {answered:.3f}s"


def test_a_catastrophic_python_grep_fails_after_its_budget(heron, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("grep", catastrophic(workspace), id="g")), text("ok"))
    client = heron(env={**NO_RG, "HERON_SEARCH_TIMEOUT": "1"})
    started = time.monotonic()
    turn = client.prompt(client.new_session(workspace), "go")
    assert time.monotonic() - started < 5
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
    started = time.monotonic()
    turn = client.prompt(client.new_session(workspace), "go", timeout=20)
    assert turn["stopReason"] == "end_turn"
    request = fake_llm.requests[1]
    found = tool_message(request, "dir")
    assert found.startswith("a.txt:1:needle here\nsub/b.txt:1:needle there\n")
    assert time.monotonic() - started < 4
    assert tool_message(request, "fifo") == (
        "pipe is not a regular file or a folder (a FIFO, socket or device); grep searches "
        "files only."
    )
    assert tool_message(request, "find") == "a.txt\nsub/b.txt"
