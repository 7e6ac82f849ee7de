"""What Landlock cannot keep read-only: `.git/` and `.heron/` inside the writable workspace.

A rule can only allow, never carve a folder out of one it allowed, so a sandboxed command may
change git's hooks and config or Heron's project settings, which run later outside the
sandbox. Each such change is found (a fingerprint of those paths before and after the
command) and reported to the model and the user with the command's result.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

WATCHED = (".git/config", ".git/hooks", ".heron")
LIMIT = 2000  # entries per fingerprint: a huge folder must not slow every command

Fingerprint = dict[str, tuple[int, int, int, int, int]]

CHANGED = (
    "\n\n[Heron] Warning: the command changed {paths}. Git hooks and config and Heron's "
    "project settings take effect outside the sandbox: tell the user what changed and why. "
    "Until the user confirms with /trust, Heron runs git with this repository's hooks and "
    "program settings disabled."
)


def fingerprint(roots: list[Path]) -> Fingerprint:
    """Mode, size, times and inode of every watched path under `roots` (links not followed)."""
    state: Fingerprint = {}
    stack = [str(root / name) for root in roots for name in WATCHED]
    while stack and len(state) < LIMIT:
        path = stack.pop()
        try:
            st = os.lstat(path)
        except OSError:
            continue
        state[path] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            with contextlib.suppress(OSError):
                stack.extend(os.path.join(path, name) for name in os.listdir(path))
    return state


def changed_paths(before: Fingerprint, after: Fingerprint) -> list[str]:
    """The watched paths that changed between two fingerprints (added, removed, altered)."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def changed_note(before: Fingerprint, after: Fingerprint) -> str:
    """The warning for what changed between two fingerprints ("" when nothing did)."""
    changed = changed_paths(before, after)
    if not changed:
        return ""
    shown = ", ".join(f"`{p}`" for p in changed[:10])
    more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
    return CHANGED.format(paths=shown + more)
