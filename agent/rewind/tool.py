"""A rewind's file restore as a tool call (like /undo's: agent.undo.tool): the diff shown and
asked like an edit; once allowed, the conversation goes back first (`before`, all or nothing)
and only then the files, each kept in the journal as the rewind's change."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable

from agent.rewind.files import Recording
from agent.tools.base import Preview, ToolContext, ToolEvent, ToolResult
from agent.undo.journal import TurnChanges, UndoJournal
from agent.undo.revert import FilesLike, Real
from agent.undo.tool import UndoArgs, UndoTool


class RewindTool(UndoTool):
    name = "rewind"
    description = (
        "Take the conversation and the files back to an earlier message (Heron's /rewind)."
    )
    verb = "Rewind"

    def __init__(
        self,
        changes: TurnChanges,
        journal: UndoJournal,
        before: Callable[[], Awaitable[str | None]],
    ) -> None:
        super().__init__(changes)
        self.journal = journal
        self.before = before  # takes the conversation back; why it could not, else None
        self.refused: str | None = None  # why nothing was rewound, once it ran

    def files(self, ctx: ToolContext) -> FilesLike:
        return Recording(Real(ctx.files), self.journal)

    async def execute(
        self, args: UndoArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        self.refused = await self.before()
        if self.refused is not None:
            yield ToolResult.failure(f"Nothing was rewound: {self.refused}.")
            return
        async for event in super().execute(args, ctx, preview):
            yield event
