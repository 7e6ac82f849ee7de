"""The built-in tools. Each family lives in its own module; all share `agent.tools.base.Tool`."""

from __future__ import annotations

from typing import Any

from agent.tools.base import Tool


def builtin_tools() -> list[Tool[Any]]:
    from agent.tools.files import DeletePath, EditFile, ListDirectory, MovePath, ReadFile, WriteFile
    from agent.tools.plan import TodoWrite
    from agent.tools.search import FindPath, Grep
    from agent.tools.shell import Bash
    from agent.tools.web import Fetch

    return [
        ReadFile(),
        ListDirectory(),
        # The Python walk lists paths as fast as rg does (scripts/bench_grep.py) and skips the
        # cost of re-filtering rg's output, so only grep uses rg.
        FindPath(use_rg=False),
        Grep(),
        EditFile(),
        WriteFile(),
        DeletePath(),
        MovePath(),
        Bash(),
        Fetch(),
        TodoWrite(),
    ]
