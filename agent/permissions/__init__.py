"""Permissions: which calls run, ask or are refused, and what an "always" answer remembers.

- `policy`: mode × tool safety × protected paths × remembered answers → allow, ask or refuse.
- `commands`: the key "always allow" remembers for a shell command, or none when the command
  does something the matcher cannot vouch for.
- `workspace`: whether a path is inside the session's workspace roots (symlinks followed).
"""

from agent.permissions.policy import Decision, PermissionMemory, Verdict, decide, options_for

__all__ = ["Decision", "PermissionMemory", "Verdict", "decide", "options_for"]
