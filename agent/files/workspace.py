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
