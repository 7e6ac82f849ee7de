"""`/model` and `/mode` read and set the same pickers as the editor's (agent.options)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.acp.wire import RpcError
from agent.options.apply import choose
from agent.options.catalog import config_options

if TYPE_CHECKING:
    from agent.options.holder import OptionHolder


def _option(session: OptionHolder, option_id: str) -> dict[str, Any]:
    return next(o for o in config_options(session) if o["id"] == option_id)


def current(session: OptionHolder, option_id: str) -> str:
    return str(_option(session, option_id)["currentValue"])


def choices(session: OptionHolder, option_id: str) -> list[tuple[str, str]]:
    """(value, one-line description) for each choice, groups flattened."""
    found: list[tuple[str, str]] = []
    for entry in _option(session, option_id)["options"]:
        for value in entry.get("options", [entry]):  # a group holds its values
            group = f" ({entry['name']})" if "group" in entry else ""
            found.append((value["value"], (value.get("description") or value["name"]) + group))
    return found


async def apply_choice(session: OptionHolder, option_id: str, value: str) -> None:
    """Set the option from the next model request on, as the picker does; ValueError with a
    readable message if the value is unknown."""
    try:
        await choose(session, option_id, value)
    except RpcError as exc:
        raise ValueError(exc.message[:1].upper() + exc.message[1:] + ".") from exc
