"""The auto mode's command sandbox (Linux Landlock): commands write only the workspace and a
private TMPDIR, read the system and the workspace but not the home folder, and reach no network.

- `landlock`: the binding over the three syscalls, and the launcher script that confines itself
  then execs the command (stdlib only; `heron sandbox …` and `python -m agent.sandbox …` too).
- `rules`: one session's rules, its temporary directory, the launcher command line, and what the
  model and the user are told.
"""

from agent.sandbox.rules import Sandbox, available, blocked_hint
from agent.sandbox.watch import changed_note

__all__ = ["Sandbox", "available", "blocked_hint", "changed_note"]
