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

from agent.sandbox.plan import git_metadata

LIMIT = 20_000  # entries per fingerprint
TOO_BIG = "(too many files to watch)"

Fingerprint = dict[str, tuple[int, ...]]
_never_equal = itertools.count()  # what a tree too large to walk records

CHANGED = (
    "\n\n[Heron] Warning: the command changed {paths}. Git hooks and config and Heron's "
    "project settings take effect outside the sandbox: tell the user what changed and why."
)


def watched(root: Path) -> list[tuple[str, bool]]:
    """The paths of one root to compare, each with whether its whole content counts (a
    folder walked, a file's size and times) or only what it is (a git folder, whose index and
    logs change with every git command)."""
    top = str(root)
    places = [(os.path.join(top, ".git"), False), (os.path.join(top, ".heron"), True)]
    for place in git_metadata(top):
        if os.path.isdir(place) and os.path.basename(place) not in ("hooks",):
            places.append((place, False))
            places += [(os.path.join(place, n), True) for n in ("config", "hooks", "commondir")]
        else:
            places.append((place, True))
    return list(dict.fromkeys(places))


def fingerprint(roots: list[Path]) -> Fingerprint:
    """Of every watched path under `roots` (links not followed): what it is (type, inode) and,
    where its content counts, its size and times, and the same of every entry below it."""
    state: Fingerprint = {}
    stack = [place for root in roots for place in watched(root)]
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


def changed_note(before: Fingerprint, after: Fingerprint) -> str:
    """The warning for what changed between two fingerprints ("" when nothing did)."""
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    changed = [p for p in changed if p != TOO_BIG] + ([TOO_BIG] if TOO_BIG in changed else [])
    if not changed:
        return ""
    shown = ", ".join(f"`{p}`" for p in changed[:10])
    more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
    return CHANGED.format(paths=shown + more)
