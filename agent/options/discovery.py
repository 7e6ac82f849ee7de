"""The models an endpoint offers (`GET /models`), asked in the background and cached.

Never on the path of an answer: `refresh` only starts a task (the callers start it after the
answer is out), and what is known so far is read with `cached`. One request per endpoint at a
time; an answer is kept for TTL seconds per process, a failure too (an endpoint without
`/models`, e.g. some proxies, is not asked again at every session/new). When an endpoint's list
changes, `changed` is called so the sessions showing it can be told.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from agent.config import Settings
from agent.options.model_ids import chat_models

log = logging.getLogger("heron.options")

TTL = 300.0  # seconds an endpoint's list is trusted before it is asked again
TIMEOUT = 5.0  # seconds one discovery request may take
StartSoon = Callable[..., Any]


@dataclass(frozen=True)
class Endpoint:
    base_url: str | None  # None: OpenAI's
    api_key: str | None = field(repr=False)  # never in a log line

    def settings(self, shared: Settings) -> Settings:
        """Settings that reach this endpoint (timeouts and retries from `shared`)."""
        return replace(shared, base_url=self.base_url, api_key=self.api_key)


@dataclass
class _Entry:
    models: list[str] | None = None  # None: not known (not asked yet, or the endpoint can't say)
    fetched_at: float = -math.inf
    running: anyio.Event | None = None
    done: bool = False  # asked at least once, successfully or not


@dataclass
class _State:
    entries: dict[Endpoint, _Entry] = field(default_factory=dict)
    changed: Callable[[], None] | None = None  # called when any endpoint's list changes


_state = _State()


def on_change(callback: Callable[[], None]) -> None:
    _state.changed = callback


def cached(endpoint: Endpoint) -> list[str] | None:
    entry = _state.entries.get(endpoint)
    return entry.models if entry else None


def refresh(endpoint: Endpoint, shared: Settings, start_soon: StartSoon) -> None:
    """Ask the endpoint in the background unless a fresh answer (or a request) is there."""
    entry = _state.entries.setdefault(endpoint, _Entry())
    if entry.running is not None or _now() - entry.fetched_at < TTL:
        return
    entry.running = anyio.Event()
    start_soon(_fetch, endpoint, endpoint.settings(shared), entry)


async def settle(endpoints: list[Endpoint], shared: Settings, start_soon: StartSoon) -> None:
    """Wait (bounded) until these endpoints have answered at least once: a pick sent right
    after session/new may name a model only the endpoint's list knows."""
    waits: list[Awaitable[Any]] = []
    for endpoint in endpoints:
        refresh(endpoint, shared, start_soon)
        entry = _state.entries[endpoint]
        if entry.running is not None and not entry.done:
            waits.append(entry.running.wait())
    with anyio.move_on_after(TIMEOUT + 1):
        for wait in waits:
            await wait


async def _fetch(endpoint: Endpoint, settings: Settings, entry: _Entry) -> None:
    try:
        models = await _list_models(settings)
        if models is None and entry.models is not None:
            models = entry.models  # a passing failure does not empty a known list
        changed = models != entry.models
        entry.models = models
    finally:
        entry.fetched_at = _now()
        entry.done = True
        running, entry.running = entry.running, None
        if running is not None:
            running.set()
    if changed and _state.changed is not None:
        _state.changed()


async def _list_models(settings: Settings) -> list[str] | None:
    """The chat models the endpoint lists, or None if it does not say (404, unreachable...)."""
    from agent import llm

    try:
        # openai is imported and the client made off the event loop, abandoned if Heron
        # exits meanwhile.
        made = await anyio.to_thread.run_sync(llm.prewarm, settings, abandon_on_cancel=True)
        llm.keep_client(settings, made)
        import httpx2 as httpx  # openai's transport (pyproject: openai>=3.57, httpx2)

        client = await llm.get_client(settings)
        with anyio.fail_after(TIMEOUT):
            response = await client.get(
                "/models",
                cast_to=httpx.Response,
                options={"max_retries": 0, "timeout": TIMEOUT},
            )
        models = chat_models(response.json())  # chat models only, bounded
    except Exception as exc:  # any failure means: this endpoint does not say
        log.info("no model list from %s/models: %s", settings.base_url or "OpenAI", exc)
        return None
    log.debug("%d models at %s", len(models), settings.base_url or "OpenAI")
    return models


def _now() -> float:
    return anyio.current_time()


def forget() -> None:
    """Drop what is known (tests)."""
    _state.entries.clear()
