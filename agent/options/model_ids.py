"""Which of an endpoint's models can chat: one filter for the model picker and `heron setup`.

Endpoints list embedding, rerank, moderation, speech and image models beside the chat models
(`GET /models` does not say which is which); their names give them away.
"""

from __future__ import annotations

from typing import Any

MAX_MODELS = 500  # OpenRouter lists hundreds; a picker (and each update) stays bounded
_NOT_CHAT = (
    "embed",
    "tts",
    "whisper",
    "dall-e",
    "moderation",
    "rerank",
    "transcribe",
    "davinci",
    "babbage",
)


def chat_models(body: Any) -> list[str]:
    """Model ids from an OpenAI-style list (`data[].id`), chat models only, in the server's
    order, without repeats, at most MAX_MODELS."""
    data = body.get("data") if isinstance(body, dict) else None
    ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    chat = [i for i in ids if isinstance(i, str) and i and not can_not_chat(i)]
    return list(dict.fromkeys(chat))[:MAX_MODELS]


def can_not_chat(model: str) -> bool:
    name = model.lower()
    return any(word in name for word in _NOT_CHAT)
