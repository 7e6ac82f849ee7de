"""Heron's own one-time notes to the user: what each says, and the one way they go out.

A note (the store is not saving, tool calls switched to text, no sandbox, an MCP server that
failed...) is made where its cause is known, as a `Note`, and handed to the running turn's
`Updates.note` (agent.turn.updates), which tells each session each note once (by `key`):
- as a `notice` update with a severity, to clients that advertised
  `clientCapabilities.session.notices` (a notice is a live event: `session/load` does not send
  it again, it shows it as text to a client without notices);
- as a line of agent text, to every other client, as Heron always did.
A new note belongs here, made by a function beside its cause, and goes through `Updates.note`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Note:
    key: str  # told once per session per key
    title: str  # one line that stands alone (the notice's title)
    text: str  # the whole note, as agent text for clients without notices
    severity: Severity = "info"


def notice_update(note: Note) -> dict[str, Any]:
    """The `notice` session update of a note (the text, stripped, is its description)."""
    update: dict[str, Any] = {
        "sessionUpdate": "notice",
        "severity": note.severity,
        "title": note.title,
    }
    description = note.text.strip()
    if description and description != note.title:
        update["description"] = description
    return update
