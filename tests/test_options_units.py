"""agent.options without a process: provider tables, a session's picks over the shared settings,
model lists from servers, and the model picker's values."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agent.config import ConfigError, Provider, Settings, parse_providers
from agent.options import catalog, discovery, model_ids
from agent.options.discovery import Endpoint
from agent.options.state import Choices


def test_providers_are_read_with_their_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("ROUTER_KEY", "sk-router")
    providers = parse_providers(
        {
            "router": {"base_url": "https://openrouter.ai/api/v1/", "api_key_env": "ROUTER_KEY"},
            "local": {"base_url": "http://localhost:11434/v1", "models": ["a", "b", "a"]},
            "unset": {"base_url": "http://localhost:1/v1", "api_key_env": "HERON_NOT_SET_X"},
        }
    )
    assert providers["router"] == Provider("router", "https://openrouter.ai/api/v1", "sk-router")
    assert providers["local"].models == ("a", "b")
    assert providers["unset"].api_key is None  # a local server needs no key


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"p": {"models": ["a"]}}, "needs base_url"),
        ({"p": {"base_url": "localhost:11434"}}, "full URL"),
        ({"p": {"base_url": "http://x/v1", "models": "a"}}, "list of model names"),
        ({"p": {"base_url": "http://x/v1", "key": "a"}}, "unknown key(s) key"),
        ({"p": {"base_url": "http://x/v1", "api_key": 3}}, "api_key must be a string"),
        ({"a/b": {"base_url": "http://x/v1"}}, "without '/'"),
        ({"p": "http://x/v1"}, "must be a table"),
        (["p"], "providers must be a table"),
    ],
)
def test_a_wrong_provider_table_says_what_is_wrong(table: Any, needle: str):
    with pytest.raises(ConfigError) as err:
        parse_providers(table)
    assert needle in str(err.value)


def shared() -> Settings:
    settings = Settings(api_key="sk-main", base_url="http://main/v1", model="main-model")
    settings.providers = {"other": Provider("other", "http://other/v1", None, ("o1", "o2"))}
    settings.reasoning_effort = "medium"
    return settings


def test_no_pick_is_the_shared_settings_themselves():
    settings = shared()
    assert Choices().effective(settings) is settings


def test_picks_lay_over_the_shared_settings_without_touching_them():
    settings = shared()
    choices = Choices(provider="other", model="o2", thought_level="default")
    effective = choices.effective(settings)
    assert (effective.base_url, effective.api_key, effective.model) == (
        "http://other/v1",
        None,
        "o2",
    )
    assert effective.reasoning_effort is None  # "default" sends nothing, whatever the config
    assert (settings.base_url, settings.model, settings.reasoning_effort) == (
        "http://main/v1",
        "main-model",
        "medium",
    )
    # A reload that changes the shared settings reaches the session (timeouts, limits...).
    settings.max_tokens = 99
    assert choices.effective(settings).max_tokens == 99


def test_a_provider_removed_from_the_config_falls_back_to_the_configured_endpoint():
    settings = shared()
    settings.providers = {}
    effective = Choices(provider="other", model="o2").effective(settings)
    assert (effective.base_url, effective.model) == ("http://main/v1", "main-model")


def test_saved_picks_come_back_and_malformed_ones_are_ignored():
    choices = Choices(provider="other", model="o1", thought_level="high")
    again = Choices()
    again.restore(choices.saved())
    assert again == choices
    for junk in (None, [], "x", {"model": 3, "thought": "drop table"}):
        fresh = Choices()
        fresh.restore(junk)
        assert fresh == Choices()


def test_model_lists_keep_chat_models_only():
    body = {
        "data": [
            {"id": "gpt-4.1"},
            {"id": "text-embedding-3-small"},
            {"id": "whisper-1"},
            {"id": "gpt-4.1"},
            {"id": 7},
            "junk",
            {"id": "o3"},
        ]
    }
    assert model_ids.chat_models(body) == ["gpt-4.1", "o3"]
    assert model_ids.chat_models({"object": "list"}) == []
    assert model_ids.chat_models(["not", "a", "dict"]) == []


def test_endpoints_never_show_their_key():
    assert "sk-secret" not in repr(Endpoint("http://x/v1", "sk-secret"))


def picker(settings: Settings, choices: Choices | None = None) -> Any:
    choices = choices or Choices()
    return SimpleNamespace(
        shared_settings=settings, choices=choices, settings=choices.effective(settings), mode="ask"
    )


def test_model_values_are_unique_across_groups(monkeypatch):
    settings = shared()
    # The configured endpoint itself lists a model named like a provider's value.
    lists = {Endpoint("http://main/v1", "sk-main"): ["other/o1", "zed"]}
    monkeypatch.setattr(discovery, "cached", lambda endpoint: lists.get(endpoint))
    session = picker(settings, Choices(provider="other", model="o1"))
    groups, current = catalog.model_values(session)
    assert [(gid, list(values)) for gid, _, values in groups] == [
        ("default", ["main-model", "other/o1", "zed"]),
        ("provider:other", ["other/o1#2", "other/o2"]),
    ]
    assert current == "other/o1#2"
    option = catalog.model_option(session)
    assert [g["name"] for g in option["options"]] == ["main", "other"]


def test_a_single_endpoint_is_a_flat_list(monkeypatch):
    settings = Settings(api_key="k", model="gpt-4.1")
    monkeypatch.setattr(discovery, "cached", lambda endpoint: ["o3", "gpt-4o", "gpt-4.1"])
    option = catalog.model_option(picker(settings))
    assert [v["value"] for v in option["options"]] == ["gpt-4.1", "gpt-4o", "o3"]
    assert option["currentValue"] == "gpt-4.1"
