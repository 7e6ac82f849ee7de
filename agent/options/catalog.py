"""The option list a session shows (ACP `SessionConfigOption`s, most important first), the
legacy `modes` state, and what each model value stands for.

Built from plain data on every call (a few dozen dicts): nothing here waits for anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent.config import MODES, Settings
from agent.options import discovery
from agent.options.discovery import Endpoint
from agent.options.state import DEFAULT_LEVEL

if TYPE_CHECKING:
    from agent.options.holder import OptionHolder

# mode → (name, what runs without asking)
MODE_INFO = {
    "read-only": ("Read-only", "Reads and searches; edits, commands and fetches are refused."),
    "ask": ("Ask", "Reads and searches run; every edit, command and fetch asks first."),
    "auto": (
        "Auto",
        "Edits in the workspace, and commands in a sandbox, run without asking; the sandbox "
        "keeps writes to the workspace, your home folder's secrets out and the network off. "
        "Leaving it, commands that discard work, deletes, moves and fetches ask.",
    ),
    "accept-edits": (
        "Accept edits",
        "Also edits files in the workspace; commands, deletes, moves and fetches ask.",
    ),
    "full-access": ("Full access", "Everything runs without asking."),
}
assert tuple(MODE_INFO) == MODES

LEVEL_INFO = {
    DEFAULT_LEVEL: ("Default", "Sends no reasoning effort: the model decides."),
    "low": ("Low", "reasoning_effort: low (faster, fewer thinking tokens)."),
    "medium": ("Medium", "reasoning_effort: medium."),
    "high": ("High", "reasoning_effort: high (slower, more thorough)."),
}

DEFAULT_GROUP = "default"


@dataclass(frozen=True)
class ModelPick:
    """What a value of the model option stands for."""

    provider: str | None  # None: the top-level endpoint
    model: str


def default_endpoint(shared: Settings) -> Endpoint:
    return Endpoint(shared.base_url, shared.api_key)


def listed_endpoints(shared: Settings) -> list[Endpoint]:
    """The endpoints whose model lists the picker asks for (providers with `models` say)."""
    endpoints = [default_endpoint(shared)] if shared.llm_configured else []
    endpoints += [
        Endpoint(p.base_url, p.api_key) for p in shared.providers.values() if not p.models
    ]
    return endpoints


def model_values(session: OptionHolder) -> tuple[list[tuple[str, str, dict[str, ModelPick]]], str]:
    """[(group id, group name, {value: pick})] and the current value."""
    shared, choices = session.shared_settings, session.choices
    current = ModelPick(choices.provider, session.settings.model)
    if current.provider is not None and current.provider not in shared.providers:
        current = ModelPick(None, shared.model)
    groups: list[tuple[str, str, dict[str, ModelPick]]] = []
    seen: set[str] = set()

    def group(gid: str, name: str, provider: str | None, models: list[str]) -> None:
        if current.provider == provider and current.model not in models:
            models = [current.model, *models]
        values: dict[str, ModelPick] = {}
        for model in dict.fromkeys(models):
            value = base = model if provider is None else f"{provider}/{model}"
            n = 1
            while value in seen:  # values are unique across groups: "x", then "x#2"
                n += 1
                value = f"{base}#{n}"
            seen.add(value)
            values[value] = ModelPick(provider, model)
        if values:
            groups.append((gid, name, values))

    found = discovery.cached(default_endpoint(shared)) or []
    group(DEFAULT_GROUP, _label(shared.base_url), None, _ordered([shared.model], found))
    for provider in shared.providers.values():
        listed = list(provider.models) or (
            discovery.cached(Endpoint(provider.base_url, provider.api_key)) or []
        )
        group(f"provider:{provider.name}", provider.name, provider.name, _ordered([], listed))
    value = next(v for _, _, picks in groups for v, p in picks.items() if p == current)
    return groups, value


def model_option(session: OptionHolder) -> dict[str, Any]:
    groups, current = model_values(session)
    if len(groups) == 1:
        options: list[dict[str, Any]] = [_name(v, p) for v, p in groups[0][2].items()]
    else:
        options = [
            {"group": gid, "name": name, "options": [_name(v, p) for v, p in picks.items()]}
            for gid, name, picks in groups
        ]
    return {
        "id": "model",
        "name": "Model",
        "description": "The model that answers, from the next request on.",
        "category": "model",
        "type": "select",
        "currentValue": current,
        "options": options,
    }


def thought_values(session: OptionHolder) -> dict[str, tuple[str, str]]:
    values = dict(LEVEL_INFO)
    configured = session.shared_settings.reasoning_effort
    if configured and configured not in values:
        values[configured] = (configured.capitalize(), f"reasoning_effort: {configured}.")
    return values


def current_thought(session: OptionHolder) -> str:
    picked = session.choices.thought_level
    if picked is not None:
        return picked
    return session.shared_settings.reasoning_effort or DEFAULT_LEVEL


def thought_option(session: OptionHolder) -> dict[str, Any]:
    return {
        "id": "thought_level",
        "name": "Thinking",
        "description": "How hard a reasoning model thinks (sent as reasoning_effort).",
        "category": "thought_level",
        "type": "select",
        "currentValue": current_thought(session),
        "options": [
            _value(v, name, description)
            for v, (name, description) in thought_values(session).items()
        ],
    }


def mode_option(mode: str) -> dict[str, Any]:
    return {
        "id": "mode",
        "name": "Mode",
        "description": "What Heron may do without asking.",
        "category": "mode",
        "type": "select",
        "currentValue": mode,
        "options": [_value(m, name, text) for m, (name, text) in MODE_INFO.items()],
    }


def config_options(session: OptionHolder) -> list[dict[str, Any]]:
    """The complete list with current values, most important first."""
    return [mode_option(session.mode), model_option(session), thought_option(session)]


def modes_state(mode: str) -> dict[str, Any]:
    """The legacy `modes` (clients without config options), the same four modes."""
    return {
        "currentModeId": mode,
        "availableModes": [
            {"id": m, "name": name, "description": text} for m, (name, text) in MODE_INFO.items()
        ],
    }


def _value(value: str, name: str, description: str | None = None) -> dict[str, Any]:
    item = {"value": value, "name": name}
    if description:
        item["description"] = description
    return item


def _name(value: str, pick: ModelPick) -> dict[str, Any]:
    # "": a server given without a model (agent.options.unnamed), until one is picked
    return _value(value, pick.model or "No model named: pick one")


def _ordered(first: list[str], found: list[str]) -> list[str]:
    """The configured model(s) first, then the endpoint's list sorted."""
    return list(dict.fromkeys([*first, *sorted(found, key=str.lower)]))


def _label(base_url: str | None) -> str:
    if not base_url:
        return "OpenAI"
    parts = urlsplit(base_url)
    return parts.netloc or base_url
