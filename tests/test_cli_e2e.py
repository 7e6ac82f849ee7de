"""The command line as a newcomer meets it (issue 25): `heron --help` lists the commands, a
mistyped command gets the nearest one, and a server given without a model (OPENAI_BASE_URL
alone) is never sent OpenAI's default model name."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from acp_client import RpcError
from conftest import _heron_executable
from fake_openai import text

UNNAMED = {"HERON_MODEL": None, "OPENAI_API_KEY": None}  # OPENAI_BASE_URL: the fake server


def heron_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_heron_executable(), *args],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def test_help_lists_the_commands():
    for helped in (heron_cli("--help"), heron_cli("help")):
        assert helped.returncode == 0, helped.stderr
        commands = helped.stdout.split("commands", 1)[1].split("options:", 1)[0]
        for name in ("exec", "sessions", "setup", "sandbox"):
            assert f"\n  {name} " in commands


@pytest.mark.parametrize(
    ("typed", "nearest"),
    [(["sesions"], "sessions"), (["exce", "fix it"], "exec"), (["--mode", "ask", "stup"], "setup")],
)
def test_a_mistyped_command_names_the_nearest(typed, nearest):
    done = heron_cli(*typed)
    assert done.returncode == 2 and done.stdout == ""
    word = next(a for a in typed if not a.startswith("-") and a != "ask")
    assert f"unknown command '{word}'; did you mean `heron {nearest}`?" in done.stderr


def test_an_unknown_flag_is_still_named_as_a_flag():
    done = heron_cli("--nope")
    assert done.returncode == 2 and "unrecognized arguments: --nope" in done.stderr


# ------------------------------------------------------------ a server given without a model


def model_option(options: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in options if o["id"] == "model")


def test_the_server_s_only_model_is_taken_and_said_once(heron, fake_llm, workspace):
    fake_llm.models = ["qwen2.5-coder:7b", "nomic-embed-text"]  # one chat model
    fake_llm.script(text("Hello."), text("Again."))
    client = heron(env=UNNAMED)
    session_id = client.new_session(workspace)
    first = client.prompt(session_id, "hi")
    assert first["stopReason"] == "end_turn"
    said = "".join(
        u["content"]["text"]
        for u in first["updates"]
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert said.startswith("Using `qwen2.5-coder:7b`, the only model the server lists")
    client.prompt(session_id, "again")
    assert [r.model for r in fake_llm.requests] == ["qwen2.5-coder:7b"] * 2
    assert "gpt-4.1" not in str([r.body for r in fake_llm.requests])
    later = [u for u in client.updates(session_id) if u["sessionUpdate"] == "config_option_update"]
    assert later and model_option(later[-1]["configOptions"])["currentValue"] == "qwen2.5-coder:7b"


@pytest.mark.parametrize("listed", [["llama3.1:8b", "qwen2.5-coder:7b"], []], ids=["two", "none"])
def test_without_a_model_to_take_the_prompt_says_one_must_be_named(
    heron, fake_llm, workspace, listed
):
    fake_llm.models = listed
    client = heron(env=UNNAMED)
    answer = client.request("session/new", {"cwd": workspace, "mcpServers": []})
    # The picker does not pretend a model is chosen.
    picker = model_option(answer["configOptions"])
    names = {o["value"]: o["name"] for o in picker["options"]}
    assert names[picker["currentValue"]] == "No model named: pick one"
    with pytest.raises(RpcError) as failed:
        client.prompt(answer["sessionId"], "hi")
    assert "No model is named for the server at" in failed.value.message
    assert "HERON_MODEL" in failed.value.message
    for model in listed:
        assert model in failed.value.message
    assert fake_llm.requests == []  # nothing was sent, least of all to "gpt-4.1"
    if listed:  # picking one names it
        client.request(
            "session/set_config_option",
            {"sessionId": answer["sessionId"], "configId": "model", "value": listed[1]},
        )
        fake_llm.script(text("Hello."))
        assert client.prompt(answer["sessionId"], "hi")["stopReason"] == "end_turn"
        assert [r.model for r in fake_llm.requests] == [listed[1]]
