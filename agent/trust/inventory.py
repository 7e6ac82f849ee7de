"""What a folder holds that Heron leaves inert until the user trusts it: the project's command
files, its skills, and what its git repository would run by itself (program settings in
`.git/config`, hooks). Its rules files are not here: they are read either way (marked as a
project's in the system prompt).

Cheap enough for the `session/new` answer: a few directory listings and one small read, no
process started. Blocking: the caller decides where it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.skills.discovery import project_skill_files
from agent.trust.git import planted

PROJECT_COMMANDS = Path(".heron") / "commands"  # the project's command files (agent.commands)
MAX_LISTED = 200


def inert(cwd: Path, folder: Path) -> list[str]:
    """The paths (relative to `folder`, the project) Heron does not use while untrusted;
    git settings as `.git/config: core.fsmonitor`."""
    found: list[str] = []
    commands = cwd / PROJECT_COMMANDS
    try:
        with os.scandir(commands) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".md"))
    except OSError:
        names = []
    found += [_relative(commands / name, folder) for name in names[:MAX_LISTED]]
    found += [_relative(path, folder) for path in project_skill_files(cwd, folder)[:MAX_LISTED]]
    found += planted(folder)
    return found


def files_of(found: list[str]) -> list[str]:
    """The files behind `inert`'s entries, once each (`.git/config` for its settings)."""
    return list(dict.fromkeys(entry.split(": ", 1)[0] for entry in found))


def summary(found: list[str]) -> str:
    """`2 command files, 1 skill, git settings (core.fsmonitor) and hooks (pre-commit)`."""
    commands = [f for f in found if f.startswith(f"{PROJECT_COMMANDS}/") or "/.heron/" in f]
    skills = [f for f in found if f.endswith("/SKILL.md")]
    settings = [f.split(": ", 1)[1] for f in found if f.startswith(".git/config: ")]
    hooks = [f.rsplit("/", 1)[1] for f in found if f.startswith(".git/hooks/")]
    parts = []
    if commands:
        parts.append(_count(len(commands), "command file"))
    if skills:
        parts.append(_count(len(skills), "skill"))
    if settings:
        parts.append(f"git settings that run programs ({_names(settings)})")
    if hooks:
        parts.append(f"git hooks ({_names(hooks)})")
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1] if parts else ""


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:4])
    return shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _relative(path: Path, folder: Path) -> str:
    try:
        return str((Path(os.path.realpath(path.parent)) / path.name).relative_to(folder))
    except ValueError:
        return str(path)
