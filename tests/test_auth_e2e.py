"""Setting up a model from the editor (terminal auth) and a broken configuration, over ACP."""

from __future__ import annotations

import json
import subprocess

import pytest
from acp_client import DEFAULT_CAPABILITIES, RpcError
from conftest import _heron_executable
from fake_openai import text

TERMINAL_AUTH = {**DEFAULT_CAPABILITIES, "auth": {"terminal": True}}
NO_MODEL = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "HERON_MODEL": None}
SETUP_METHOD = {
    "type": "terminal",
    "id": "heron-setup",
    "name": "Set up a model",
    "args": ["setup"],
}


def offered(result):
    return [{k: m[k] for k in SETUP_METHOD if k in m} for m in result["authMethods"]]


@pytest.mark.parametrize("fast_path", [True, False])
def test_initialize_offers_setup_only_to_clients_that_can_run_it(heron, fast_path):
    client = heron(initialize=False)
    if not fast_path:
        # Something before initialize: the full server answers it, not the fast path.
        client.notify("_heron/nothing", {})
    assert offered(client.initialize(TERMINAL_AUTH)) == [SETUP_METHOD]
    other = heron(initialize=False)
    assert other.initialize(DEFAULT_CAPABILITIES)["authMethods"] == []


def test_session_new_without_a_model_asks_for_login(heron, workspace):
    client = heron(env=NO_MODEL, client_capabilities=TERMINAL_AUTH)
    with pytest.raises(RpcError) as failure:
        client.new_session(workspace)
    assert failure.value.code == -32000
    assert "Set up a model" in failure.value.message


def test_without_terminal_auth_the_session_starts_and_the_prompt_explains(heron, workspace):
    client = heron(env=NO_MODEL)
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as failure:
        client.prompt(session_id, "hi")
    assert "no model configured" in failure.value.message


def test_after_setup_authenticate_takes_the_new_config_without_restart(
    heron, fake_llm, workspace, heron_home
):
    fake_llm.script(text("Hello from the fake."))
    client = heron(env=NO_MODEL, client_capabilities=TERMINAL_AUTH)
    with pytest.raises(RpcError):
        client.new_session(workspace)
    with pytest.raises(RpcError) as failure:
        client.request("authenticate", {"methodId": "heron-setup"})
    assert failure.value.code == -32000  # nothing set up yet
    # What `heron setup` writes, in the default place (XDG_CONFIG_HOME).
    config = heron_home / ".config" / "heron" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'base_url = "{fake_llm.base_url}"\nmodel = "fake-model"\n')
    assert client.request("authenticate", {"methodId": "heron-setup"}) == {}
    turn = client.prompt(client.new_session(workspace), "hi")
    assert turn["stopReason"] == "end_turn"
    assert fake_llm.requests[0].body["model"] == "fake-model"


def test_session_new_after_setup_works_even_without_authenticate(
    heron, fake_llm, workspace, heron_home
):
    # The spec has clients not pass terminal methods to `authenticate`: they just retry.
    client = heron(env=NO_MODEL, client_capabilities=TERMINAL_AUTH)
    with pytest.raises(RpcError):
        client.new_session(workspace)
    config = heron_home / ".config" / "heron" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'base_url = "{fake_llm.base_url}"\nmodel = "fake-model"\n')
    fake_llm.script(text("ok"))
    turn = client.prompt(client.new_session(workspace), "hi")
    assert turn["stopReason"] == "end_turn"


def test_authenticate_with_an_unknown_method_is_invalid_params(heron):
    client = heron()
    with pytest.raises(RpcError) as failure:
        client.request("authenticate", {"methodId": "oauth"})
    assert failure.value.code == -32602


@pytest.mark.parametrize(
    ("config_text", "complaint"),
    [
        ("not toml [", "cannot read config"),
        ('mode = "yolo"\n', "mode must be one of"),
        ('base_url = "localhost:11434/v1"\n', "http://localhost:11434/v1"),
    ],
)
def test_a_broken_config_still_answers_initialize_and_the_prompt_explains(
    heron, fake_llm, workspace, tmp_path, config_text, complaint
):
    config = tmp_path / "broken.toml"
    config.write_text(config_text)
    client = heron("--config", str(config), env=NO_MODEL, client_capabilities=TERMINAL_AUTH)
    assert complaint in client.stderr or _eventually(client, complaint)
    session_id = client.new_session(workspace)  # not a login problem: no -32000
    with pytest.raises(RpcError) as failure:
        client.prompt(session_id, "hi")
    assert complaint in failure.value.message
    assert "Heron cannot use its settings" in failure.value.message
    # Fixed in the file: the next prompt works, without a restart.
    config.write_text(f'base_url = "{fake_llm.base_url}"\nmodel = "fake-model"\n')
    fake_llm.script(text("fixed"))
    assert client.prompt(session_id, "again")["stopReason"] == "end_turn"


def _eventually(client, text: str) -> bool:
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if text in client.stderr:
            return True
        time.sleep(0.05)
    return False


def test_a_bad_base_url_in_the_environment_is_explained_at_the_prompt(heron, workspace):
    client = heron(env={"OPENAI_BASE_URL": "127.0.0.1:8080/v1"})
    assert _eventually(client, "http://127.0.0.1:8080/v1")  # said at start-up, on stderr
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as failure:
        client.prompt(session_id, "hi")
    assert "must be a full URL starting with http:// or https://" in failure.value.message


def test_a_missing_config_file_given_by_flag_does_not_stop_initialize(tmp_path):
    proc = subprocess.run(
        [_heron_executable(), "--config", str(tmp_path / "nope.toml")],
        input=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
        capture_output=True,
        timeout=20,
    )
    assert json.loads(proc.stdout.splitlines()[0])["result"]["protocolVersion"] == 1
    assert b"config file not found" in proc.stderr
