"""The permission policy on its own: protected paths and what "always" remembers for paths."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent.permissions.policy import Decision, PermissionMemory, decide
from agent.tools.base import ToolContext
from agent.tools.files import WriteFile


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
