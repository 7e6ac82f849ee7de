"""Mode × tool safety → allow, ask or refuse; and the "always" answers a session remembers.

Modes, from strictest:
- read-only: anything that changes the world or reaches the network is refused unasked.
- ask: every edit, delete, move, command and fetch asks.
- accept-edits: edits inside the workspace run unasked; commands and fetches ask.
- full-access: nothing asks.
Whatever the mode (but full-access), a call touching a path outside the session's workspace asks.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.protocol import PermissionOption
from agent.tools.base import Safety, Tool, ToolContext


class Decision(enum.Enum):
    ALLOW = "allow"
    ASK = "ask"
    REFUSE = "refuse"


@dataclass
class Verdict:
    decision: Decision
    reason: str = ""  # for a refusal: what the model is told
    keys: list[str] = field(default_factory=list)  # what an "always" answer remembers


@dataclass
class PermissionMemory:
    """The "always allow" and "always reject" answers of one session, by permission key."""

    allowed: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)

    def allows(self, keys: list[str]) -> bool:
        return bool(keys) and all(k in self.allowed for k in keys)

    def rejects(self, keys: list[str]) -> bool:
        return any(k in self.rejected for k in keys)

    def remember(self, option_kind: str | None, keys: list[str]) -> None:
        if option_kind == "allow_always":
            self.allowed.update(keys)
        elif option_kind == "reject_always":
            self.rejected.update(keys)


def decide(
    mode: str,
    tool: Tool[Any],
    args: Any,
    ctx: ToolContext,
    memory: PermissionMemory,
    roots: list[Path],
) -> Verdict:
    if mode == "full-access":
        return Verdict(Decision.ALLOW)
    keys = tool.permission_keys(args)
    outside = [path for path in tool.paths(args, ctx) if not _inside(path, roots)]
    if outside:
        # "Always" for a call outside the workspace covers that tool on those paths only:
        # it neither widens nor is widened by what was allowed inside.
        keys = [f"{key} {path}" for key in keys for path in outside]
    if memory.rejects(keys):
        return Verdict(
            Decision.REFUSE, "The user chose to always reject this; do not try it again.", keys
        )
    safety = tool.safety(args)
    if mode == "read-only" and safety is not Safety.READ_ONLY:
        reason = (
            f"Refused: the session is in read-only mode, which does not allow {safety.value} "
            "tools. Tell the user what you would do instead."
        )
        return Verdict(Decision.REFUSE, reason, keys)
    if memory.allows(keys):
        return Verdict(Decision.ALLOW, keys=keys)
    if outside:
        return Verdict(Decision.ASK, keys=keys)
    if safety is Safety.READ_ONLY:
        return Verdict(Decision.ALLOW, keys=keys)
    if mode == "accept-edits" and safety is Safety.MUTATING:
        return Verdict(Decision.ALLOW, keys=keys)
    return Verdict(Decision.ASK, keys=keys)


def _inside(path: Path, roots: list[Path]) -> bool:
    """Inside a root both as written and with symlinks followed (a link may lead out)."""
    real = Path(os.path.realpath(path))
    return any(_under(path, root) for root in roots) and any(
        _under(real, Path(os.path.realpath(root))) for root in roots
    )


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def options_for(keys: list[str]) -> list[PermissionOption]:
    what = ", ".join(_label(key) for key in keys)
    return [
        PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
        PermissionOption(
            option_id="allow_always", name=f"Always allow {what}", kind="allow_always"
        ),
        PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
        PermissionOption(
            option_id="reject_always", name=f"Always reject {what}", kind="reject_always"
        ),
    ]


def _label(key: str) -> str:
    """`bash:git status` → `git status` (in backticks); a bare tool name stays as it is."""
    family, sep, detail = key.partition(":")
    if sep and family.isidentifier():
        return f"`{detail}`"
    return key
