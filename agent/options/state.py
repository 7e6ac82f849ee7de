"""What the user picked in one session, and the settings its model requests use.

The server's `Settings` object is shared by every session and updated in place when the config
file is re-read; a session's picks are kept apart from it and laid over it at each model
request (`effective`), so a fixed config reaches existing sessions and a pick made in the
middle of a turn counts from the next request on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from agent.config import Settings

log = logging.getLogger("heron.options")

DEFAULT_LEVEL = "default"  # the thought level that sends no reasoning_effort
_warned: set[str] = set()  # missing providers already logged (this runs at every request)


@dataclass
class Choices:
    """None everywhere means: what the settings say."""

    provider: str | None = None  # a `[providers.NAME]`; None: the top-level endpoint
    model: str | None = None
    thought_level: str | None = None  # DEFAULT_LEVEL or another key of catalog.LEVEL_INFO
    # The option list the client last received (an answer or an update), to send only changes.
    sent: list[dict[str, Any]] | None = field(default=None, compare=False, repr=False)

    def effective(self, shared: Settings) -> Settings:
        """`shared` with these picks applied; `shared` itself when nothing was picked."""
        changes: dict[str, Any] = {}
        if self.provider is not None:
            provider = shared.providers.get(self.provider)
            if provider is None:
                # Removed from the config since: its model would mean nothing elsewhere, so
                # the configured endpoint and model answer (the picker shows them).
                if self.provider not in _warned:
                    _warned.add(self.provider)
                    log.warning(
                        "provider %r is no longer configured; using the default", self.provider
                    )
            else:
                changes |= {"base_url": provider.base_url, "api_key": provider.api_key}
                changes["model"] = self.model or (provider.models or (shared.model,))[0]
        elif self.model is not None:
            changes["model"] = self.model
        if self.thought_level is not None:
            level = None if self.thought_level == DEFAULT_LEVEL else self.thought_level
            changes["reasoning_effort"] = level
        return replace(shared, **changes) if changes else shared

    def saved(self) -> dict[str, str]:
        """What the store keeps: the picks only (unpicked values follow the config)."""
        picks = {"provider": self.provider, "model": self.model, "thought": self.thought_level}
        return {k: v for k, v in picks.items() if v is not None}

    def restore(self, saved: Any) -> None:
        """Back from the store; anything malformed is ignored, not trusted."""
        if not isinstance(saved, dict):
            return
        picks = {k: v for k, v in saved.items() if isinstance(v, str) and v}
        self.provider = picks.get("provider")
        self.model = picks.get("model")
        thought = picks.get("thought")
        # A level is one plain word (low, high, or a configured one such as minimal).
        self.thought_level = thought if thought and thought.isalpha() else None
