"""What loading a skill gives the model: its instructions (SKILL.md without the front matter),
where its folder is and what files it holds; and any one of those files.

Read when asked, not when found: an edited skill is read as it is now. Confined like the
discovery: SKILL.md and every file read must lead (symlinks followed) into the skill's own
folder, and be small regular files.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.files.paths import read_regular
from agent.frontmatter import parse_front_matter
from agent.skills.discovery import MAX_BYTES, Skill

MAX_FILE_BYTES = 256 * 1024  # one of a skill's files
MAX_LISTED_FILES = 60


class SkillUnreadable(Exception):
    """The skill (or its file) cannot be read now; the message says why."""


def instructions(skill: Skill) -> str:
    """The skill's instructions for the model, in a `<skill>` block naming its folder and
    listing its other files."""
    data = _read_inside(skill, skill.path, MAX_BYTES)
    body = parse_front_matter(data.decode("utf-8", errors="replace")).body.strip()
    text = f'<skill name="{skill.name}" folder="{skill.folder}">\n{body}\n</skill>'
    files = listing(skill)
    if files:
        text += (
            f"\n\nFiles of this skill (relative to {skill.folder}; read one with the skill "
            f"tool's `file`):\n" + "\n".join(f"- {name}" for name in files)
        )
    return text


def skill_file(skill: Skill, name: str) -> str:
    """One of the skill's files, as text."""
    path = skill.folder / name
    data = _read_inside(skill, path, MAX_FILE_BYTES)
    if b"\0" in data[:8192]:
        raise SkillUnreadable(f"{name} is a binary file")
    return data.decode("utf-8", errors="replace")


def listing(skill: Skill) -> list[str]:
    """The skill's files besides SKILL.md, relative to its folder (bounded; no dot files)."""
    found: list[str] = []
    for top, dirs, files in os.walk(skill.folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "node_modules")
        relative = Path(top).relative_to(skill.folder)
        for name in sorted(files):
            if name.startswith(".") or (relative == Path(".") and name == skill.path.name):
                continue
            found.append(str(relative / name) if relative != Path(".") else name)
            if len(found) >= MAX_LISTED_FILES:
                found.append("… (more files not listed)")
                return found
    return found


def _read_inside(skill: Skill, path: Path, limit: int) -> bytes:
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(skill.folder):
        raise SkillUnreadable(f"{path} leads out of the skill's folder")
    if not os.path.isfile(real):
        raise SkillUnreadable(f"{path.relative_to(skill.folder)} is not a file of the skill")
    data = read_regular(str(real), limit, follow_links=False)
    if data is None:
        raise SkillUnreadable(f"{path} is not a readable file of at most {limit // 1024} KB")
    return data
