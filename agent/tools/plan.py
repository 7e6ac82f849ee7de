"""`todo_write`: the model keeps its plan here and the editor shows it (ACP `plan` updates).

Each call carries the complete list, as each `plan` update must (ACP-NOTES §28), so the tool
keeps no state: it forwards the list and tells the model where it stands.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator
from typing import Literal

from pydantic import BaseModel, Field

from agent.acp.protocol import PlanEntry
from agent.tools.base import PlanChanged, Preview, Safety, Tool, ToolContext, ToolEvent, ToolResult


class Todo(BaseModel):
    content: str = Field(min_length=1, description="What to do, in one short sentence.")
    status: Literal["pending", "in_progress", "completed"]
    priority: Literal["high", "medium", "low"] = "medium"


class TodoWriteArgs(BaseModel):
    todos: list[Todo] = Field(description="The whole plan, in order.")


class TodoWrite(Tool[TodoWriteArgs]):
    name = "todo_write"
    description = (
        "Create or update your plan for the current task; the user sees it. Send the complete "
        "list every time (it replaces the previous one), with each step's status: pending, "
        "in_progress or completed. Keep one step in_progress at a time and mark steps completed "
        "as soon as they are done. Use it for tasks with several steps; skip it for trivial ones."
    )
    kind = "think"
    Args = TodoWriteArgs
    default_safety = Safety.READ_ONLY

    async def describe(self, args: TodoWriteArgs, ctx: ToolContext) -> Preview:
        return Preview(title="Update plan")

    async def execute(
        self, args: TodoWriteArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        entries = [
            PlanEntry(content=todo.content, status=todo.status, priority=todo.priority)
            for todo in args.todos
        ]
        yield PlanChanged(entries=entries)
        yield ToolResult(ok=True, output=summary(args.todos))


def summary(todos: list[Todo]) -> str:
    if not todos:
        return "Plan cleared."
    counts = Counter(todo.status for todo in todos)
    return (
        f"Plan updated: {counts['in_progress']} in progress, {counts['pending']} pending, "
        f"{counts['completed']} completed"
    )
