"""Which way a request carries tools: the API's `tools` parameter, or text.

The `tool_calls` setting: `native` always sends `tools`; `text` never does (agent.textcalls);
`auto` sends them until the endpoint shows it cannot take them (it refuses the parameter, its
`/props` says the chat template has no tool syntax, or the model writes `<tool_call>` blocks as
text), then switches to text for that endpoint and model for the rest of the process.
"""

from __future__ import annotations

from enum import Enum

from agent.config import Settings


class Switch(Enum):
    """Why `auto` switched to text, as the user is told."""

    REFUSED = "the model server refused the tools parameter"
    TEMPLATE = "the model server reports that its chat template cannot take tools"
    WRITTEN = "the model wrote its tool calls as text"


# (base_url, model) → why `auto` switched it to text, for the rest of the process.
_text_for: dict[tuple[str | None, str], Switch] = {}


def uses_text(settings: Settings) -> bool:
    """Whether this endpoint's requests describe the tools in text instead of `tools`."""
    return settings.tool_calls == "text" or (
        settings.tool_calls == "auto" and (settings.base_url, settings.model) in _text_for
    )


def parses_text(settings: Settings) -> bool:
    """Whether answers are searched for `<tool_call>` blocks (all but `native`)."""
    return settings.tool_calls != "native"


def switch_to_text(settings: Settings, why: Switch) -> bool:
    """In `auto`: use text for this endpoint and model from now on; True if that is news."""
    key = (settings.base_url, settings.model)
    if settings.tool_calls != "auto" or key in _text_for:
        return False
    _text_for[key] = why
    return True


def switched(settings: Settings) -> Switch | None:
    """Why `auto` uses text for this endpoint and model; None when it does not."""
    if settings.tool_calls != "auto":
        return None
    return _text_for.get((settings.base_url, settings.model))
