"""The `initialize` answer, in plain dicts.

It is the first thing an editor waits for, so it is built without pydantic: the fast path in
`agent.cli` answers it while the rest of Heron is still being imported. Tests validate it
against the official schema like every other message.
"""

from __future__ import annotations

import os
import sys

from agent import __version__

TYPE_CHECKING = False  # `typing` itself is not imported before the first answer
if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = 1


# `heron setup` run by the editor in a terminal (ACP "terminal" auth): the editor appends
# `args` to the command line it launches Heron with.
SETUP_METHOD_ID = "heron-setup"
SETUP_METHOD = {
    "type": "terminal",
    "id": SETUP_METHOD_ID,
    "name": "Set up a model",
    "description": "Run `heron setup` in a terminal: pick an endpoint (OpenAI, Ollama, LM Studio, "
    "vLLM, OpenRouter, llama.cpp...), an API key and a model; saved in Heron's config file.",
    "args": ["setup"],
}


def offers_terminal_auth(params: Any) -> bool:
    """Whether the client can run a terminal auth method: the schema's
    `clientCapabilities.auth.terminal`, or the older `clientCapabilities._meta["terminal-auth"]`
    (what the ACP registry's validator and editors whose terminal login is behind a flag send).

    Read leniently from the raw params: anything malformed means no.
    """
    caps = params.get("clientCapabilities") if isinstance(params, dict) else None
    if not isinstance(caps, dict):
        return False
    auth, meta = caps.get("auth"), caps.get("_meta")
    return (isinstance(auth, dict) and auth.get("terminal") is True) or (
        isinstance(meta, dict) and meta.get("terminal-auth") is True
    )


def _setup_command() -> list[str]:
    """The command line that runs `heron setup` with this very installation and the flags it
    was started with (a `--config` applies to both): the older `_meta["terminal-auth"]` form
    names the whole command instead of appending `args` to the editor's."""
    program = sys.argv[0] if sys.argv and sys.argv[0] else ""
    flags = sys.argv[1:]
    if not program or program.endswith(".py") or program == "-m":
        return [sys.executable, "-m", "agent", *flags, "setup"]  # `python -m agent`
    return [os.path.abspath(program), *flags, "setup"]


def setup_method() -> dict[str, Any]:
    """The login method in both forms: the schema's `terminal` type (`args`), and the older
    `_meta["terminal-auth"]` (`command`, `args`, `label`)."""
    command, *args = _setup_command()
    meta = {"terminal-auth": {"command": command, "args": args, "label": "Set up a model"}}
    return {**SETUP_METHOD, "_meta": meta}


def initialize_result(terminal_auth: bool = False) -> dict[str, Any]:
    # Capabilities advertise only what works: whatever is omitted counts as unsupported.
    # We answer version 1 whatever the client asked: it is the only one we speak, and a
    # client that cannot speak it disconnects (ACP-NOTES §8: never echo an unsupported one).
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                "delete": {},
                "additionalDirectories": {},
                "fork": {},  # unstable in v1: Zed's "Fork Thread", Claude's and Codex's adapters
            },
            "auth": {"logout": {}},
        },
        # Terminal methods may be offered only to clients that said they can run them.
        "authMethods": [setup_method()] if terminal_auth else [],
        "agentInfo": {"name": "heron", "title": "Heron", "version": __version__},
        # Extensions, under the names the clients built for other agents look for:
        # `_session/steering` (codex-acp, claude-agent-acp) and claude-agent-acp's rewinds.
        "_meta": {
            "steering": {"supported": True},
            "sessionRewind": {"version": 1, "method": "_session/rewind"},
            "sessionRewindFiles": {
                "version": 1,
                "method": "_session/rewind_files",
                "dryRun": True,
            },
        },
    }


def is_plain_initialize(message: Any) -> bool:
    """A well-formed initialize request that the fast path may answer on its own."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and message.get("method") == "initialize"
        and isinstance(message.get("id"), (int, str))
        and not isinstance(message.get("id"), bool)
        and isinstance(message.get("params"), dict)
        and type(message["params"].get("protocolVersion")) is int
        and 0 <= message["params"]["protocolVersion"] <= 65535
    )
