"""How full the model's context is: `usage_update {used, size}` after each model response.

`used` is the server's own count when it sends one (requested with `stream_options:
{include_usage: true}`), else an estimate from the text length, at the characters per token
the server's counts showed for this endpoint and model (`measure`: every answer's
`prompt_tokens`, and the prompt size an overflow error names), else a cautious 3 (real text
ran from 1.8 to 4.5: small vocabularies, code and JSON take more tokens than English prose).
Heron's own part of a request (system prompt, tool schemas) and the conversation are counted
apart: a pasted log at 1.5 characters a token says nothing about the tool schemas.

`size` (`context_size`) is the `context_window` setting, else the size the server named when
it rejected a request for its length, else what the server says up front (llama-server's
`/props` n_ctx, `/v1/models` metadata: vLLM `max_model_len`, llama.cpp `meta.n_ctx`,
OpenRouter `context_length`; Ollama's `/api/show` num_ctx), else a table of well-known models,
else 128000. The server is asked once per process, endpoint and model, in the background when
a session opens, never again on failure.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from agent.config import Settings
from agent.llm import serverinfo
from agent.llm.serverinfo import window_of

__all__ = [
    "FIXED",
    "HISTORY",
    "chars_per_token",
    "context_size",
    "estimate_tokens",
    "known_window",
    "learn",
    "measure",
    "size_of",
    "tokens_used",
    "window_of",
]

log = logging.getLogger("heron.usage")

DEFAULT_WINDOW = 128_000
# Characters (of the messages as JSON) per token until the server has counted: CAUTIOUS where
# guessing low means a request the server refuses (compaction plans with it), OPTIMISTIC where
# guessing high means refusing to try (telling the user the window is too small).
CAUTIOUS = 3.0
OPTIMISTIC = 4.0
MEASURED = (0.8, 8.0)  # a count outside this is not a tokenizer's (a server reporting nonsense)
MIN_MEASURED = 1_000  # characters: a smaller request says more about the template than the text

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

# (base_url, model) → the size the server named when it rejected a request for its length
# (agent.llm.errors.context_size_in): the truth about that endpoint, for the whole process.
_overflowed: dict[tuple[str | None, str], int] = {}
# (base_url, model) → what the server says up front (None: it does not say); absent: not asked.
_told: dict[tuple[str | None, str], int | None] = {}
_asking: dict[tuple[str | None, str], anyio.Event] = {}
WAIT = 3.0  # seconds a request waits for the server's answer still on its way


def _key(settings: Settings) -> tuple[str | None, str]:
    return (settings.base_url, settings.model)


# (base_url, model, part) → characters per token the server's counts showed, for Heron's
# fixed part of a request ("fixed": system prompt and tools) and for the conversation.
_measured: dict[tuple[str | None, str, str], float] = {}
FIXED, HISTORY = "fixed", "history"


def overflowed(settings: Settings, size: int) -> None:
    """The server rejected a request for its length, naming its context size."""
    _overflowed[_key(settings)] = size


def measure(settings: Settings, fixed: int, history: int, tokens: Any) -> None:
    """The server counted `tokens` for a request of `fixed` characters of Heron's own part and
    `history` of the conversation (`size_of`). A request that is nearly all fixed part (a
    session's first) measures that part; others measure the conversation, the fixed part's
    tokens taken out (estimated generously when it was never measured). The latest count wins:
    it reflects what the conversation holds now."""
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
        return
    key = _key(settings)
    if history <= FIXED_ONLY * (fixed + history):
        _keep(key, FIXED, fixed + history, tokens)
        return
    conversation = tokens - fixed / (_measured.get((*key, FIXED)) or OPTIMISTIC)
    if conversation > 0:
        _keep(key, HISTORY, history, conversation)


FIXED_ONLY = 0.05  # of a request's characters, at most, for it to measure the fixed part


def _keep(key: tuple[str | None, str], part: str, chars: int, tokens: float) -> None:
    ratio = chars / tokens
    if chars >= MIN_MEASURED and MEASURED[0] <= ratio <= MEASURED[1]:
        _measured[(*key, part)] = ratio


def chars_per_token(settings: Settings, part: str = HISTORY, cautious: bool = True) -> float:
    """What the server's counts showed for this endpoint, model and part of a request (FIXED:
    the system prompt and tools; HISTORY: the conversation), else a guess: cautious (more
    tokens) or optimistic (fewer)."""
    return _measured.get((*_key(settings), part)) or (CAUTIOUS if cautious else OPTIMISTIC)


async def context_size(settings: Settings, session_limit: int | None = None) -> int:
    """The window requests must fit in. The `context_window` setting wins, unless the server
    has rejected a request for its length naming a smaller size (for this session,
    `session_limit`, or this endpoint and model); then what the server said up front (`learn`),
    a table of well-known models, 128000."""
    key = _key(settings)
    overflow = min(filter(None, (session_limit, _overflowed.get(key))), default=None)
    if settings.context_window:
        return min(settings.context_window, overflow or settings.context_window)
    if overflow:
        return overflow
    if key not in _told and key not in _asking:  # not asked in the background: ask now
        _asking[key] = anyio.Event()
        with anyio.move_on_after(WAIT):
            await _learn(settings, key)
    if (asking := _asking.get(key)) is not None:
        with anyio.move_on_after(WAIT):
            await asking.wait()
    return _told.get(key) or known_window(settings.model)


def learn(settings: Settings, start_soon: Any) -> None:
    """Ask the server for its context size once per endpoint and model, in the background
    (`start_soon`: when a session opens)."""
    key = _key(settings)
    if key in _told or key in _asking or settings.context_window or not settings.llm_configured:
        return
    _asking[key] = anyio.Event()
    start_soon(_learn, settings, key)


async def _learn(settings: Settings, key: tuple[str | None, str]) -> None:
    try:
        with anyio.move_on_after(10):
            _told[key] = await _server_window(settings)
    finally:
        _told.setdefault(key, None)
        _asking.pop(key).set()


def known_window(model: str) -> int:
    name = model.lower().rsplit("/", 1)[-1]
    matches = [prefix for prefix in KNOWN_WINDOWS if name.startswith(prefix)]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else DEFAULT_WINDOW


async def _server_window(settings: Settings) -> int | None:
    """llama-server's `/props`, else `/v1/models` metadata, else Ollama's `/api/show`."""
    for ask in (serverinfo.props_window, serverinfo.models_window, serverinfo.ollama_window):
        try:
            if size := await ask(settings):
                return size
        except Exception as exc:  # metadata is a nicety: any failure falls back to the next
            log.info("no context window from %s (%s): %s", settings.base_url, ask.__name__, exc)
    return None


def tokens_used(
    usage: dict[str, Any] | None,
    messages: list[dict[str, Any]],
    reply: str,
    tools: list[dict[str, Any]] | None = None,
    per_token: float = CAUTIOUS,
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
    return int((size_of(messages) + len(reply) + tools_size) / per_token)


def size_of(messages: list[dict[str, Any]]) -> int:
    """Characters of `messages` (or tool schemas) as JSON: what estimates are made from."""
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)


def estimate_tokens(messages: list[dict[str, Any]], per_token: float = CAUTIOUS) -> int:
    return int(size_of(messages) / per_token)
