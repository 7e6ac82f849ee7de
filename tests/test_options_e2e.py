"""The editor's pickers: mode, model (with providers) and thought level as ACP config options,
the legacy modes, and what each pick changes in the requests that reach the model server.

Every test drives the real `heron` over its pipes against the fake OpenAI server; every message
is validated against the ACP schema by the harness (the option lists and their updates too).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import Call, FakeOpenAI, text, tool_calls

MODES = ["read-only", "ask", "auto", "accept-edits", "full-access"]
LEVELS = ["default", "low", "medium", "high"]


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def two_models(fake_llm: FakeOpenAI) -> None:
    """The fake endpoint lists the configured model and one more."""
    fake_llm.models = ["fake-model", "fake-model-mini"]


def new(client: Any, workspace: str) -> tuple[str, dict[str, Any]]:
    """A new session: its id and the whole session/new answer."""
    result = client.request("session/new", {"cwd": workspace, "mcpServers": []})
    return result["sessionId"], result


def option(options: list[dict[str, Any]], option_id: str) -> dict[str, Any]:
    return next(o for o in options if o["id"] == option_id)


def current(options: list[dict[str, Any]]) -> dict[str, str]:
    return {o["id"]: o["currentValue"] for o in options}


def values(opt: dict[str, Any]) -> list[str]:
    """Every value of a select, grouped or not."""
    flat = [v for item in opt["options"] for v in (item["options"] if "group" in item else [item])]
    return [v["value"] for v in flat]


def groups(opt: dict[str, Any]) -> dict[str, list[str]]:
    return {g["name"]: [v["value"] for v in g["options"]] for g in opt["options"]}


def set_option(client: Any, session_id: str, config_id: str, value: Any) -> list[dict[str, Any]]:
    params = {"sessionId": session_id, "configId": config_id, "value": value}
    return client.request("session/set_config_option", params)["configOptions"]


def config_updates(client: Any, session_id: str) -> list[list[dict[str, Any]]]:
    return [
        u["configOptions"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "config_option_update"
    ]


def mode_updates(client: Any, session_id: str) -> list[str]:
    return [
        u["currentModeId"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "current_mode_update"
    ]


def wait_until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def models_asked(fake: FakeOpenAI) -> int:
    return sum(r.path == "/v1/models" for r in fake.other_requests)


def chunks(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def write_config(home: Path, text_: str) -> None:
    path = home / ".config" / "heron" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_)


def stop(client: Any) -> None:
    client.close_stdin()
    assert client.wait_exit(10) == 0


# -- the lists -------------------------------------------------------------------------------


def test_session_new_answers_the_three_pickers_and_the_legacy_modes(heron, workspace):
    client = heron()
    _, result = new(client, workspace)
    options = result["configOptions"]
    assert [o["id"] for o in options] == ["mode", "model", "thought_level"]
    assert [o["category"] for o in options] == ["mode", "model", "thought_level"]
    assert current(options) == {"mode": "ask", "model": "fake-model", "thought_level": "default"}
    assert values(option(options, "mode")) == MODES
    assert all(v.get("description") for v in option(options, "mode")["options"])
    assert values(option(options, "thought_level")) == LEVELS
    assert "fake-model" in values(option(options, "model"))
    assert result["modes"]["currentModeId"] == "ask"
    assert [m["id"] for m in result["modes"]["availableModes"]] == MODES


def test_the_configured_mode_and_reasoning_effort_are_the_current_values(heron, workspace):
    client = heron("--mode", "accept-edits", env={"HERON_MODEL": "fake-model-mini"})
    _, result = new(client, workspace)
    assert current(result["configOptions"])["mode"] == "accept-edits"
    assert result["modes"]["currentModeId"] == "accept-edits"
    assert current(result["configOptions"])["model"] == "fake-model-mini"


def test_discovered_models_arrive_as_an_update_after_the_answer(heron, fake_llm, workspace):
    fake_llm.models = ["fake-model", "zeta-model", "text-embedding-3-small", "alpha-model"]
    fake_llm.models_delay = 1.0  # the answer cannot have waited for the list
    client = heron()
    pending = client.request_async("session/new", {"cwd": workspace, "mcpServers": []})
    result = pending.result()
    session_id = result["sessionId"]
    assert values(option(result["configOptions"], "model")) == ["fake-model"]
    before_answer = client.notifications[: pending._last_note]
    assert not any(n["params"].get("sessionId") == session_id for n in before_answer)
    wait_until(lambda: config_updates(client, session_id))
    listed = values(option(config_updates(client, session_id)[-1], "model"))
    # The configured model first, then the endpoint's chat models sorted (no embeddings).
    assert listed == ["fake-model", "alpha-model", "zeta-model"]
    # Cached per endpoint: a second session shows the list at once and asks no more.
    asked = models_asked(fake_llm)
    second, result = new(client, workspace)
    assert values(option(result["configOptions"], "model")) == listed
    client.round_trip()
    assert models_asked(fake_llm) == asked
    assert config_updates(client, second) == []


def test_an_endpoint_without_a_model_list_still_shows_the_configured_model(
    heron, fake_llm, workspace
):
    fake_llm.models_status = 404
    client = heron()
    session_id, result = new(client, workspace)
    wait_until(lambda: "no model list from" in client.stderr)
    client.round_trip()
    assert values(option(result["configOptions"], "model")) == ["fake-model"]
    assert config_updates(client, session_id) == []  # nothing changed: nothing to tell
    fake_llm.script(text("fine"))
    assert client.prompt(session_id, "hi")["stopReason"] == "end_turn"
    assert fake_llm.requests[-1].model == "fake-model"


# -- picking ----------------------------------------------------------------------------------


def test_each_pick_reaches_the_model_server_and_survives_a_restart(heron, fake_llm, workspace):
    client = heron()
    session_id, _ = new(client, workspace)
    options = set_option(client, session_id, "model", "fake-model-mini")
    assert current(options)["model"] == "fake-model-mini"
    options = set_option(client, session_id, "thought_level", "high")
    assert current(options) == {
        "mode": "ask",
        "model": "fake-model-mini",
        "thought_level": "high",
    }
    fake_llm.script(text("one"), text("two"))
    client.prompt(session_id, "first")
    assert (fake_llm.requests[-1].model, fake_llm.requests[-1].reasoning_effort) == (
        "fake-model-mini",
        "high",
    )
    set_option(client, session_id, "thought_level", "default")
    client.prompt(session_id, "second")
    assert "reasoning_effort" not in fake_llm.requests[-1].body
    set_option(client, session_id, "thought_level", "low")
    set_option(client, session_id, "mode", "full-access")
    stop(client)

    # Another process, the same store: load and resume both answer the saved picks.
    for method in ("session/load", "session/resume"):
        again = heron()
        params = {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
        result = again.request(method, params)
        assert current(result["configOptions"]) == {
            "mode": "full-access",
            "model": "fake-model-mini",
            "thought_level": "low",
        }
        assert result["modes"]["currentModeId"] == "full-access"
        fake_llm.script(text("three"))
        again.prompt(session_id, "third")
        assert (fake_llm.requests[-1].model, fake_llm.requests[-1].reasoning_effort) == (
            "fake-model-mini",
            "low",
        )
        stop(again)


def test_a_pick_made_before_the_first_prompt_is_saved_with_it(heron, fake_llm, workspace):
    client = heron()
    session_id, _ = new(client, workspace)
    set_option(client, session_id, "thought_level", "medium")
    fake_llm.script(text("ok"))
    client.prompt(session_id, "hi")
    stop(client)
    again = heron()
    params = {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    result = again.request("session/resume", params)
    assert current(result["configOptions"])["thought_level"] == "medium"


def test_a_model_picked_mid_turn_answers_the_next_request_of_that_turn(heron, fake_llm, workspace):
    client = heron("--mode", "full-access")
    session_id, _ = new(client, workspace)

    def switch_then_call(body: dict[str, Any]) -> Any:
        # The first request of the turn is in flight: the editor picks another model.
        set_option(client, session_id, "model", "fake-model-mini")
        return tool_calls(Call("list_directory", {"path": "."}, id="ls"))

    fake_llm.script(switch_then_call, text("done"))
    assert client.prompt(session_id, "look")["stopReason"] == "end_turn"
    assert [r.model for r in fake_llm.requests] == ["fake-model", "fake-model-mini"]


def test_set_right_after_session_new_waits_for_the_model_list(heron, fake_llm, workspace):
    """Zed applies the user's default picks as soon as it has the session id."""
    fake_llm.models = ["fake-model", "late-model"]
    fake_llm.models_delay = 1.0
    client = heron()
    session_id, result = new(client, workspace)
    assert "late-model" not in values(option(result["configOptions"], "model"))
    mode = client.request_async("session/set_mode", {"sessionId": session_id, "modeId": "ask"})
    params = {"sessionId": session_id, "configId": "model", "value": "late-model"}
    picked = client.request_async("session/set_config_option", params)
    assert mode.result() == {}
    options = picked.result()["configOptions"]
    assert current(options)["model"] == "late-model"
    assert "late-model" in values(option(options, "model"))
    fake_llm.script(text("ok"))
    client.prompt(session_id, "hi")
    assert fake_llm.requests[-1].model == "late-model"


def test_a_model_may_be_named_by_its_name_in_another_case(heron, fake_llm, workspace):
    client = heron()
    session_id, _ = new(client, workspace)
    options = set_option(client, session_id, "model", "FAKE-MODEL-MINI")
    assert current(options)["model"] == "fake-model-mini"


# -- the thought level a server refuses -----------------------------------------------------


@pytest.mark.parametrize("style", ["openai", "pydantic"])
def test_a_refused_reasoning_effort_is_retried_without_remembered_and_told(
    heron, fake_llm, workspace, style
):
    fake_llm.reject_fields = {"reasoning_effort": style}
    client = heron()
    session_id, _ = new(client, workspace)
    set_option(client, session_id, "thought_level", "high")
    fake_llm.script(text("first answer"), text("second answer"))
    turn = client.prompt(session_id, "hi")
    assert turn["stopReason"] == "end_turn"
    sent = fake_llm.requests
    assert [r.reasoning_effort for r in sent] == ["high", None]
    assert "reasoning_effort" not in sent[1].body
    told = chunks(turn["updates"])
    assert "first answer" in told and "does not accept a reasoning effort" in told
    # Remembered for the endpoint: no second refusal, and the user is not told again.
    turn = client.prompt(session_id, "again")
    assert len(fake_llm.requests) == 3
    assert "reasoning_effort" not in fake_llm.requests[2].body
    assert chunks(turn["updates"]) == "second answer"
    # The pick itself stays (the client still shows it).
    assert current(set_option(client, session_id, "mode", "ask"))["thought_level"] == "high"


# -- providers ---------------------------------------------------------------------------------


def test_providers_are_grouped_and_a_pick_switches_the_endpoint(
    heron, fake_llm, workspace, heron_home
):
    with FakeOpenAI() as other:
        other.models = ["big-model", "small-model"]
        write_config(
            heron_home,
            f"""
[providers.other]
base_url = "{other.base_url}"
api_key_env = "OTHER_KEY"

[providers.listed]
base_url = "{other.base_url}"
models = ["listed-a", "listed-b"]
""",
        )
        client = heron(env={"OTHER_KEY": "sk-other"})
        session_id, result = new(client, workspace)
        assert groups(option(result["configOptions"], "model"))["listed"] == [
            "listed/listed-a",
            "listed/listed-b",
        ]

        def grouped() -> dict[str, list[str]]:
            updates = config_updates(client, session_id)
            return groups(option(updates[-1], "model")) if updates else {}

        # Both endpoints' lists arrive, each in its own time, then the picker shows all three.
        expected = {
            "127.0.0.1:" + fake_llm.base_url.split(":")[2].split("/")[0]: [
                "fake-model",
                "fake-model-mini",
            ],
            "other": ["other/big-model", "other/small-model"],
            "listed": ["listed/listed-a", "listed/listed-b"],
        }
        wait_until(lambda: grouped() == expected)
        # A provider model: the next request goes to its endpoint, with its key.
        options = set_option(client, session_id, "model", "other/big-model")
        assert current(options)["model"] == "other/big-model"
        other.script(text("from the other one"))
        turn = client.prompt(session_id, "hi")
        assert chunks(turn["updates"]) == "from the other one"
        assert [r.model for r in other.requests] == ["big-model"]
        assert other.requests[0].headers["authorization"] == "Bearer sk-other"
        assert fake_llm.requests == []
        # A model name alone finds its provider; and back to the configured endpoint.
        assert current(set_option(client, session_id, "model", "listed-b"))["model"] == (
            "listed/listed-b"
        )
        assert current(set_option(client, session_id, "model", "fake-model"))["model"] == (
            "fake-model"
        )
        fake_llm.script(text("home again"))
        client.prompt(session_id, "and now?")
        assert [r.model for r in fake_llm.requests] == ["fake-model"]
        assert fake_llm.requests[0].headers["authorization"] == "Bearer sk-test"


def test_a_broken_provider_table_is_explained_at_the_first_prompt(heron, workspace, heron_home):
    write_config(heron_home, '[providers.local]\nbase_url = "localhost:11434"\n')
    client = heron()
    session_id, _ = new(client, workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "hi")
    assert "base_url must be a full URL" in err.value.message


# -- legacy modes in sync ---------------------------------------------------------------------


def test_set_mode_and_the_mode_option_stay_in_sync(heron, fake_llm, workspace):
    client = heron()
    session_id, _ = new(client, workspace)
    # The endpoint's list first, so that every later update comes from a pick.
    wait_until(lambda: config_updates(client, session_id))
    assert (
        client.request("session/set_mode", {"sessionId": session_id, "modeId": "full-access"}) == {}
    )
    wait_until(lambda: len(config_updates(client, session_id)) == 2)
    assert mode_updates(client, session_id) == ["full-access"]
    assert current(config_updates(client, session_id)[-1])["mode"] == "full-access"
    # The mode is in force: a write runs without asking.
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "new.txt", "content": "x\n"}, id="w")),
        text("written"),
    )
    client.prompt(session_id, "write it")
    assert not [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert Path(workspace, "new.txt").read_text() == "x\n"

    # The other way: the config option moves the legacy mode too.
    options = set_option(client, session_id, "mode", "read-only")
    assert current(options)["mode"] == "read-only"
    wait_until(lambda: mode_updates(client, session_id) == ["full-access", "read-only"])
    # The answer carried the list: no config_option_update repeats it.
    client.round_trip()
    assert len(config_updates(client, session_id)) == 2


# -- what is refused ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "needle"),
    [
        ("session/set_config_option", {"configId": "colour", "value": "red"}, "unknown config"),
        ("session/set_config_option", {"configId": "mode", "value": "yolo"}, "unknown value"),
        ("session/set_config_option", {"configId": "model", "value": "no-such"}, "unknown value"),
        ("session/set_config_option", {"configId": "thought_level", "value": "max"}, "unknown"),
        ("session/set_config_option", {"configId": "mode", "type": "boolean", "value": True}, ""),
        ("session/set_config_option", {"configId": "mode", "value": 3}, "value id"),
        ("session/set_config_option", {"configId": "mode"}, ""),
        ("session/set_config_option", {"configId": "model", "value": "x" * 100_000}, "unknown"),
        ("session/set_config_option", {"configId": "é" * 100_000, "value": "a"}, "unknown"),
        ("session/set_mode", {"modeId": "yolo"}, "unknown value"),
        ("session/set_mode", {}, "modeId"),
    ],
)
def test_unknown_options_and_values_are_invalid_params_and_change_nothing(
    heron, fake_llm, workspace, method, params, needle
):
    client = heron()
    session_id, result = new(client, workspace)
    with pytest.raises(RpcError) as err:
        client.request(method, {"sessionId": session_id, **params})
    assert err.value.code == -32602
    assert needle in err.value.message
    assert len(err.value.message) < 2000  # whatever was sent, the answer stays small
    # Nothing changed, and nothing was announced.
    client.round_trip()
    assert mode_updates(client, session_id) == []
    after = set_option(client, session_id, "thought_level", "default")
    assert current(after) == current(result["configOptions"])


def test_an_unknown_session_is_invalid_params(heron, workspace):
    client = heron()
    for method, extra in (
        ("session/set_config_option", {"configId": "mode", "value": "ask"}),
        ("session/set_mode", {"modeId": "ask"}),
    ):
        with pytest.raises(RpcError) as err:
            client.request(method, {"sessionId": "sess_nope", **extra})
        assert err.value.code == -32602


def test_many_picks_at_once_leave_the_last_one(heron, fake_llm, workspace):
    """An editor (or a user clicking fast) sends several picks without waiting."""
    client = heron()
    session_id, _ = new(client, workspace)
    sent = [
        client.request_async(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "thought_level", "value": level},
        )
        for level in ["low", "medium", "high", "low", "high"]
    ]
    for pending in sent:
        pending.result()
    fake_llm.script(text("ok"))
    client.prompt(session_id, "hi")
    assert fake_llm.requests[-1].reasoning_effort == "high"


def test_a_closed_session_gets_no_late_model_list(heron, fake_llm, workspace):
    fake_llm.models = ["fake-model", "later"]
    fake_llm.models_delay = 0.5
    client = heron()
    session_id, _ = new(client, workspace)
    client.request("session/close", {"sessionId": session_id})
    wait_until(lambda: "2 models at" in client.stderr)  # the list has arrived
    client.round_trip()
    assert config_updates(client, session_id) == []
