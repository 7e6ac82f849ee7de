"""Applying a pick: validate, apply, save, tell the client. Also what `session/new`, `load` and
`resume` answer, and keeping the client's picker current as model lists arrive.

`choose()` is the one entry point for other code (`session/set_config_option`,
`session/set_mode`, the `/model` and `/mode` commands).
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from agent.acp.wire import INVALID_PARAMS, RpcError
from agent.config import MODES
from agent.options import discovery
from agent.options.catalog import (
    ModelPick,
    config_options,
    listed_endpoints,
    model_values,
    modes_state,
    thought_values,
)
from agent.options.unnamed import take_only_model

if TYPE_CHECKING:
    from agent.options.holder import OptionHolder

log = logging.getLogger("heron.options")

OPTION_IDS = ("mode", "model", "thought_level")

# Sessions whose client shows a picker: told when an endpoint's model list changes.
_watching: weakref.WeakSet[OptionHolder] = weakref.WeakSet()


async def choose(session: OptionHolder, option_id: str, value: str) -> None:
    """Set one option of `session` from the next model request on.

    `value` is the option's value id; for `model` a model's name is accepted too (the
    endpoint's list is awaited briefly if it is still coming). Raises RpcError(INVALID_PARAMS)
    with a readable message, changing nothing, for an unknown option or value. The pick is
    saved with the session, and the client is told (`current_mode_update`,
    `config_option_update`) once the answer to the request being handled is out.
    """
    mode_changed = False
    if option_id == "mode":
        if value not in MODES:
            raise _unknown_value("mode", value, MODES)
        mode_changed = value != session.mode
        session.mode = session.saved_mode = value
    elif option_id == "model":
        pick = await _find_model(session, value)
        session.choices.provider = pick.provider
        # The configured model on the configured endpoint is "no pick": it follows the config.
        plain = pick.provider is None and pick.model == session.shared_settings.model
        session.choices.model = None if plain else pick.model
    elif option_id == "thought_level":
        levels = thought_values(session)
        if value not in levels:
            raise _unknown_value("thought_level", value, list(levels))
        session.choices.thought_level = value
    else:
        raise RpcError(
            INVALID_PARAMS,
            f"unknown config option {_short(option_id)}; the options are {', '.join(OPTION_IDS)}",
        )
    log.info("session %s: %s = %s", session.id, option_id, value)
    _save(session)
    session.connection.after_answer(lambda: publish(session, mode_changed))


def opened(session: OptionHolder) -> dict[str, Any]:
    """The `configOptions` and legacy `modes` of a new, loaded or resumed session's answer;
    the endpoints' model lists are asked for once that answer is out."""
    options = config_options(session)
    session.choices.sent = options
    session.connection.after_answer(lambda: _watch(session))
    return {"configOptions": options, "modes": modes_state(session.mode)}


def answered_options(session: OptionHolder) -> list[dict[str, Any]]:
    """The complete list for a `session/set_config_option` answer (the client has it then)."""
    options = config_options(session)
    session.choices.sent = options
    return options


def publish(session: OptionHolder, mode_changed: bool = False) -> None:
    """Tell the client what changed: the legacy mode, and the option list if it differs from
    what the client last received."""
    if session.closed:
        return
    if mode_changed:
        session.notify({"sessionUpdate": "current_mode_update", "currentModeId": session.mode})
    options = config_options(session)
    if options != session.choices.sent:
        session.choices.sent = options
        session.notify({"sessionUpdate": "config_option_update", "configOptions": options})


def _watch(session: OptionHolder) -> None:
    if session.closed:
        return
    _watching.add(session)
    publish(session)  # a list that arrived since the answer was built
    for endpoint in listed_endpoints(session.shared_settings):
        discovery.refresh(endpoint, session.shared_settings, session.connection.start_soon)


def _lists_changed() -> None:
    for session in list(_watching):
        take_only_model(session.shared_settings)  # a server given without a model (unnamed)
        publish(session)


discovery.on_change(_lists_changed)


async def _find_model(session: OptionHolder, value: str) -> ModelPick:
    pick = _lookup(session, value)
    if pick is None:
        shared = session.shared_settings
        await discovery.settle(listed_endpoints(shared), shared, session.connection.start_soon)
        pick = _lookup(session, value)
    if pick is None:
        groups, _ = model_values(session)
        raise _unknown_value("model", value, [v for _, _, picks in groups for v in picks])
    return pick


def _lookup(session: OptionHolder, value: str) -> ModelPick | None:
    """A value id, else a model name (the configured endpoint first), else either ignoring
    case."""
    groups, _ = model_values(session)
    picks = {v: p for _, _, group in groups for v, p in group.items()}
    if value in picks:
        return picks[value]
    by_name = [p for p in picks.values() if p.model == value]
    if by_name:
        return by_name[0]
    folded = value.casefold()
    return next((p for v, p in picks.items() if folded in (v.casefold(), p.model.casefold())), None)


def _save(session: OptionHolder) -> None:
    """Saved now if the session is in the store already (or its row is queued); else with the
    row."""
    saver = session.saver
    if saver is not None and saver.in_store:
        session.save()


def _unknown_value(option_id: str, value: str, known: Any) -> RpcError:
    known = list(known)
    shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
    return RpcError(
        INVALID_PARAMS, f"unknown value {_short(value)} for {option_id}; one of: {shown}"
    )


def _short(text: str) -> str:
    """A client's string as quoted in an error: whatever it sent, the answer stays small."""
    return repr(text if len(text) <= 80 else text[:80] + "…")


__all__ = ["answered_options", "choose", "opened", "publish"]
