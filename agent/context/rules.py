"""The instructions the model follows besides Heron's own: the user's, for every project, and
the project's rules files — the ones users already have for other agents.

Read in this order (the later, nearer to the work, wins where they disagree):
1. the user's own: `$XDG_CONFIG_HOME/heron/AGENTS.md` (`~/.config/heron/AGENTS.md`), beside
   Heron's config and commands (a folder Heron protects: the sandbox cannot read it, and an
   edit there always asks);
2. the project's, in each folder from the repository's root down to the working directory
   (the working directory alone outside a repository): `AGENTS.md`, or without one the first
   of the other names, in Zed's order (RULES_FILES): a project set up for Zed, Cursor,
   Windsurf, Cline, Copilot, Claude Code or Gemini CLI works as it is.

Each file: at most MAX_BYTES (the rest is left out, with a note), a regular file (a FIFO is
never opened), and, outside full-access, one that stays (symlinks followed) inside the
project. Read when a session's system prompt is built: its first request, and once more when
its trust changes (`agent.session`).
"""

from __future__ import annotations

import codecs
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from agent.config import default_config_path
from agent.files import disk
from agent.files.disk import NotAFile
from agent.files.paths import home_relative

log = logging.getLogger("heron.context")

RULES_FILES = (
    "AGENTS.md",
    ".rules",
    ".cursorrules",
    ".windsurfrules",
    ".clinerules",
    ".github/copilot-instructions.md",
    "CLAUDE.md",
    "AGENT.md",
    "GEMINI.md",
)
MAX_BYTES = 64 * 1024  # of one rules file; the rest is left out, with a note
MAX_FOLDERS = 32  # folders between the repository's root and the working directory


@dataclass(frozen=True)
class RulesFile:
    label: str  # as the prompt and /rules name it: `AGENTS.md`, `src/AGENTS.md`, `~/…`
    path: Path
    text: str
    scope: str  # "user" or "project"


@dataclass
class Rules:
    files: list[RulesFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (label, why)

    @property
    def user(self) -> list[RulesFile]:
        return [f for f in self.files if f.scope == "user"]

    @property
    def project(self) -> list[RulesFile]:
        return [f for f in self.files if f.scope == "project"]


def user_rules_path() -> Path:
    return default_config_path().parent / "AGENTS.md"


def read_rules(cwd: Path, project: Path, confine: bool) -> Rules:
    """The user's rules file and the project's, in the order they apply. Blocking."""
    rules = Rules()
    user = user_rules_path()
    _add(rules, user, home_relative(user), "user", None)
    real = Path(os.path.realpath(cwd))
    chain = [real]
    if project in real.parents:
        chain = [p for p in (real, *real.parents) if p == project or project in p.parents]
    for folder in reversed(chain[:MAX_FOLDERS]):
        for name in RULES_FILES:
            label = _relative(folder / name, project)
            if _add(rules, folder / name, label, "project", project if confine else None):
                break
    return rules


def _add(rules: Rules, path: Path, label: str, scope: str, confine: Path | None) -> bool:
    try:
        text = _read(path, confine)
    except _Refused as exc:
        log.warning("not reading %s: %s", path, exc)
        rules.skipped.append((label, str(exc)))
        return False
    if text is None:
        return False
    log.info("%s rules from %s", "project" if scope == "project" else "your", path)
    rules.files.append(RulesFile(label, path, text, scope))
    return True


class _Refused(Exception):
    """A rules file that exists but is not read (the message says why)."""


def _read(path: Path, confine: Path | None) -> str | None:
    """At most MAX_BYTES of `path`; None when there is no such file."""
    if not os.path.lexists(path):
        return None
    if confine is not None and not Path(os.path.realpath(path)).is_relative_to(confine):
        raise _Refused("it leads out of the project")
    try:
        fd = disk.open_regular(path)
    except NotAFile as exc:
        raise _Refused(str(exc)) from exc
    except IsADirectoryError:
        return None  # Cline's `.clinerules/` folder form: not a file, passed over
    except OSError:
        return None
    with open(fd, "rb", closefd=True) as f:
        if confine is not None:
            # What was opened, in case a link changed after the check above (Linux).
            try:
                opened = os.readlink(f"/proc/self/fd/{f.fileno()}")
            except OSError:
                opened = str(confine)
            if not Path(opened).is_relative_to(confine):
                raise _Refused("it leads out of the project")
        data = f.read(MAX_BYTES + 1)
    # final=False: a character cut at the limit is dropped rather than garbled.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data[:MAX_BYTES])
    if len(data) > MAX_BYTES:
        text += f"\n[... {path.name} is longer than {MAX_BYTES // 1024} KB; the rest is left out]"
    return text


def _relative(path: Path, project: Path) -> str:
    try:
        return str(path.relative_to(project))
    except ValueError:
        return path.name
