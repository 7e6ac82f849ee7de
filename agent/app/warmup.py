"""What the first prompt of the process needs, prepared in a worker thread once a session exists.

Nothing of it comes before the `session/new` answer (see `agent.app.server`): the ACP models
(pydantic), the turn and the tools, the tools' argument schemas, and the model client (`import
openai` alone takes about half a second). A prompt sent a second after `session/new` then
starts as fast as any later one; one sent at once waits for this (`Session.model_ready`), in a
cancellable way. Nothing here talks to the network or touches the disk beyond imports.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.config import Settings

# While this runs, the event loop must get the GIL back quickly when it has something to do
# (an answer to write, a prompt arriving): Python's default switch interval (5 ms) would make
# it wait that long every time it wakes up.
SWITCH_INTERVAL = 0.0005

MODULES = (
    # A prompt (a command or a turn), and what it imports: the loop, the commands, llm,
    # permissions, compaction, context...
    "agent.app.prompt",
    "agent.context.instructions",  # the system prompt, built at the first request
    "agent.skills.tool",
    "agent.store.db",  # sqlite3 (the store itself is opened by the first step, not here)
)


def prepare(settings: Settings) -> Any:
    """Import and build all of it (call from a worker thread); returns the model client."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, SWITCH_INTERVAL))
    try:
        _build_models()
        for module in MODULES:
            importlib.import_module(module)
        _build_tools()
        from agent.llm import prewarm

        return prewarm(settings)
    finally:
        sys.setswitchinterval(previous)


def _build_models() -> None:
    """Every ACP model is built on first use (`defer_build`): build them now."""
    from pydantic import BaseModel

    from agent.acp import protocol

    for value in vars(protocol).values():
        if (
            isinstance(value, type)
            and issubclass(value, BaseModel)
            and value.__module__ == protocol.__name__
        ):
            value.model_rebuild()


def _build_tools() -> None:
    """Import the built-in tools and build their argument models and schemas (sessions make
    their own instances when first asked)."""
    from agent.tools import builtin_tools

    for tool in builtin_tools():
        tool.input_schema()
