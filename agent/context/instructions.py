"""A session's instructions: its system prompt and what it was made of (the rules files read,
the skills offered), kept so that `/rules` and `/help` can say what is in force.

Built once per session, at its first model request, and again only when the user changes the
session's trust: between requests the system prompt does not change, byte for byte, so a
server's prompt cache keeps serving it (a rules file edited meanwhile counts from the next
session, or the next load of this one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio

from agent.context.prompt import system_prompt
from agent.context.rules import Rules, read_rules
from agent.skills.catalog import catalog
from agent.skills.discovery import SkillSet


@dataclass(frozen=True)
class Instructions:
    prompt: str
    rules: Rules
    skills: SkillSet
    trusted: bool  # the project's trust when it was built


async def build_instructions(
    cwd: Path,
    project: Path,
    trusted: bool,
    skills: SkillSet,
    confine: bool = True,
    additional_directories: list[Path] | None = None,
    today: str | None = None,
) -> Instructions:
    """Read the rules files (in a worker thread) and compose the system prompt.
    `confine` (every mode but full-access): a rules file must stay inside the project."""
    rules = await anyio.to_thread.run_sync(read_rules, cwd, project, confine)
    prompt = system_prompt(
        cwd,
        rules,
        trusted,
        project,
        catalog(skills.skills),
        additional_directories=additional_directories,
        today=today,
    )
    return Instructions(prompt, rules, skills, trusted)
