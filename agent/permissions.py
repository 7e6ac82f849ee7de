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
class PermissionMemory:
    """The "always allow" and "always reject" answers of one session, by permission key."""

    allowed: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)

    def allows(self, keys: list[str]) -> bool:
        return bool(keys) and all(k in self.allowed for k in keys)

    def rejects(self, keys: list[str]) -> bool:
        return any(k in self.rejected for k in keys)


def decide(
    mode: str,
    tool: Tool[Any],
    args: Any,
    ctx: ToolContext,
    memory: PermissionMemory,
    roots: list[Path],
) -> tuple[Decision, str]:
    """The decision, and for a refusal the reason the model is told."""
    if mode == "full-access":
        return Decision.ALLOW, ""
    keys = tool.permission_keys(args)
    if memory.rejects(keys):
        return Decision.REFUSE, "The user chose to always reject this; do not try it again."
    safety = tool.safety(args)
    if mode == "read-only" and safety is not Safety.READ_ONLY:
        return Decision.REFUSE, (
            f"Refused: the session is in read-only mode, which does not allow {safety.value} "
            "tools. Tell the user what you would do instead."
        )
    if any(not _inside(path, roots) for path in tool.paths(args, ctx)):
        return Decision.ASK, ""
    if safety is Safety.READ_ONLY:
        return Decision.ALLOW, ""
    if memory.allows(keys):
        return Decision.ALLOW, ""
    if mode == "accept-edits" and safety is Safety.MUTATING:
        return Decision.ALLOW, ""
    return Decision.ASK, ""


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def options_for(tool: Tool[Any], args: Any) -> list[PermissionOption]:
    keys = tool.permission_keys(args)
    what = ", ".join(f"`{k.split(':', 1)[1]}`" if ":" in k else k for k in keys)
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
