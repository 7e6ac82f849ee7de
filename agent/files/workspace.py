"""Whether a path is inside the session's workspace (its roots), as written and with symlinks
followed: a link inside may lead out. Shared by the permission policy and the shell-command
keys (agent.tools.command_keys)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def inside(path: Path, roots: Sequence[Path]) -> bool:
    """Inside a root both as written and with symlinks followed (a link may lead out)."""
    real = Path(os.path.realpath(path))
    return any(under(path, root) for root in roots) and any(
        under(real, Path(os.path.realpath(root))) for root in roots
    )


def under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def program_outside(name: str, roots: Sequence[Path], path: str | None = None) -> str | None:
    """`name` found on PATH like `shutil.which`, skipping every folder that lies inside the
    workspace (as written or where it leads): sandboxed commands may write there, and Heron runs
    what it finds (rg, bash) outside the sandbox."""
    for folder in (os.environ.get("PATH", "") if path is None else path).split(os.pathsep):
        if not folder or not os.path.isabs(folder):
            continue  # `.` or a relative entry means the current folder: never trusted
        candidate = os.path.join(folder, name)
        if any(
            under(Path(p), root) or under(Path(p), Path(os.path.realpath(root)))
            for root in roots
            for p in (candidate, os.path.realpath(candidate))
        ):
            continue
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def repository_root(cwd: Path) -> Path | None:
    """The top of the git repository holding `cwd` (a `.git` folder, or the `.git` file of a
    worktree or submodule), real path; None outside one. The home folder and `/` do not count
    (a dotfiles repository at $HOME is not the project of every folder below it)."""
    start = Path(os.path.realpath(cwd))
    home = Path(os.path.realpath(os.path.expanduser("~")))
    for folder in (start, *start.parents):
        if folder in (home, Path("/")):
            return None
        try:
            if os.path.lexists(folder / ".git"):
                return folder
        except (OSError, ValueError):
            return None
    return None


def project_folder(cwd: Path) -> Path:
    """What a session works in as a whole: the repository holding `cwd`, else `cwd` itself
    (real paths). Trust is decided for it, and its rules files are read from it down to cwd."""
    return repository_root(cwd) or Path(os.path.realpath(cwd))
