"""`heron setup`: choose an endpoint, a key and a model; test them; save the config file.

Secrets stay out of the editor's settings: the key goes to Heron's own config file, written
owner-only. Also run by editors as Heron's terminal auth method (`heron [flags] setup`).
Talks HTTP with urllib: two small requests do not need the openai client.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config import ConfigError, check_base_url, config_path, update_config_file
from agent.options.model_ids import chat_models


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str | None  # None: the user types it
    needs_key: bool | None  # None: asked, may be left empty

    @property
    def local(self) -> bool:
        """A server one runs oneself: its host and port are asked (another machine, port)."""
        return bool(self.url) and self.url.startswith("http://localhost:")  # type: ignore[union-attr]


ENDPOINTS = (
    Endpoint("OpenAI", "https://api.openai.com/v1", True),
    Endpoint("Ollama", "http://localhost:11434/v1", False),
    Endpoint("LM Studio", "http://localhost:1234/v1", False),
    Endpoint("vLLM", "http://localhost:8000/v1", False),
    Endpoint("OpenRouter", "https://openrouter.ai/api/v1", True),
    Endpoint("llama.cpp server", "http://localhost:8080/v1", False),
    Endpoint("Another OpenAI-compatible server (enter its URL)", None, None),
)

TIMEOUT = 20  # seconds for each HTTP request


class SetupError(Exception):
    def __init__(self, message: str, status: int | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, when the server answered one
        self.unreachable = unreachable  # no answer at all: nothing listens there, or no route


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heron setup",
        description="Choose the model endpoint, API key and model Heron uses; test them and "
        "save them in Heron's config file (mode 0600).",
    )
    parser.add_argument("--config", help="config file (default: ~/.config/heron/config.toml)")
    return parser


def main(argv: list[str]) -> int:
    # The agent's other flags may come along (an editor appends `setup` to its command line).
    args, _ = build_parser().parse_known_args(argv)
    path = config_path(args.config)
    if not sys.stdin.isatty():
        print("heron setup: needs a terminal (stdin is not a TTY)", file=sys.stderr)
        return 2
    try:
        return Setup(path).run()
    except (KeyboardInterrupt, EOFError):
        print("\nheron setup: cancelled; nothing was written.", file=sys.stderr)
        return 130
    except (SetupError, ConfigError) as exc:
        print(f"heron setup: {exc}", file=sys.stderr)
        return 1


class Setup:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.current = self._read_current()

    def _read_current(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            with open(self.path, "rb") as f:
                return tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SetupError(f"cannot read {self.path} ({exc}); fix or remove it first") from exc

    def run(self) -> int:
        print(f"Heron setup: the settings are saved in {self.path}\n")
        base_url, needs_key = self.choose_endpoint()
        api_key = self.choose_key(base_url, needs_key)
        base_url, models = self.find_models(base_url, api_key)
        model = self.choose_model(models)
        if not self.test(base_url, api_key, model) and not yes_no("Save anyway?", False):
            print("Nothing was written.")
            return 1
        values: dict[str, str | int | float] = {"base_url": base_url, "model": model}
        if api_key:
            values["api_key"] = api_key
        update_config_file(self.path, values)
        print(f"Saved to {self.path} (readable only by you).")
        self.warn_about_environment()
        print_next_steps()
        return 0

    def choose_endpoint(self) -> tuple[str, bool | None]:
        current = self.current.get("base_url")
        current = current if isinstance(current, str) else None
        print("Which endpoint serves the model?")
        for number, endpoint in enumerate(ENDPOINTS, 1):
            shown = f"  ({endpoint.url})" if endpoint.url else ""
            print(f"  {number}. {endpoint.name}{shown}")
        saved = saved_endpoint(current) if current else None
        default = ENDPOINTS.index(saved) + 1 if saved else None
        while True:
            answer = ask("Endpoint", str(default) if default else None)
            if answer.isdigit() and 1 <= int(answer) <= len(ENDPOINTS):
                endpoint = ENDPOINTS[int(answer) - 1]
                break
            print(f"  Please enter a number from 1 to {len(ENDPOINTS)}.")
        if endpoint.local:
            # The saved server's host and port when it is of this kind, else the usual ones.
            url = current if endpoint is saved else endpoint.url
            return self.ask_host_and_port(url), endpoint.needs_key  # type: ignore[arg-type]
        if endpoint.url:
            return endpoint.url, endpoint.needs_key
        return ask_url("Base URL (e.g. http://localhost:8080/v1)", current), None

    def ask_host_and_port(self, default_url: str) -> str:
        """The usual localhost URL, or the same server on another machine or port."""
        parts = urllib.parse.urlsplit(default_url)
        host = ask(
            "Host (Enter: this machine)" if parts.hostname == "localhost" else "Host",
            parts.hostname,
        )
        while True:
            port = ask("Port", str(parts.port))
            if port.isdigit() and 0 < int(port) < 65536:
                break
            print("  Please enter a port number (1-65535).")
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host  # IPv6
        return f"{parts.scheme}://{host}:{port}{parts.path}"

    def choose_key(self, base_url: str, needs_key: bool | None) -> str | None:
        if needs_key is False:
            return None  # local servers take no key; one saved earlier stays as it is
        kept = self.current.get("api_key") if isinstance(self.current.get("api_key"), str) else None
        hint = "Enter keeps the saved key" if kept else "leave empty if the server needs none"
        while True:
            key = getpass.getpass(f"API key ({hint}, input hidden): ").strip()
            if key or kept or not needs_key:
                return key or kept
            print("  This endpoint needs an API key.")

    def find_models(self, base_url: str, api_key: str | None) -> tuple[str, list[str]]:
        """The endpoint's chat models, and the URL that answered: a URL where nothing answers
        is asked again at once (a typo, a server not started yet); one without `/v1` (the
        most common mistake) is tried again with it."""
        while True:
            try:
                return base_url, list_models(base_url, api_key)
            except SetupError as exc:
                failure = exc
            if not failure.unreachable:
                break
            print(f"{str(failure)[:1].upper()}{str(failure)[1:]}. Is the server running there?")
            again = ask_url("Base URL (Enter: try again; -: keep it untried)", base_url, "-")
            if again == "-":
                return base_url, []
            base_url = again
        retry = f"{base_url}/v1"
        if not base_url.endswith("/v1") and failure.status in (404, 405):
            print(
                f"{base_url}/models: {failure}. Most servers serve the API under /v1: "
                f"trying {retry}"
            )
            try:
                models = list_models(retry, api_key)
            except SetupError as exc:
                print(f"  {retry}/models: {exc}")
            else:
                print(f"  That works: using {retry}")
                return retry, models
        print(f"Could not list the models: {failure}")
        return base_url, []

    def choose_model(self, models: list[str]) -> str:
        current = self.current.get("model")
        if not models:
            return ask("Model name", current if isinstance(current, str) else None)
        print("Models available:")
        for number, model in enumerate(models, 1):
            print(f"  {number}. {model}")
        default = str(models.index(current) + 1) if current in models else None
        while True:
            answer = ask("Model (number or name)", default)
            if answer.isdigit() and 1 <= int(answer) <= len(models):
                return models[int(answer) - 1]
            if answer and not answer.isdigit():
                return answer
            print(f"  Please enter a number from 1 to {len(models)}, or a model name.")

    def test(self, base_url: str, api_key: str | None, model: str) -> bool:
        print(f"Testing {model} with a tiny request…")
        try:
            test_request(base_url, api_key, model)
        except SetupError as exc:
            print(f"  The test failed: {exc}")
            return False
        print("  It works.")
        return True

    def warn_about_environment(self) -> None:
        names = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HERON_MODEL")
        overriding = [name for name in names if os.environ.get(name)]
        if overriding:
            print(
                f"Note: {', '.join(overriding)} set in the environment override the file; "
                "unset them (also in your editor's agent settings) to use these settings."
            )


def print_next_steps() -> None:
    """What to do with the saved settings."""
    program = os.path.abspath(sys.argv[0]) if os.path.basename(sys.argv[0]) == "heron" else "heron"
    snippet = {"agent_servers": {"Heron": {"type": "custom", "command": program, "args": []}}}
    print(
        "\nNext:\n"
        "  - in your editor, add Heron as an agent; for Zed, in settings.json:\n"
        + "\n".join("      " + line for line in json.dumps(snippet, indent=2).splitlines())
        + '\n  - or try it here, in a project folder:  heron exec "Explain what this project does"'
    )


def saved_endpoint(url: str) -> Endpoint:
    """The kind of endpoint a saved URL is: a preset's URL; a local server's port and path
    (the same server on another machine: Ollama on gpu-box:11434); a hosted API's host; else
    one's own URL."""
    if preset := next((e for e in ENDPOINTS if e.url == url), None):
        return preset
    parts = urllib.parse.urlsplit(url)
    for endpoint in ENDPOINTS:
        if endpoint.url is None:
            continue
        usual = urllib.parse.urlsplit(endpoint.url)
        if endpoint.local:
            same = (usual.scheme, usual.port, usual.path) == (parts.scheme, parts.port, parts.path)
        else:
            same = usual.hostname == parts.hostname
        if same:
            return endpoint
    return ENDPOINTS[-1]


def ask_url(question: str, default: str | None, keep: str | None = None) -> str:
    """A base URL, asked until it is one (`keep`: an answer taken as it is)."""
    while True:
        url = ask(question, default).rstrip("/")
        if url == keep:
            return url
        try:
            check_base_url(url)
            return url
        except ConfigError as exc:
            print(f"  {exc}")


def ask(question: str, default: str | None = None) -> str:
    suffix = f" [{default}]" if default else ""
    while True:
        answer = input(f"{question}{suffix}: ").strip()
        if answer or default:
            return answer or str(default)


def yes_no(question: str, default: bool) -> bool:
    answer = input(f"{question} [{'Y/n' if default else 'y/N'}]: ").strip().lower()
    return default if not answer else answer.startswith("y")


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _open(request: urllib.request.Request) -> Any:
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        raise SetupError(f"HTTP {exc.code}: {_error_message(exc)}", exc.code) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SetupError(f"cannot reach {request.full_url}: {reason}", unreachable=True) from exc


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    except (ValueError, OSError):
        pass
    return str(exc.reason)


def list_models(base_url: str, api_key: str | None) -> list[str]:
    request = urllib.request.Request(f"{base_url}/models", headers=_headers(api_key))
    with _open(request) as response:
        try:
            body = json.load(response)
        except ValueError as exc:
            raise SetupError("the model list is not JSON") from exc
    return sorted(chat_models(body))  # the picker's filter: no embedding, speech, ... models


def test_request(base_url: str, api_key: str | None, model: str) -> None:
    """One streamed chat request; the first event proves the endpoint, key and model work."""
    payload = {
        "model": model,
        "messages": [{"role": "user", "content": "Reply with: OK"}],
        "stream": True,
    }
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(payload).encode(),
        headers=_headers(api_key) | {"Accept": "text/event-stream"},
        method="POST",
    )
    with _open(request) as response:
        for raw in response:  # stop at the first event: no need to pay for the whole answer
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            try:
                event = json.loads(data) if data != "[DONE]" else {}
            except ValueError as exc:
                raise SetupError(f"unexpected answer: {data[:200]}") from exc
            if isinstance(event, dict) and event.get("error"):
                raise SetupError(str(event["error"]))
            return
    raise SetupError("the server answered without any event")
