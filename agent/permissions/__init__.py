"""Permissions: which calls run, ask or are refused, and what an "always" answer remembers.

- `policy`: mode × tool safety × protected paths × remembered answers → allow, ask or refuse.
- `labels`: what the question says: the options' labels, what "always" covers, the changes
  that suspended a remembered answer.

The key "always allow" remembers for a shell command lives next to the bash tool
(`agent.tools.command_keys`); whether a path is inside the workspace, in `agent.files.workspace`.
Permissions import tools, never the reverse.
"""

from agent.permissions.labels import options_for
from agent.permissions.policy import Decision, PermissionMemory, Verdict, decide

__all__ = ["Decision", "PermissionMemory", "Verdict", "decide", "options_for"]
