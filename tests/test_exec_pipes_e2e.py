"""`heron exec` through pipes: `| head` ends it quietly, and with stdout and stderr in one pipe
the answer and the trace never share a line."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from conftest import _heron_executable, heron_env
from fake_openai import Call, text, tool_calls

LONG_ANSWER = text(*[f"line {i}\n" for i in range(20_000)])


def shell(command: str, fake_llm, heron_home, workspace) -> subprocess.CompletedProcess[str]:
    heron = shlex.quote(_heron_executable())
    script = command.replace("HERON", f"{heron} exec --yes --cwd {shlex.quote(workspace)}")
    return subprocess.run(
        ["bash", "-c", script + '; echo "exit ${PIPESTATUS[0]}" >&2'],
        env=heron_env(fake_llm, heron_home, {"HERON_LOG_LEVEL": "warning"}),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("together", [False, True], ids=["stdout", "stdout+stderr"])
def test_exec_into_head_ends_quietly(fake_llm, heron_home, workspace, together):
    fake_llm.script(tool_calls(Call("bash", {"command": "echo hi"}, id="b")), LONG_ANSWER)
    redirect = "2>&1 " if together else ""
    done = shell(f"HERON go {redirect}| head -5", fake_llm, heron_home, workspace)
    shown = done.stdout.splitlines()
    assert "line 0" in shown and len(shown) == 5
    status = int(done.stderr.strip().splitlines()[-1].removeprefix("exit "))
    assert status in (0, 141), done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert "interrupted" not in done.stderr


def test_the_answer_and_the_trace_never_share_a_line(fake_llm, heron_home, workspace):
    # The answer has no newline before the tool call, nor before a thought.
    fake_llm.script(
        tool_calls(Call("bash", {"command": "echo hi"}, id="b"), text="Let me look"),
        text("Done: it said hi"),
    )
    done = shell("HERON go 2>&1 | cat", fake_llm, heron_home, workspace)
    lines = done.stdout.splitlines()
    assert "Let me look" in lines, lines
    assert any(line.startswith("▸ ") for line in lines), lines
    assert "Done: it said hi" in lines, lines
