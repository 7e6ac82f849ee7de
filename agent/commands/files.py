"""The user's own commands: Markdown files in a folder, one command per file.

`.heron/commands/review.md` is `/review`; its optional front matter gives `description` and an
argument `hint`, and its body is the prompt (`$ARGUMENTS` becomes the text typed after the
command). A folder is scanned with one `stat` per command file, and a file is read again only
when its stat changed, so scanning at every prompt is cheap.

Whatever a folder holds, a scan ends quickly and never raises: it is bounded in entries,
commands and bytes per file; only regular files are read (a FIFO is never opened for reading
in a blocking way); undecodable bytes are replaced; and a project's command file must lead to
a file inside the project (a cloned repository cannot make `/x` send `~/.ssh/id_rsa` to the
model). Scans block: callers run them in a worker thread.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from agent.files.paths import read_regular
from agent.frontmatter import split_front_matter

log = logging.getLogger("heron.commands")

SUFFIX = ".md"
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # what may follow the slash
MAX_ENTRIES = 5_000  # directory entries looked at per folder
MAX_COMMANDS = 200  # command files per folder
MAX_BYTES = 64 * 1024  # per command file
MAX_DESCRIPTION = 200
MAX_HINT = 100
ARGUMENTS = "$ARGUMENTS"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


@dataclass(frozen=True)
class UserCommand:
    name: str
    description: str
    hint: str | None
    body: str  # the prompt, `$ARGUMENTS` still in it
    source: str  # "project" or "user"
    path: str

    def prompt(self, arguments: str) -> str:
        """The body with the arguments in place (after it, when it has no `$ARGUMENTS`)."""
        if ARGUMENTS in self.body:
            return self.body.replace(ARGUMENTS, arguments)
        if arguments:
            return f"{self.body}\n\n{arguments}" if self.body else arguments
        return self.body


# A file's identity and version: when none of these changed, neither did the command.
_Stamp = tuple[int, int, int, int, int]


class CommandFolder:
    """One folder of command files and what was last read from it."""

    def __init__(self, path: Path, source: str, confine: Path | None = None) -> None:
        self.path = path
        self.source = source
        self.confine = confine  # the files must lead inside this folder (a project's root)
        self._read: dict[str, tuple[_Stamp, UserCommand | None]] = {}

    def scan(self) -> dict[str, UserCommand]:
        """The folder's commands by name, re-reading only files that changed. Blocking."""
        fresh: dict[str, tuple[_Stamp, UserCommand | None]] = {}
        for name in self._names():
            path = self.path / f"{name}{SUFFIX}"
            try:
                info = os.stat(path)  # through a symlink: the target's version counts
            except (OSError, ValueError):
                continue  # gone since the listing, a dangling link, a loop
            stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            known = self._read.get(name)
            if known is not None and known[0] == stamp:
                fresh[name] = known
            else:
                fresh[name] = (stamp, self._load(name, path, info))
        self._read = fresh
        return {name: command for name, (_, command) in fresh.items() if command is not None}

    def _names(self) -> list[str]:
        names: list[str] = []
        try:
            with os.scandir(self.path) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_ENTRIES:
                        log.warning(
                            "%s: more than %d entries; the rest is ignored", self.path, count
                        )
                        break
                    stem = entry.name.removesuffix(SUFFIX)
                    if stem != entry.name and NAME.fullmatch(stem):
                        names.append(stem)
        except OSError:
            return []  # no such folder (the usual case), not a folder, not readable
        names.sort()
        if len(names) > MAX_COMMANDS:
            log.warning(
                "%s: more than %d commands; only the first are used", self.path, MAX_COMMANDS
            )
            del names[MAX_COMMANDS:]
        return names

    def _load(self, name: str, path: Path, info: os.stat_result) -> UserCommand | None:
        """Read one command file, or None (logged) when it cannot be a command."""
        if not stat.S_ISREG(info.st_mode):
            log.warning("command file %s is not a regular file; ignored", path)
            return None
        if info.st_size > MAX_BYTES:
            log.warning("command file %s is over %d KB; ignored", path, MAX_BYTES // 1024)
            return None
        try:
            real = os.path.realpath(path)
            if self.confine is not None:
                root = os.path.realpath(self.confine)
                if os.path.commonpath([root, real]) != root:
                    log.warning("command file %s leads out of %s; ignored", path, self.confine)
                    return None
            # Never blocks on a FIFO or device swapped in after the stat; no link followed.
            data = read_regular(real, MAX_BYTES, follow_links=False)
        except (OSError, ValueError) as exc:
            log.warning("command file %s cannot be read: %s", path, exc)
            return None
        if data is None:
            log.warning("command file %s is not a readable small regular file; ignored", path)
            return None
        return parse_command(name, data.decode("utf-8", errors="replace"), self.source, str(path))


def parse_command(name: str, text: str, source: str, path: str) -> UserCommand:
    meta, body = split_front_matter(text)
    body = body.strip()
    description = clean(meta.get("description", ""), MAX_DESCRIPTION)
    if not description:
        first = next((line for line in body.splitlines() if line.strip()), "")
        description = clean(first.lstrip("#").strip(), MAX_DESCRIPTION) or f"/{name}"
    hint = clean(meta.get("hint") or meta.get("argument-hint") or "", MAX_HINT)
    if not hint and ARGUMENTS in body:
        hint = "arguments"
    return UserCommand(name, description, hint or None, body, source, path)


def clean(text: str, limit: int) -> str:
    """One line of at most `limit` characters, no control characters (it reaches a UI)."""
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
