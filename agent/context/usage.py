"""How full the model's context is: `usage_update {used, size}` after each model response.

`used` is the server's own count when it sends one (requested with `stream_options:
{include_usage: true}`), else an estimate from the text length. `size` is the `context_window`
setting, else what the server's `/v1/models` says about the model (vLLM `max_model_len`,
llama.cpp `meta.n_ctx`, OpenRouter `context_length`), else a table of well-known models, else
128000. The server is asked once per process and model, briefly, and never again on failure.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from agent.config import Settings

log = logging.getLogger("heron.usage")

DEFAULT_WINDOW = 128_000
CHARS_PER_TOKEN = 4  # a rough average for English and code; only used without server counts

# Prefix of the model name → context window (tokens). Longest prefix wins.
KNOWN_WINDOWS = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "gemini": 1_048_576,
    "deepseek": 128_000,
    "qwen2.5-coder": 32_768,
    "qwen3": 40_960,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "mistral": 32_768,
    "codestral": 256_000,
}

_windows: dict[tuple[str | None, str], int | None] = {}  # (base_url, model) → from the server


async def context_size(settings: Settings) -> int:
    if settings.context_window:
        return settings.context_window
    key = (settings.base_url, settings.model)
    if key not in _windows:
        _windows[key] = None  # asked once, even if the answer never comes
        with anyio.move_on_after(3):
            _windows[key] = await _server_window(settings)
    return _windows[key] or known_window(settings.model)


def known_window(model: str) -> int:
    name = model.lower().rsplit("/", 1)[-1]
    matches = [prefix for prefix in KNOWN_WINDOWS if name.startswith(prefix)]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else DEFAULT_WINDOW


async def _server_window(settings: Settings) -> int | None:
    from agent.llm import get_client

    try:
        client = await get_client(settings)
        page = await client.models.list()
        for model in page.data:
            if model.id == settings.model:
                return window_of(model.model_dump())
    except Exception as exc:  # metadata is a nicety: any failure falls back to the table
        log.info("no context window from %s/models: %s", settings.base_url, exc)
    return None


def window_of(model: dict[str, Any]) -> int | None:
    """The context window in one `/v1/models` entry, where the server gives one."""
    meta = model.get("meta") if isinstance(model.get("meta"), dict) else {}
    top = model.get("top_provider") if isinstance(model.get("top_provider"), dict) else {}
    for value in (
        model.get("max_model_len"),  # vLLM
        meta.get("n_ctx"),  # llama.cpp server: the context it runs with
        model.get("context_length"),  # OpenRouter, LM Studio
        top.get("context_length"),  # OpenRouter
        model.get("context_window"),
        meta.get("n_ctx_train"),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def tokens_used(
    usage: dict[str, Any] | None,
    messages: list[dict[str, Any]],
    reply: str,
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """Tokens in context after this response: the server's count, else an estimate of what a
    request sends (the messages, system prompt included, and the tools' definitions)."""
    if usage:
        total = usage.get("total_tokens")
        if isinstance(total, int) and total > 0:
            return total
        parts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
        if all(isinstance(p, int) for p in parts) and sum(parts) > 0:  # type: ignore[arg-type]
            return sum(parts)  # type: ignore[arg-type]
    tools_size = len(json.dumps(tools, ensure_ascii=False)) if tools else 0
    return estimate_tokens(messages) + (len(reply) + tools_size) // CHARS_PER_TOKEN


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    size = sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)
    return size // CHARS_PER_TOKEN
