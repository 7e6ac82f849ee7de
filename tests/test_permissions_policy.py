"""The permission policy on its own: protected paths and what "always" remembers for paths;
in auto mode, discarding commands and changes sandboxed commands made to git's settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent.permissions.policy import Decision, PermissionMemory, decide
from agent.tools.base import ToolContext
from agent.tools.files import WriteFile
from agent.tools.shell import Bash


def _decide(ws: Path, path: str, memory: PermissionMemory, mode: str = "accept-edits") -> Any:
    ctx = ToolContext(
        cwd=ws, session_id="s", files=None, client_request=None, client_terminal=False
    )  # type: ignore[arg-type]
    tool = WriteFile()
    args = tool.parse_args({"path": path, "content": "x"})
    return decide(mode, tool, args, ctx, memory, [ws])


def test_protected_folders_ask_in_accept_edits_whatever_their_case(tmp_path: Path) -> None:
    memory = PermissionMemory()
    assert _decide(tmp_path, "src/a.py", memory).decision is Decision.ALLOW
    for path in (".git/config", ".GIT/hooks/x", "sub/.git/config", ".heron/x", ".Heron/y"):
        assert _decide(tmp_path, path, memory).decision is Decision.ASK, path


def test_a_link_into_git_is_protected(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    os.symlink(tmp_path / ".git", tmp_path / "innocent")
    verdict = _decide(tmp_path, "innocent/config", PermissionMemory())
    assert verdict.decision is Decision.ASK


def test_always_on_a_protected_path_remembers_the_real_path(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    memory = PermissionMemory()
    verdict = _decide(tmp_path, ".git/config", memory, mode="ask")
    memory.remember("allow_always", verdict.keys)
    assert _decide(tmp_path, ".git/config", memory, mode="ask").decision is Decision.ALLOW
    assert _decide(tmp_path, ".git/HEAD", memory, mode="ask").decision is Decision.ASK
    # "always" for the tool inside the workspace does not reach .git
    memory.remember("allow_always", ["write_file"])
    assert _decide(tmp_path, ".git/HEAD", memory, mode="ask").decision is Decision.ASK
    assert _decide(tmp_path, "a.txt", memory, mode="ask").decision is Decision.ALLOW


# ------------------------------------------------- auto mode: discarding work, unseen changes


class _Sandbox:
    """A session's sandbox that confines, or not, as the test says."""

    def __init__(self) -> None:
        self.confines = True

    def confining(self) -> bool:
        return self.confines


def _ctx(ws: Path) -> ToolContext:
    return ToolContext(
        cwd=ws,
        session_id="s",
        files=None,  # type: ignore[arg-type]
        client_request=None,  # type: ignore[arg-type]
        client_terminal=False,
        sandbox=_Sandbox(),  # type: ignore[arg-type]
    )


def _bash(ctx: ToolContext, memory: PermissionMemory, mode: str, command: str, **extra: Any) -> Any:
    tool = Bash()
    return decide(
        mode, tool, tool.parse_args({"command": command, **extra}), ctx, memory, [ctx.cwd]
    )


def test_auto_asks_before_discarding_work_even_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, memory = _ctx(tmp_path), PermissionMemory()
    assert _bash(ctx, memory, "auto", "git status && make").decision is Decision.ALLOW
    for command in ("git clean -fd", "ls && git reset --hard", "sh -c 'rm -rf build'", "git co ."):
        assert _bash(ctx, memory, "auto", command).decision is Decision.ASK, command
    # "always" for exactly that command is the user's word: it runs unasked again
    verdict = _bash(ctx, memory, "auto", "git clean -fd")
    memory.remember("allow_always", verdict.keys)
    assert _bash(ctx, memory, "auto", "git clean -fd").decision is Decision.ALLOW
    assert _bash(ctx, memory, "auto", "git clean -fdx").decision is Decision.ASK


def test_unseen_sandbox_changes_suspend_always_for_programs_outside_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, memory = _ctx(tmp_path), PermissionMemory()
    memory.remember("allow_always", _bash(ctx, memory, "ask", "git status").keys)
    assert _bash(ctx, memory, "ask", "git status").decision is Decision.ALLOW
    ctx.sandbox_changes.append(str(tmp_path / ".git" / "config"))
    for mode, extra in (("ask", {}), ("accept-edits", {}), ("auto", {"sandbox": False})):
        verdict = _bash(ctx, memory, mode, "git status", **extra)
        assert verdict.decision is Decision.ASK, mode
        assert verdict.unseen == [str(tmp_path / ".git" / "config")]
    # inside the sandbox the change cannot act: nothing to suspend; full access asks nothing
    assert _bash(ctx, memory, "auto", "git status").decision is Decision.ALLOW
    assert _bash(ctx, memory, "full-access", "git status").decision is Decision.ALLOW
    # a refusal stays a refusal
    assert _bash(ctx, memory, "read-only", "git status").decision is Decision.REFUSE
    # without a sandbox on this system, auto runs commands outside it: suspended too
    ctx.sandbox.confines = False  # type: ignore[union-attr]
    assert _bash(ctx, memory, "auto", "git status").decision is Decision.ASK
    # the file tools run no program: unaffected
    write = WriteFile()
    args = write.parse_args({"path": "a.txt", "content": "x"})
    assert decide("accept-edits", write, args, ctx, memory, [tmp_path]).decision is Decision.ALLOW
