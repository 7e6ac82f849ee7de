"""Auto mode's command sandbox: namespaces (the system's bubblewrap, or Heron's own), Landlock
and seccomp together; where they cannot confine a command, auto mode asks instead.

- `support`: which layers this machine offers, and what is missing where none.
- `plan`: what a command sees (the mount plan) and may touch (Landlock's rules).
- `rules`: one session's sandbox: pinned roots, its zygotes, the launcher for the editor's
  terminal, what the model and the user are told.
- `zygote` / `zygote_server`, `launcher`: start commands confined (and below a reaper);
  `confine`, `landlock`, `seccomp`, `namespaces`: the layers, as bare scripts (stdlib only).
- `watch`: changes a sandboxed command made to what runs later outside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.sandbox.rules import Sandbox, blocked_for_user, blocked_hint
    from agent.sandbox.watch import changed_note

__all__ = ["Sandbox", "available", "blocked_for_user", "blocked_hint", "changed_note"]


def available() -> bool:
    """Whether auto mode's sandbox confines commands on this machine (probed once a process,
    on first use: agent.sandbox.support)."""
    from agent.sandbox import support

    return support.detect().path is not None


def __getattr__(name: str) -> Any:
    """`Sandbox` and the hints on first use: the session pins its roots at `session/new` with
    agent.sandbox.plan alone, without the zygote and anyio behind `rules`."""
    if name == "changed_note":
        from agent.sandbox import watch

        return watch.changed_note
    if name in ("Sandbox", "blocked_for_user", "blocked_hint"):
        from agent.sandbox import rules

        return getattr(rules, name)
    raise AttributeError(name)
