"""Telling the user, once per session and endpoint, that the server refused the thought level.

The model client drops `reasoning_effort` from a request the server rejects for it, retries
once without it and remembers that for the endpoint (agent.llm.client); the pick stays, but it
does nothing there, and the user should know why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.llm.client import rejected
from agent.llm.errors import where
from agent.notices import Note

if TYPE_CHECKING:
    from agent.config import Settings

REFUSED = (
    "\n\n(The model server at {where} does not accept a reasoning effort, so Heron sends its "
    "requests without one: the thought level “{level}” has no effect there.)\n\n"
)


def thought_notice(settings: Settings) -> Note | None:
    """The note to show after a model request with `settings`, if there is one (told once per
    session and endpoint: agent.notices)."""
    if not settings.reasoning_effort or not rejected(settings, "reasoning_effort"):
        return None
    endpoint = where(settings)
    text = REFUSED.format(where=endpoint, level=settings.reasoning_effort)
    title = f"The model server at {endpoint} ignores the thought level"
    return Note(f"reasoning_effort refused at {endpoint}", title, text, "info")
