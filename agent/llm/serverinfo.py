"""What a model server says about itself, asked briefly and never on the path of an answer.

- llama.cpp `llama-server`: `GET /props` (the server root, not `/v1`):
  `default_generation_settings.n_ctx` (the context it runs with) and
  `chat_template_caps.supports_tools` (whether its chat template can take tools);
- any server: `GET /v1/models`, whose entries may carry the window (`usage.window_of`);
- Ollama: `POST /api/show {"model": …}`, whose `parameters` name `num_ctx` when the model
  was set up with one (its `model_info` context_length is what the model was trained for,
  not what Ollama runs it with, so it is not used).

Each endpoint's `/props` is asked once per process; every failure means "the server does not
say" (None).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import anyio

from agent.config import Settings
from agent.llm.client import get_client

log = logging.getLogger("heron.llm")

TIMEOUT = 2.0  # seconds one question may take
_props: dict[str, dict[str, Any] | None] = {}  # endpoint → its /props; absent: not asked
_asking: dict[str, anyio.Event] = {}
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def root(settings: Settings) -> str:
    """The server's root URL (llama-server and Ollama serve their own API beside `/v1`)."""
    return (settings.base_url or "").rstrip("/").removesuffix("/v1")


def known_props(settings: Settings) -> dict[str, Any] | None:
    return _props.get(settings.base_url or "")


def props_asked(settings: Settings) -> bool:
    endpoint = settings.base_url or ""
    return endpoint in _props or endpoint in _asking


async def props(settings: Settings) -> dict[str, Any] | None:
    """llama-server's `/props`, asked once per endpoint (concurrent callers share the answer);
    None for servers without it, and for OpenAI's own endpoint (never asked)."""
    endpoint = settings.base_url or ""
    if not endpoint:
        return None
    if endpoint in _props:
        return _props[endpoint]
    if (asking := _asking.get(endpoint)) is not None:
        await asking.wait()
        return _props.get(endpoint)
    _asking[endpoint] = anyio.Event()
    answer: dict[str, Any] | None = None
    try:
        body = await _get(settings, f"{root(settings)}/props")
        answer = body if isinstance(body, dict) else None
    except Exception as exc:  # 404, not JSON, unreachable: the server does not say
        log.debug("no /props at %s: %s", root(settings), exc)
    finally:
        _props[endpoint] = answer
        _asking.pop(endpoint).set()
    return answer


def supports_tools(body: dict[str, Any] | None) -> bool | None:
    caps = (body or {}).get("chat_template_caps")
    value = caps.get("supports_tools") if isinstance(caps, dict) else None
    return value if isinstance(value, bool) else None


async def props_window(settings: Settings) -> int | None:
    body = await props(settings) or {}
    generation = body.get("default_generation_settings")
    n_ctx = generation.get("n_ctx") if isinstance(generation, dict) else None
    for value in (n_ctx, body.get("n_ctx")):
        if _positive(value):
            return value
    return None


async def models_window(settings: Settings) -> int | None:
    """The window in the `/v1/models` entry of the model; a server that lists one model only
    (llama-server, llama-cpp-python: any name is accepted) is asked about that one."""
    body = await _get(settings, "/models")
    data = body.get("data") if isinstance(body, dict) else None
    entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    chosen = [m for m in entries if m.get("id") == settings.model]
    if not chosen and len(entries) == 1:
        chosen = entries
    return window_of(chosen[0]) if chosen else None


async def ollama_window(settings: Settings) -> int | None:
    if not settings.base_url:
        return None
    client = await get_client(settings)
    httpx = _httpx()
    response = await client.post(
        f"{root(settings)}/api/show",
        cast_to=httpx.Response,
        body={"model": settings.model},
        options={"max_retries": 0, "timeout": TIMEOUT},
    )
    body = response.json()
    parameters = body.get("parameters") if isinstance(body, dict) else None
    match = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    return int(match.group(1)) if match and int(match.group(1)) > 0 else None


def window_of(model: dict[str, Any]) -> int | None:
    """The context window in one `/v1/models` entry, where the server gives one."""
    meta = model["meta"] if isinstance(model.get("meta"), dict) else {}
    top = model["top_provider"] if isinstance(model.get("top_provider"), dict) else {}
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


async def _get(settings: Settings, path: str) -> Any:
    client = await get_client(settings)
    httpx = _httpx()
    with anyio.fail_after(TIMEOUT + 1):
        response = await client.get(
            path, cast_to=httpx.Response, options={"max_retries": 0, "timeout": TIMEOUT}
        )
    return response.json()


def _httpx() -> Any:
    """openai's transport (pyproject: openai>=3.57, httpx2), imported with the client, not
    before: nothing here is on the session/new path."""
    import httpx2

    return httpx2


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
