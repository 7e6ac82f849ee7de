"""Changes a sandboxed command made to what git or Heron run later outside the sandbox.

Inside the namespaces `.git/`, `.heron/` and the rest of agent.sandbox.plan's protected paths
are read-only; with Landlock alone they cannot be (a rule can only allow, never carve a folder
out of one it allowed). Either way each sandboxed command is followed by a comparison of those
paths before and after it, and a change is reported to the model and the user with the
command's result (and suspends the "always" answers of commands that run outside the sandbox:
agent.permissions).

Watched in each root: `.git` itself (a folder, or a file naming one), the git folder's `config`,
`hooks/` and `commondir` and the same in the common folder it names, the folder of
`core.hooksPath`, and `.heron/` whole. A tree too large to walk (over `LIMIT` entries) counts
as changed every time: a command cannot hide a change behind many files.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from pathlib import Path

from agent.sandbox.gitmeta import places
from agent.sandbox.plan import EDITOR_SETTINGS

LIMIT = 20_000  # entries per fingerprint
GIT_FILES = ("config", "config.worktree", "hooks", "commondir", "info")
TOO_BIG = "(too many files to watch)"
SCAN_FOLDERS = 3000  # folders walked after a command for repositories it created
# Folders of dependencies and build output: not walked for new repositories.
SKIPPED = frozenset((
    ".git", "node_modules", ".venv", "venv", "__pycache__", "target", "build", "dist", ".tox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".gradle", ".m2", ".cache", ".next",
))  # fmt: skip

Fingerprint = dict[str, tuple[int, ...]]
_never_equal = itertools.count()  # what a tree too large to walk records

CHANGED = (
    "\n\n[Heron] Warning: the command changed {paths}. Git hooks and config and Heron's "
    "project settings take effect outside the sandbox: tell the user what changed and why. "
    "Until the user confirms with /trust, Heron runs git with this repository's hooks and "
    "program settings disabled."
)


def watched(root: Path, home: str) -> list[tuple[str, bool]]:
    """The paths of one root to compare, each with whether its whole content counts (a
    folder walked, a file's size and times) or only what it is (a git folder, whose index and
    logs change with every git command)."""
    top = str(root)
    entries = [(os.path.join(top, ".git"), False)]
    entries += [(os.path.join(top, name), True) for name in EDITOR_SETTINGS]
    for place in places(top, home).protect:
        if os.path.isdir(place) and os.path.basename(place) != "hooks" and _is_git_folder(place):
            entries.append((place, False))
            entries += [(os.path.join(place, n), True) for n in GIT_FILES]
        else:
            entries.append((place, True))
    return list(dict.fromkeys(entries))


def _is_git_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "HEAD")) or os.path.basename(path) == ".git"


def fingerprint(roots: list[Path], home: str = "") -> Fingerprint:
    """Of every watched path under `roots` (links not followed): what it is (type, inode) and,
    where its content counts, its size and times, and the same of every entry below it."""
    state: Fingerprint = {}
    home = home or os.path.expanduser("~")
    stack = [place for root in roots for place in watched(root, home)]
    seen = 0
    while stack:
        path, whole = stack.pop()
        seen += 1
        if seen > LIMIT:
            state[TOO_BIG] = (next(_never_equal),)
            return state
        try:
            st = os.lstat(path)
        except OSError:
            state[path] = ()  # absent: its creation is a change too
            continue
        kind = stat.S_IFMT(st.st_mode)
        if not whole and kind == stat.S_IFDIR:
            state[path] = (kind, st.st_ino)
            continue
        state[path] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if kind == stat.S_IFDIR:
            with contextlib.suppress(OSError):
                stack.extend((os.path.join(path, name), True) for name in os.listdir(path))
    return state


def changed_paths(before: Fingerprint, after: Fingerprint) -> list[str]:
    """The watched paths that changed between two fingerprints (made, removed, altered)."""
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    return [p for p in changed if p != TOO_BIG] + ([TOO_BIG] if TOO_BIG in changed else [])


def changed_note(changed: list[str]) -> str:
    """The warning for the model and the user about those paths ("" for none)."""
    if not changed:
        return ""
    shown = ", ".join(f"`{p}`" for p in changed[:10])
    more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
    return CHANGED.format(paths=shown + more)


def git_related(path: str) -> bool:
    """Whether a watched path that changed is git's (its folder, a hooks folder or config file
    it names elsewhere, a new repository), not an editor's or Heron's project settings."""
    return not any(part in EDITOR_SETTINGS for part in Path(path).parts)


def new_repositories(roots: list[Path], since_ns: int, budget: int = SCAN_FOLDERS) -> list[str]:
    """`.git` entries below the roots (not their own) made or changed since `since_ns`: a
    repository a command created in a subfolder runs its config with any git run there later.
    Folders that hold dependencies or build output are not entered, and the walk stops after
    `budget` folders (a new repository deeper in a very large tree goes unseen: docs/sandbox.md)."""
    found: list[str] = []
    todo = [str(root) for root in roots]
    while todo and budget > 0:
        folder = todo.pop()
        budget -= 1
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name == ".git":
                        if folder not in map(str, roots) and _changed_since(entry.path, since_ns):
                            found.append(entry.path)
                    elif entry.name not in SKIPPED and entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
        except OSError:
            continue
    return sorted(found)


def _changed_since(dot_git: str, since_ns: int) -> bool:
    for path in (dot_git, os.path.join(dot_git, "config")):
        try:
            if os.lstat(path).st_ctime_ns >= since_ns:
                return True
        except OSError:
            continue
    return False
