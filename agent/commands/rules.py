"""`/rules`: what the session's instructions hold — the rules files in force and the skills
offered, in order, with what was skipped and why — and whether the project is trusted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.acp.protocol import StopReason
from agent.commands.catalog import commands_of
from agent.commands.parse import Invocation
from agent.files.paths import home_relative
from agent.skills.discovery import SkillSet, Skipped
from agent.trust.inventory import summary

if TYPE_CHECKING:
    from agent.commands.conversation import Conversation


async def rules(turn: Conversation, call: Invocation) -> StopReason:
    session = turn.session
    instructions = await session.find_instructions()
    trust = session.trust
    lines = [f"The project, {trust.folder}, is {'trusted' if trust.trusted else 'not trusted'}."]
    if not trust.trusted and trust.found:
        lines.append(f"Not in use until you trust it (`/trust`): {summary(trust.found)}.")
    found = instructions.rules
    lines += ["", "Rules files in force, in the order the model reads them (the later wins):"]
    for file in found.files:
        whose = "yours, for every project" if file.scope == "user" else "the project's"
        if file.scope == "project" and not instructions.trusted:
            whose += ", marked as from an untrusted folder (it cannot widen permissions)"
        lines.append(f"- `{file.label}` ({whose})")
    if not found.files:
        lines.append("- none")
    for label, why in found.skipped:
        lines.append(f"- skipped `{label}`: {why}")
    lines += ["", *skill_lines(instructions.skills)]
    shadowed = commands_of(session).shadowed_skills()
    for skill, command in shadowed:
        lines.append(f"- `{skill.name}` has no `/{skill.name}`: a {command.source} command has it")
    lines += [
        "",
        "The system prompt holds these from the session's first request on; it is read again "
        "only when you change the trust (`/trust`), or in a new session.",
    ]
    turn.updates.say("\n".join(lines))
    return "end_turn"


def skill_lines(skills: SkillSet) -> list[str]:
    """The skills offered and the ones skipped, as /rules and /help list them."""
    lines = ["Skills (the model loads one when a task matches; `/name` starts it):"]
    for skill in skills.skills:
        where = "yours" if skill.scope == "user" else "the project's"
        hidden = "" if skill.for_model else ", not offered to the model"
        lines.append(f"- `{skill.name}` ({where}{hidden}): {skill.description[:120]}")
    if not skills.skills:
        folders = ", ".join(f"`{home_relative(f)}`" for f in skills.folders[:4])
        lines.append(f"- none (looked in {folders})" if folders else "- none")
    lines += skipped_lines(skills.skipped)
    return lines


def skipped_lines(skipped: list[Skipped]) -> list[str]:
    return [f"- skipped `{s.where}`: {s.why}" for s in skipped]
