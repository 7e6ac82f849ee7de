"""TEMPORARY stand-in for `agent.options` (the config-option pickers), REPLACED AT MERGE.

`/model` and `/mode` only need three things from the pickers: the current value, the choices,
and `apply_choice` (validate, apply; the real one also saves and emits the option updates).
At merge, these delegate to `agent.options` (`choose(session, option_id, value)`) and this
module goes away.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from agent.config import MODES

if TYPE_CHECKING:
    from agent.session import Session

MODE_DESCRIPTIONS = {
    "read-only": "reading and searching; every change is refused",
    "ask": "reading and searching; everything else asks",
    "accept-edits": "also edits inside the workspace; commands, deletes and fetches ask",
    "full-access": "everything runs without asking",
}


def current(session: Session, option_id: str) -> str:
    return session.mode if option_id == "mode" else session.settings.model


def choices(session: Session, option_id: str) -> list[tuple[str, str]]:
    """(value, one-line description) for each choice."""
    if option_id == "mode":
        return [(mode, MODE_DESCRIPTIONS[mode]) for mode in MODES]
    return [(session.settings.model, "the configured model")]  # no discovery in this stand-in


async def apply_choice(session: Session, option_id: str, value: str) -> None:
    """Set the option for the session's next model request; ValueError (readable) if invalid."""
    if option_id == "mode":
        if value not in MODES:
            raise ValueError(f"Unknown mode {value!r}: choose one of {', '.join(MODES)}.")
        session.mode = value
    elif option_id == "model":
        if not value or any(c.isspace() for c in value):
            raise ValueError(f"{value!r} is not a model name.")
        # Settings are shared between sessions: this session gets its own copy.
        session.settings = dataclasses.replace(session.settings, model=value)
        session.tool_context.settings = session.settings
    else:
        raise ValueError(f"Unknown option {option_id!r}.")
