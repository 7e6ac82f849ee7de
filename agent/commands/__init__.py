"""Slash commands: the built-ins (/help, /compact, /init, /undo, /model, /mode, /trust,
/rules), the user's command files, the skills and the MCP servers' prompts.

- `command`: one command; `catalog`: a session's list and the `available_commands_update`
  carrying it; `live`: keeping the editor's list current (cheap to import: `session/new`);
- `files`: the command files of `.heron/commands/` (a trusted project's) and
  `~/.config/heron/commands/`; `mcp`: the MCP servers' prompts as commands;
- `parse`: a prompt → the command it invokes; `run`: finding and running it (`agent.app.prompt`
  decides between a command and a model turn); `builtins`: what each built-in does; `undo`:
  /undo; `trust`: /trust and the question whether to trust the project; `rules`: /rules;
  `prompts`: command files, MCP prompts and skills as model turns; `pickers`: a stand-in for
  agent.options;
- `conversation`: what a handler gets, the running turn, as a Protocol: commands import
  neither the turn nor the session (both sit above them; `catalog.CommandHost` likewise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from agent.commands.catalog import CommandHost

SETTLE = 0.05  # seconds between an answer and the command list that follows it


def announce_after_answer(session: CommandHost) -> None:
    """List the session's commands right after the `session/new` answer: Zed drops updates
    for a session it does not know yet. Nothing is imported or read before that answer goes
    out. (A loaded or resumed session is known: its list comes before the answer,
    `announce_now`.)"""
    connection = session.connection
    connection.after_answer(lambda: connection.start_soon(_announce, session))


async def _announce(session: CommandHost) -> None:
    # Let the answer reach stdout (through the writer thread where stdout is a file or a
    # terminal) before the imports and the folder scan compete with it for the GIL.
    await anyio.sleep(SETTLE)
    if session.closed:
        return  # closed meanwhile: no scan, no update about a session that is gone
    await announce_now(session)


async def announce_now(session: CommandHost) -> None:
    """Scan the command folders and send the list (session/load, resume: before the answer)."""
    # Imported here: this package is imported before the `session/new` answer, the scan
    # and its imports are not needed by then.
    from agent.commands.live import refresh

    await refresh(session)
