"""The skills as the system prompt lists them: names and descriptions only (the model loads a
skill's instructions when it decides to use it). Bounded, so a hundred installed skills do not
crowd the context: at most MAX_LISTED, each description cut at MAX_DESCRIPTION characters,
and a line saying how many more there are."""

from __future__ import annotations

from agent.skills.discovery import Skill

MAX_LISTED = 40
MAX_DESCRIPTION = 300
TOOL = "skill"

INTRO = f"""\
Skills: instructions for particular kinds of tasks, each in its own folder. When a task \
matches a skill's description, load the skill with the `{TOOL}` tool (its name) before you \
start, and follow it; read the other files it mentions with the same tool (`file`). Load a \
skill only when it applies. The user may also start one by typing /NAME."""


def catalog(skills: list[Skill]) -> str:
    """The system prompt's section on skills; "" when there are none to offer the model."""
    offered = [skill for skill in skills if skill.for_model]
    if not offered:
        return ""
    lines = [INTRO, ""]
    for skill in offered[:MAX_LISTED]:
        description = skill.description
        if len(description) > MAX_DESCRIPTION:
            description = description[: MAX_DESCRIPTION - 1].rstrip() + "…"
        lines.append(f"- {skill.name}: {description}")
    if len(offered) > MAX_LISTED:
        more = len(offered) - MAX_LISTED
        lines.append(
            f"- … and {more} more skill{'s' if more > 1 else ''}: call `{TOOL}` with the name "
            '"*" to list them all.'
        )
    return "\n".join(lines)
