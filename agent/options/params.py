"""The params of session/set_config_option and session/set_mode.

Apart from `agent.app.options` so that registering those methods, before `session/new` is
answered, imports neither pydantic nor the ACP models.
"""

from __future__ import annotations

from typing import Any

from agent.acp.protocol import Incoming


class SetConfigOptionParams(Incoming):
    session_id: str
    config_id: str
    value: Any = None
    type: Any = None


class SetModeParams(Incoming):
    session_id: str
    mode_id: str
