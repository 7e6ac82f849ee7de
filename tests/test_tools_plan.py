"""The `todo_write` tool: the plan goes to the editor whole, the model gets a summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent.acp.protocol import PlanEntry, PlanUpdate
from agent.tools.base import PlanChanged, Safety, ToolContext, ToolResult
from agent.tools.plan import TodoWrite


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _no_client(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"unexpected client request {method}")


def make_ctx(cwd: Path) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        session_id="sess-1",
        files=None,  # type: ignore[arg-type]
        client_request=_no_client,
        client_terminal=False,
    )


async def run(raw: dict[str, Any], ctx: ToolContext) -> list[Any]:
    tool = TodoWrite()
    args = tool.parse_args(raw)
    preview = await tool.describe(args, ctx)
    assert preview.title == "Update plan"
    return [event async for event in tool.execute(args, ctx, preview)]


@pytest.mark.anyio
async def test_plan_is_sent_whole_and_summarised(tmp_path: Path) -> None:
    todos = [
        {"content": "Read the code", "status": "completed", "priority": "high"},
        {"content": "Write tests", "status": "completed"},
        {"content": "Fix the bug", "status": "in_progress", "priority": "high"},
        {"content": "Update docs", "status": "pending", "priority": "low"},
        {"content": "Ask for review", "status": "pending"},
        {"content": "Clean up", "status": "completed"},
    ]
    events = await run({"todos": todos}, make_ctx(tmp_path))
    assert len(events) == 2
    plan, result = events
    assert isinstance(plan, PlanChanged)
    assert plan.entries[0] == PlanEntry(
        content="Read the code", status="completed", priority="high"
    )
    assert [e.priority for e in plan.entries] == [
        "high",
        "medium",
        "high",
        "low",
        "medium",
        "medium",
    ]
    assert [e.content for e in plan.entries] == [t["content"] for t in todos]
    # What the loop will send is valid ACP.
    assert PlanUpdate(entries=plan.entries).dump()["entries"][3] == {
        "content": "Update docs",
        "priority": "low",
        "status": "pending",
    }
    assert isinstance(result, ToolResult) and result.ok
    assert result.output == "Plan updated: 1 in progress, 2 pending, 3 completed"


@pytest.mark.anyio
async def test_empty_plan(tmp_path: Path) -> None:
    plan, result = await run({"todos": []}, make_ctx(tmp_path))
    assert plan.entries == []
    assert result.output == "Plan cleared."


def test_arguments_are_checked() -> None:
    tool = TodoWrite()
    with pytest.raises(ValidationError):
        tool.parse_args({"todos": [{"content": "x", "status": "done"}]})
    with pytest.raises(ValidationError):
        tool.parse_args({"todos": [{"content": "x", "status": "pending", "priority": "urgent"}]})
    with pytest.raises(ValidationError):
        tool.parse_args({"todos": [{"content": "", "status": "pending"}]})
    schema = tool.input_schema()
    assert schema["required"] == ["todos"]
    assert tool.kind == "think"
    assert tool.safety(tool.parse_args({"todos": []})) is Safety.READ_ONLY
    assert "complete list" in tool.description
