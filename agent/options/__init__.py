"""The session's pickers: permission mode, model (with `[providers.NAME]` endpoints) and
thought level, as ACP config options (and the legacy modes).

- `state`: a session's picks and the settings its model requests use;
- `catalog`: the option list and what each value stands for;
- `discovery`: the models an endpoint offers (GET /models), in the background, cached;
- `apply`: `choose()`, applying a pick (validate, apply, save, tell the client), and the
  answers of session/new, load and resume (session/set_config_option and session/set_mode
  are `agent.app.options`);
- `notice`: telling the user when a server refuses the thought level.
- `holder`: what these read and set of a session (a Protocol: this package sits below the
  session and does not import it).

Other code changes an option with `await agent.options.choose(session, option_id, value)`.
The `[providers.NAME]` tables are read with the settings (agent.config). This file stays
empty of imports: `choose` is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.options.apply import choose

__all__ = ["choose"]


def __getattr__(name: str) -> Any:
    if name == "choose":
        from agent.options.apply import choose

        return choose
    raise AttributeError(name)
