"""Finding the skills a session may use, once per session (and again when its trust changes:
the system prompt lists them, and it must not change from request to request).

Where, first found wins a name:
1. the user's: `~/.agents/skills/` (the agents' common folder), then `~/.claude/skills/`
   (where many skills are installed already);
2. the project's, only when it is trusted: `.agents/skills/` and `.claude/skills/` of the
   working directory, then of each folder above it up to the repository's root (nearest
   first), as Codex, OpenCode and Pi look for them.

The user's come first, like the user's commands: a repository cannot replace a skill the user
installed. A skill is a folder holding `SKILL.md`; what cannot be one is skipped with one
line in the log and a reason `/help` and `/rules` show: front matter missing or unreadable,
no `name` or `description`, a name no slash command can have, a file over MAX_BYTES, a
SKILL.md that leads (by symlink) out of its folder or a project skill out of the project, a
name taken by an earlier skill. A user's skill folder may itself be a symlink (skill managers
install them so). Bounded: at most MAX_PER_FOLDER skills a folder.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from agent.files.paths import home_relative, read_regular
from agent.frontmatter import parse_front_matter

log = logging.getLogger("heron.skills")

USER_FOLDERS = (Path(".agents") / "skills", Path(".claude") / "skills")  # under the home folder
PROJECT_FOLDERS = (Path(".agents") / "skills", Path(".claude") / "skills")
SKILL_FILE = "SKILL.md"
MAX_PER_FOLDER = 100
MAX_ENTRIES = 2000  # directory entries looked at per folder
MAX_BYTES = 128 * 1024  # per SKILL.md (the format asks for under 5,000 tokens)
MAX_DESCRIPTION = 1024  # the format's limit; longer ones are cut
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # what may follow a slash (commands)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path  # SKILL.md, as found (the folder of skills joined with the skill's folder)
    real: Path  # its real path; the files of the skill must stay in its folder
    scope: str  # "user" or "project"
    for_model: bool = True  # listed to the model (not `disable-model-invocation: true`)
    for_user: bool = True  # a slash command (not `user-invocable: false`)

    @property
    def folder(self) -> Path:
        return self.real.parent


@dataclass(frozen=True)
class Skipped:
    where: str  # the path, as the user knows it
    why: str


@dataclass
class SkillSet:
    skills: list[Skill] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)  # the folders looked in

    def find(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


def skill_folders(
    cwd: Path, project: Path, include_project: bool, home: Path | None = None
) -> list[tuple[Path, str]]:
    """(folder, scope) in the order their skills count."""
    home = home or Path(os.path.expanduser("~"))
    found = [(home / name, "user") for name in USER_FOLDERS]
    if include_project:
        found += [(folder, "project") for folder in _project_folders(cwd, project)]
    seen: set[str] = set()
    unique = []
    for folder, scope in found:  # a thread on $HOME: the project's folders are the user's
        key = os.path.realpath(folder)
        if key not in seen:
            seen.add(key)
            unique.append((folder, scope))
    return unique


def _project_folders(cwd: Path, project: Path) -> list[Path]:
    real = Path(os.path.realpath(cwd))
    chain = [real]
    if real != project and project in real.parents:
        chain += [p for p in real.parents if p == project or project in p.parents]
    return [folder / name for folder in chain for name in PROJECT_FOLDERS]


def project_skill_files(cwd: Path, project: Path) -> list[Path]:
    """The project's SKILL.md files, unread (what trusting the folder would add)."""
    found: list[Path] = []
    for folder in _project_folders(cwd, project):
        for entry in _entries(folder):
            path = folder / entry / SKILL_FILE
            if os.path.lexists(path):
                found.append(path)
    return found


def find_skills(
    cwd: Path, project: Path, include_project: bool, home: Path | None = None
) -> SkillSet:
    """Every skill the session may use, and those skipped with why. Blocking; never raises."""
    result = SkillSet()
    for folder, scope in skill_folders(cwd, project, include_project, home):
        result.folders.append(folder)
        try:
            _scan(folder, scope, project, result)
        except Exception:  # a bug here must not cost the user their session
            log.exception("reading the skills in %s failed", folder)
    return result


def _entries(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            names = []
            for count, entry in enumerate(entries):
                if count >= MAX_ENTRIES:
                    log.warning("%s: more than %d entries; the rest is ignored", folder, count)
                    break
                if not entry.name.startswith("."):
                    names.append(entry.name)
    except OSError:
        return []  # no such folder (the usual case), not a folder, not readable
    return sorted(names)


def _scan(folder: Path, scope: str, project: Path, result: SkillSet) -> None:
    names = [n for n in _entries(folder) if os.path.isdir(folder / n)]
    if len(names) > MAX_PER_FOLDER:
        log.warning("%s: more than %d skills; only the first are read", folder, MAX_PER_FOLDER)
        del names[MAX_PER_FOLDER:]
    for name in names:
        path = folder / name / SKILL_FILE
        if not os.path.lexists(path):
            continue  # a folder that is not a skill (shared scripts, a README's folder)
        skill = _read(path, scope, project, result)
        if skill is None:
            continue
        taken = result.find(skill.name)
        if taken is not None:
            _skip(result, path, f"the name `{skill.name}` is taken by {home_relative(taken.path)}")
            continue
        result.skills.append(skill)


def _read(path: Path, scope: str, project: Path, result: SkillSet) -> Skill | None:
    real = Path(os.path.realpath(path))
    skill_folder = Path(os.path.realpath(path.parent))
    if real.parent != skill_folder:
        _skip(result, path, "its SKILL.md leads (by symlink) out of the skill's folder")
        return None
    if scope == "project" and not real.is_relative_to(project):
        _skip(result, path, "it leads (by symlink) out of the project")
        return None
    try:
        info = os.stat(real)
    except OSError as exc:
        _skip(result, path, f"it cannot be read ({exc.strerror})")
        return None
    if not stat.S_ISREG(info.st_mode):
        _skip(result, path, "SKILL.md is not a regular file")
        return None
    if info.st_size > MAX_BYTES:
        _skip(result, path, f"SKILL.md is over {MAX_BYTES // 1024} KB")
        return None
    data = read_regular(str(real), MAX_BYTES, follow_links=False)
    if data is None:
        _skip(result, path, "SKILL.md cannot be read as a small regular file")
        return None
    parsed = parse_front_matter(data.decode("utf-8", errors="replace"))
    if not parsed.found:
        _skip(result, path, "no front matter (`---`, `name:`, `description:`, `---`)")
        return None
    if parsed.problems:
        _skip(result, path, f"its front matter cannot be read ({parsed.problems[0]})")
        return None
    name = parsed.values.get("name", "").strip()
    description = " ".join(parsed.values.get("description", "").split())
    if not name:
        _skip(result, path, "its front matter has no `name`")
        return None
    if not NAME.fullmatch(name):
        _skip(result, path, f"`{name[:70]}` cannot be a command name (letters, digits, -)")
        return None
    if not description:
        _skip(result, path, "its front matter has no `description`")
        return None
    if name != path.parent.name:
        log.info("skill %s: its name differs from its folder's (%s)", path, path.parent.name)
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1].rstrip() + "…"
    return Skill(
        name,
        description,
        path,
        real,
        scope,
        for_model=not _true(parsed.values.get("disable-model-invocation")),
        for_user=not _false(parsed.values.get("user-invocable")),
    )


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "yes", "on")


def _false(value: str | None) -> bool:
    return (value or "").strip().lower() in ("false", "no", "off")


def _skip(result: SkillSet, path: Path, why: str) -> None:
    log.warning("skill %s skipped: %s", home_relative(path), why)
    result.skipped.append(Skipped(home_relative(path), why))
