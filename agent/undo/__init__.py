"""Taking back what the agent's file tools did, one turn at a time (`/undo`).

- `states`: a path's prior state on disk (text, bytes, link, folder), captured and put back.
- `journal`: per session, each turn's changes (prior state, hash of what the tool wrote),
  bounded, saved with the session (agent.store) and restored on load.
- `revert`: reverting one turn's changes, newest first, never over a file changed since;
  run against a simulation (the preview) or the real files.
- `tool`: the revert as an internal tool (kind edit), so it is shown, asked and run like the
  agent's own edits. The `/undo` command itself is `agent.commands.undo`.
"""
