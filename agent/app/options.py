"""`session/set_config_option` and the legacy `session/set_mode`: parse, then `choose()`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.acp.wire import INVALID_PARAMS, RpcError
from agent.options.apply import answered_options, choose

if TYPE_CHECKING:
    from agent.session import Session


class OptionMethods:
    def __init__(
        self,
        find_session: Callable[[str], Session],
        parse: Callable[[type[Any], dict[str, Any]], Any],
    ) -> None:
        self.find_session = find_session
        self.parse = parse

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        from agent.options.params import SetConfigOptionParams

        parsed = self.parse(SetConfigOptionParams, params)
        session = self.find_session(parsed.session_id)
        if parsed.type == "boolean" or not isinstance(parsed.value, str):
            # Every Heron option is a select: its value is a value id (a string).
            raise RpcError(INVALID_PARAMS, f"{parsed.config_id!r} takes a value id (a string)")
        await choose(session, parsed.config_id, parsed.value)
        return {"configOptions": answered_options(session)}

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        from agent.options.params import SetModeParams

        parsed = self.parse(SetModeParams, params)
        await choose(self.find_session(parsed.session_id), "mode", parsed.mode_id)
        return {}
