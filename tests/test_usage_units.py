"""Context window sizes and token counts for usage_update (agent.context.usage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.context.usage import DEFAULT_WINDOW, known_window, tokens_used, window_of

REAL = Path(__file__).parent / "data" / "real-servers"


def test_llama_server_models_metadata_gives_the_running_context():
    listing = json.loads((REAL / "llama-server-0c1e570" / "models.json").read_text())
    assert window_of(listing["data"][0]) == 8192  # n_ctx, not n_ctx_train


@pytest.mark.parametrize(
    ("entry", "window"),
    [
        ({"id": "m", "max_model_len": 32768}, 32768),  # vLLM
        ({"id": "m", "context_length": 200000}, 200000),  # OpenRouter
        ({"id": "m", "top_provider": {"context_length": 65536}}, 65536),
        ({"id": "m"}, None),  # llama-cpp-python and OpenAI say nothing
        ({"id": "m", "max_model_len": "big"}, None),
    ],
)
def test_window_of_a_models_entry(entry, window):
    assert window_of(entry) == window


def test_known_models_and_the_default():
    assert known_window("gpt-4o-mini") == 128_000
    assert known_window("openai/gpt-4.1") == 1_047_576
    assert known_window("qwen2.5-coder:14b") == 32_768
    assert known_window("something-new") == DEFAULT_WINDOW


def test_tokens_used_prefers_the_server_count_and_estimates_otherwise():
    messages = [{"role": "user", "content": "x" * 4000}]
    assert tokens_used({"total_tokens": 77}, messages, "") == 77
    assert tokens_used({"prompt_tokens": 70, "completion_tokens": 7}, messages, "") == 77
    estimate = tokens_used(None, messages, "y" * 400)
    assert 1400 < estimate < 1600  # a cautious 3 characters a token until the server counts
    assert 1000 < tokens_used(None, messages, "y" * 400, per_token=4.0) < 1200
