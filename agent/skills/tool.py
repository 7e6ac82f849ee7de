"""`skill`: the model loads a skill's instructions (or one of its files) by name.

Why a tool rather than `read_file`: the user's skills live outside the workspace, where
`read_file` asks every time (and an "always" answer covers one exact path); this tool reads
only the skills the session found, confined to their folders, so it asks nothing, in every
mode; it gives the instructions without the front matter, with the folder and the file list
the model needs next; and an unknown name gets the list of real ones instead of a guess.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from pydantic import BaseModel, Field

from agent.acp.protocol import ContentItem, ToolCallLocation
from agent.skills.catalog import TOOL
from agent.skills.content import SkillUnreadable, instructions, skill_file
from agent.skills.discovery import SkillSet
from agent.tools.base import Preview, Safety, Tool, ToolContext, ToolEvent, ToolResult


class SkillArgs(BaseModel):
    name: str = Field(description="The skill's name, as the system prompt lists it.")
    file: str | None = Field(
        default=None,
        description="A file of the skill to read instead (a path relative to its folder, as "
        "its instructions name it).",
    )


class SkillTool(Tool[SkillArgs]):
    name = TOOL
    description = (
        "Load a skill: its instructions, its folder and its files. Call it before starting a "
        "task that one of the skills listed in the system prompt is for; with `file`, read "
        "one of the skill's files."
    )
    kind = "read"
    Args = SkillArgs
    default_safety = Safety.READ_ONLY

    def __init__(self, skills: SkillSet) -> None:
        self.skills = skills

    async def describe(self, args: SkillArgs, ctx: ToolContext) -> Preview:
        skill = self.skills.find(args.name)
        what = f"`{args.file}` of skill `{args.name}`" if args.file else f"skill `{args.name}`"
        locations = [ToolCallLocation(path=str(skill.path))] if skill and not args.file else []
        return Preview(title=f"Load {what}", locations=locations)

    async def execute(
        self, args: SkillArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        skill = self.skills.find(args.name)
        if skill is None:
            names = ", ".join(s.name for s in self.skills.skills) or "none"
            known = "" if args.name == "*" else f"There is no skill {args.name!r}. "
            yield ToolResult(ok=args.name == "*", output=f"{known}The skills: {names}.")
            return
        try:
            text = skill_file(skill, args.file) if args.file else instructions(skill)
        except (SkillUnreadable, OSError, ValueError) as exc:
            yield ToolResult.failure(f"The skill cannot be read: {exc}")
            return
        shown = f"`{args.file}` of skill `{skill.name}`" if args.file else f"skill `{skill.name}`"
        lines = text.count("\n") + 1
        yield ToolResult(
            ok=True,
            output=text,
            content=[ContentItem.of(f"Loaded {shown} ({lines} lines).")],
        )
