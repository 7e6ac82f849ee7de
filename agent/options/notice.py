"""Telling the user, once per session and endpoint, that the server refused the thought level.

The model client drops `reasoning_effort` from a request the server rejects for it, retries
once without it and remembers that for the endpoint (agent.llm.client); the pick stays, but it
does nothing there, and the user should know why.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from agent.llm.client import rejected
from agent.llm.errors import where

if TYPE_CHECKING:
    from agent.session import Session

REFUSED = (
    "\n\n(The model server at {where} does not accept a reasoning effort, so Heron sends its "
    "requests without one: the thought level “{level}” has no effect there.)\n\n"
)

_told: weakref.WeakKeyDictionary[Session, set[str]] = weakref.WeakKeyDictionary()


def thought_notice(session: Session) -> str | None:
    """The notice to show after a model request, if there is one to show."""
    settings = session.settings
    if not settings.reasoning_effort or not rejected(settings, "reasoning_effort"):
        return None
    told = _told.setdefault(session, set())
    endpoint = where(settings)
    if endpoint in told:
        return None
    told.add(endpoint)
    return REFUSED.format(where=endpoint, level=settings.reasoning_effort)
