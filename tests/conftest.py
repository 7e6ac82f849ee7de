"""Fixtures: a scripted fake OpenAI server and the real `heron` executable driven over ACP.

Every agent started through ``heron`` has each stdout message validated against
the ACP schema; teardown fails the test if anything was invalid.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import DEFAULT_CAPABILITIES, AcpClient
from fake_openai import FakeOpenAI

HeronFactory = Callable[..., AcpClient]


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def workspace(tmp_path: Path) -> str:
    ws = tmp_path / "ws"
    ws.mkdir()
    return str(ws)


@pytest.fixture
def heron_home(tmp_path: Path) -> Path:
    """HOME for the agent, so no user config or state leaks in (or out)."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    return home


def trust_folder(home: Path, *folders: str | Path, trusted: bool = True) -> Path:
    """Remember `folders` as trusted (or kept inert) in the test HOME's config, as `/trust
    always` (`never`) would: what tests of project commands and skills need. Returns the file."""
    import json

    path = home / ".config" / "heron" / "trusted-folders.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = {"trusted": [], "untrusted": []}
    if path.exists():
        import tomllib

        entries.update(tomllib.loads(path.read_text()))
    entries["trusted" if trusted else "untrusted"] += [os.path.realpath(f) for f in folders]
    path.write_text("".join(f"{key} = {json.dumps(value)}\n" for key, value in entries.items()))
    return path


def _heron_executable() -> str:
    candidate = Path(sys.executable).parent / "heron"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("heron")
    if found is None:
        pytest.fail(
            "the `heron` console script is not installed; run `.venv/bin/pip install -e .`",
            pytrace=False,
        )
    return found


def heron_env(
    fake_llm: FakeOpenAI, home: Path, overrides: dict[str, str | None] | None
) -> dict[str, str]:
    """The agent's environment: ours minus OPENAI_*/HERON_*, pointed at the fake model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HERON_"))}
    env |= {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": fake_llm.base_url,
        "HERON_MODEL": "fake-model",
        "HERON_LOG_LEVEL": "debug",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    if fake_llm.text_tool_calls:  # the fake's model writes its tool calls as text
        env["HERON_TOOL_CALLS"] = "text"
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.fixture
def heron(
    fake_llm: FakeOpenAI, workspace: str, heron_home: Path, tmp_path: Path
) -> Iterator[HeronFactory]:
    """Factory: ``heron(*args, client_capabilities=None, env=None, initialize=True, fs_root=None)``.

    Starts the agent (in a directory that is not the workspace, so a session's
    ``cwd`` must come from the protocol), optionally performs ``initialize``, and
    at teardown kills it and fails the test on any protocol violation.
    """
    clients: list[AcpClient] = []
    launch_dir = tmp_path / "launch"
    launch_dir.mkdir()

    def start(
        *args: str,
        client_capabilities: dict[str, Any] | None = None,
        env: dict[str, str | None] | None = None,
        initialize: bool = True,
        fs_root: str | None = None,
    ) -> AcpClient:
        client = AcpClient(fs_root or workspace)
        clients.append(client)
        client.start(
            [_heron_executable(), *args],
            env=heron_env(fake_llm, heron_home, env),
            cwd=str(launch_dir),
        )
        if initialize:
            caps = DEFAULT_CAPABILITIES if client_capabilities is None else client_capabilities
            client.initialize(caps)
        return client

    yield start
    for client in clients:
        client.kill()
    for client in clients:
        client.assert_clean()
