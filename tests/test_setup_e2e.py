"""`heron setup` on a pseudo-terminal, against the fake server's /v1/models and chat endpoint."""

from __future__ import annotations

import socket
import stat
import time
import tomllib
from pathlib import Path

import pytest
from fake_openai import error, text
from test_exec_e2e import terminal  # noqa: F401  (the pseudo-terminal fixture)

NO_MODEL = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "HERON_MODEL": None}
OTHER_URL = "7"  # the last endpoint in the list: a URL of one's own


@pytest.fixture(autouse=True)
def two_models(fake_llm) -> None:
    """Setup lists the endpoint's models: give it two to choose from."""
    fake_llm.models = ["fake-model", "fake-model-mini"]


@pytest.fixture
def config_file(heron_home: Path) -> Path:
    return heron_home / ".config" / "heron" / "config.toml"


def test_setup_lists_the_models_tests_one_and_writes_an_owner_only_file(
    terminal,  # noqa: F811
    fake_llm,
    config_file,
):
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type(OTHER_URL + "\r")
    term.expect("Base URL")
    term.type(fake_llm.base_url + "\r")
    term.expect("input hidden): ")
    term.type("sk-secret-123\r")
    term.expect("Model (number or name)")
    assert "1. fake-model\r\n" in term.screen and "2. fake-model-mini" in term.screen
    term.type("2\r")
    assert term.wait() == 0, term.screen
    assert "It works." in term.screen
    assert "sk-secret-123" not in term.screen  # the key was not echoed
    saved = tomllib.loads(config_file.read_text())
    assert saved == {
        "base_url": fake_llm.base_url,
        "model": "fake-model-mini",
        "api_key": "sk-secret-123",
    }
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    models = [r for r in fake_llm.other_requests if r.path == "/v1/models"]
    assert models and models[0].headers["authorization"] == "Bearer sk-secret-123"
    chat = fake_llm.requests[0]
    assert chat.body["model"] == "fake-model-mini"
    assert chat.headers["authorization"] == "Bearer sk-secret-123"


def test_running_setup_again_edits_the_file_and_keeps_the_other_keys(
    terminal,  # noqa: F811
    fake_llm,
    config_file,
):
    config_file.parent.mkdir(parents=True)
    config_file.write_text(
        "# my Heron settings\n"
        'mode = "accept-edits"\n'
        f'base_url = "{fake_llm.base_url}"\n'
        'api_key = "sk-old"\n'
        'model = "fake-model-mini"\n'
        "max_turn_requests = 12\n"
    )
    config_file.chmod(0o644)
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    term.expect(f"Endpoint [{OTHER_URL}]: ")  # the saved URL is the default
    term.type("\r")
    term.expect(f"Base URL (e.g. http://localhost:8080/v1) [{fake_llm.base_url}]: ")
    term.type("\r")
    term.expect("Enter keeps the saved key")
    term.type("\r")
    term.expect("Model (number or name) [2]: ")
    term.type("1\r")
    assert term.wait() == 0, term.screen
    text_after = config_file.read_text()
    assert text_after.startswith("# my Heron settings\n")
    assert tomllib.loads(text_after) == {
        "mode": "accept-edits",
        "base_url": fake_llm.base_url,
        "api_key": "sk-old",
        "model": "fake-model",
        "max_turn_requests": 12,
    }
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600


def test_a_failed_test_request_writes_nothing_unless_confirmed(
    terminal,  # noqa: F811
    fake_llm,
    config_file,
):
    fake_llm.script(error(404, "The model `nope` does not exist"))
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type(OTHER_URL + "\r")
    term.expect("Base URL")
    term.type(fake_llm.base_url + "\r")
    term.expect("input hidden): ")
    term.type("\r")
    term.expect("Model (number or name)")
    term.type("nope\r")
    term.expect("Save anyway? [y/N]")
    assert "does not exist" in term.screen
    term.type("\r")
    assert term.wait() == 1
    assert not config_file.exists()


def test_a_local_server_is_not_asked_for_a_key(terminal, config_file):  # noqa: F811
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type("2\r")  # Ollama, on localhost: no key to ask for
    term.expect("Host (Enter: this machine) [localhost]: ")
    term.type("\r")
    term.expect("Port [11434]: ")
    term.type("\r")
    # The list when a server runs there, else the URL is asked again: no key either way.
    deadline = time.monotonic() + 20
    while "Model" not in term.screen and "try again" not in term.screen:
        assert time.monotonic() < deadline, term.screen
        term._read(0.1)
    assert "API key" not in term.screen
    term.interrupt()
    assert term.wait() == 130
    assert not config_file.exists()


def test_ctrl_c_leaves_the_file_alone(terminal, config_file):  # noqa: F811
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.interrupt()
    assert term.wait() == 130
    assert "nothing was written" in term.screen
    assert "Traceback" not in term.screen
    assert not config_file.exists()


def test_a_url_without_scheme_is_asked_again(terminal, fake_llm, config_file):  # noqa: F811
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type(OTHER_URL + "\r")
    term.expect("Base URL")
    term.type(fake_llm.base_url.removeprefix("http://") + "\r")
    term.expect("must be a full URL")
    term.type(fake_llm.base_url + "\r")
    term.expect("input hidden): ")
    term.type("\r")
    term.expect("Model (number or name)")
    term.type("1\r")
    assert term.wait() == 0, term.screen
    assert tomllib.loads(config_file.read_text())["base_url"] == fake_llm.base_url


def test_the_editor_s_terminal_auth_command_line_runs_setup(
    terminal,  # noqa: F811
    tmp_path,
):
    # The editor appends the method's args to Heron's usual command line.
    config = tmp_path / "elsewhere.toml"
    term = terminal("--mode", "ask", "--config", str(config), "setup", env=NO_MODEL)
    term.expect(f"saved in {config}")
    term.expect("Endpoint: ")
    term.interrupt()
    assert term.wait() == 130


def _local_endpoint(term, fake_llm, number: str) -> None:
    """Pick a local server kind and point it at the fake server's host and port."""
    host_port = fake_llm.base_url.removeprefix("http://").split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    term.expect("Endpoint: ")
    term.type(number + "\r")
    term.expect("Host (Enter: this machine) [localhost]: ")
    term.type(host + "\r")
    term.expect("Port [")
    term.type("99999\r")
    term.expect("Please enter a port number")
    term.type(port + "\r")


@pytest.mark.parametrize(
    "number", ["2", "3", "4", "6"], ids=["ollama", "lmstudio", "vllm", "llamacpp"]
)
def test_a_local_server_on_another_host_and_port(terminal, fake_llm, config_file, number):  # noqa: F811
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    _local_endpoint(term, fake_llm, number)
    term.expect("Model (number or name)")
    term.type("1\r")
    assert term.wait() == 0, term.screen
    assert "API key" not in term.screen
    assert tomllib.loads(config_file.read_text())["base_url"] == fake_llm.base_url


def test_a_base_url_without_v1_gets_a_hint_and_is_retried_with_it(
    terminal,  # noqa: F811
    fake_llm,
    config_file,
):
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type(OTHER_URL + "\r")
    term.expect("Base URL")
    term.type(fake_llm.base_url.removesuffix("/v1") + "\r")
    term.expect("input hidden): ")
    term.type("\r")
    term.expect("Model (number or name)")
    assert "Most servers serve the API under /v1" in term.screen
    assert f"using {fake_llm.base_url}" in term.screen
    term.type("1\r")
    assert term.wait() == 0, term.screen
    assert tomllib.loads(config_file.read_text())["base_url"] == fake_llm.base_url
    assert [r.path for r in fake_llm.requests] == ["/v1/chat/completions"]


def test_only_chat_models_are_offered_and_then_what_to_do_next(
    terminal,  # noqa: F811
    fake_llm,
    config_file,
):
    fake_llm.models = [
        "text-embedding-3-small",
        "gpt-4.1",
        "omni-moderation-latest",
        "tts-1",
        "whisper-1",
        "bge-reranker-v2",
        "qwen2.5-coder:7b",
    ]
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type(OTHER_URL + "\r")
    term.expect("Base URL")
    term.type(fake_llm.base_url + "\r")
    term.expect("input hidden): ")
    term.type("\r")
    term.expect("Model (number or name)")
    assert "1. gpt-4.1\r\n  2. qwen2.5-coder:7b\r\n" in term.screen
    for other in ("embedding", "moderation", "tts-1", "whisper", "reranker"):
        assert other not in term.screen
    term.type("2\r")
    assert term.wait() == 0, term.screen
    after = term.screen[term.screen.index("Saved to") :]
    assert '"agent_servers"' in after and '"command":' in after
    assert 'heron exec "' in after


def _host_port(fake_llm) -> tuple[str, str]:
    host, port = fake_llm.base_url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
    return host, port


def test_running_setup_again_proposes_the_saved_kind_host_and_port(
    terminal,  # noqa: F811
    fake_llm,
    config_file,
):
    """Saved: Ollama's port on another host. Not a preset's URL, yet the kind, the host and
    the port are what a re-run proposes (not "enter a URL", nor localhost:11434)."""
    host, port = _host_port(fake_llm)
    config_file.parent.mkdir(parents=True)
    config_file.write_text(f'base_url = "http://{host}:11434/v1"\nmodel = "fake-model"\n')
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint [2]: ")  # Ollama
    term.type("\r")
    term.expect(f"Host [{host}]: ")
    term.type("\r")
    term.expect("Port [11434]: ")
    term.type(port + "\r")  # where the fake server listens
    term.expect("Model (number or name) [1]: ")  # the saved model, listed first
    term.type("\r")
    assert term.wait() == 0, term.screen
    assert "API key" not in term.screen
    assert tomllib.loads(config_file.read_text()) == {
        "base_url": fake_llm.base_url,
        "model": "fake-model",
    }


def _closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, never listened on, then freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_url_is_asked_again_before_the_model(
    terminal,  # noqa: F811
    fake_llm,
    config_file,
):
    nowhere = f"http://127.0.0.1:{_closed_port()}/v1"
    fake_llm.script(text("OK"))
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type(OTHER_URL + "\r")
    term.expect("Base URL")
    term.type(nowhere + "\r")
    term.expect("input hidden): ")
    term.type("\r")
    term.expect(f"Base URL (Enter: try again; -: keep it untried) [{nowhere}]: ")
    assert "Cannot reach" in term.screen and "Model" not in term.screen
    term.type(fake_llm.base_url + "\r")
    term.expect("Model (number or name)")
    assert "1. fake-model" in term.screen
    term.type("1\r")
    assert term.wait() == 0, term.screen
    assert tomllib.loads(config_file.read_text())["base_url"] == fake_llm.base_url


def test_an_unreachable_url_can_be_kept_untried(terminal, config_file):  # noqa: F811
    nowhere = f"http://127.0.0.1:{_closed_port()}/v1"
    term = terminal("setup", env=NO_MODEL)
    term.expect("Endpoint: ")
    term.type(OTHER_URL + "\r")
    term.expect("Base URL")
    term.type(nowhere + "\r")
    term.expect("input hidden): ")
    term.type("\r")
    term.expect("try again; -: keep it untried")
    term.type("-\r")
    term.expect("Model name: ")
    term.type("my-model\r")
    term.expect("Save anyway? [y/N]")
    term.type("y\r")
    assert term.wait() == 0, term.screen
    assert tomllib.loads(config_file.read_text()) == {"base_url": nowhere, "model": "my-model"}
