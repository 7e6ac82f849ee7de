"""The revert of one turn as a tool call: never offered to the model, but shown, asked and run
like the agent's own edits (kind `edit`, safety MUTATING: the mode's rules for edits apply,
and paths outside the workspace or under .git/ and .heron/ ask)."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from pathlib import Path

from pydantic import BaseModel

from agent.acp.protocol import ContentItem, ToolCallContent, ToolCallLocation
from agent.files.paths import printable
from agent.tools.base import Preview, Safety, Tool, ToolContext, ToolEvent, ToolResult
from agent.undo.journal import TurnChanges
from agent.undo.revert import FilesLike, Outcome, Real, Simulated, revert

log = logging.getLogger("heron.undo")


class UndoArgs(BaseModel):
    turn: int  # the session's turn number whose changes are reverted


class UndoTool(Tool[UndoArgs]):
    name = "undo"
    description = "Revert the file changes of one earlier turn (Heron's /undo)."
    kind = "edit"
    Args = UndoArgs
    default_safety = Safety.MUTATING

    def __init__(self, turn: TurnChanges) -> None:
        self.turn = turn
        self.started = False  # the files began to change: the turn counts as undone
        self.outcomes: list[Outcome] | None = None  # set once it ran
        self.preview: list[Outcome] | None = None  # what describe() found it would do

    def paths(self, args: UndoArgs, ctx: ToolContext) -> list[Path]:
        out: list[Path] = []
        for change in self.turn.changes:
            for path in (change.path, change.source):
                if path and Path(path) not in out:
                    out.append(Path(path))
        return out

    def permission_keys(self, args: UndoArgs) -> list[str]:
        return [self.name]

    def refusal(self, args: UndoArgs) -> str | None:
        """Nothing to ask about when nothing can be reverted."""
        if self.preview is None or any(o.reverted for o in self.preview):
            return None
        return "nothing of that turn can be reverted. " + " ".join(o.note for o in self.preview)

    verb = "Undo"  # what the title calls it

    def files(self, ctx: ToolContext) -> FilesLike:
        """Where the revert writes (a rewind keeps its writes in the journal too)."""
        return Real(ctx.files)

    async def describe(self, args: UndoArgs, ctx: ToolContext) -> Preview:
        try:
            outcomes = await revert(self.turn.changes, Simulated(Real(ctx.files)), ctx.cwd)
        except Exception:  # a preview never fails; execute reports the problem
            log.exception("preview of /undo failed")
            return Preview(title=f"{self.verb}: revert file changes")
        self.preview = outcomes
        return Preview(
            title=_title(outcomes, self.verb),
            locations=_locations(outcomes),
            content=_content(outcomes, preview=True),
        )

    async def execute(
        self, args: UndoArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        self.started = True
        self.outcomes = outcomes = await revert(self.turn.changes, self.files(ctx), ctx.cwd)
        done = [o for o in outcomes if o.reverted]
        left = [o for o in outcomes if not o.reverted]
        lines = [o.note for o in done] + [o.note for o in left]
        yield ToolResult(
            ok=bool(done) or not left,
            output="\n".join(lines) or "Nothing to revert.",
            content=_content(outcomes, preview=False),
            locations=_locations(outcomes) or None,
        )


def _title(outcomes: list[Outcome], verb: str) -> str:
    names = [o.path for o in outcomes if o.reverted]
    if not names:
        return f"{verb}: nothing can be reverted"
    shown = ", ".join(names[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"{verb}: revert {shown}{more}"


def _locations(outcomes: list[Outcome]) -> list[ToolCallLocation]:
    return [
        ToolCallLocation(path=printable(o.diff.path))
        for o in outcomes
        if o.reverted and o.diff is not None
    ]


def _content(outcomes: list[Outcome], preview: bool) -> list[ToolCallContent]:
    out: list[ToolCallContent] = []
    for outcome in sorted(outcomes, key=lambda o: not o.reverted):
        out += outcome.content(preview)
    return out or [ContentItem.of("Nothing to revert.")]
