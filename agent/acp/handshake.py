"""The `initialize` answer, in plain dicts.

It is the first thing an editor waits for, so it is built without pydantic: the fast path in
`agent.cli` answers it while the rest of Heron is still being imported. Tests validate it
against the official schema like every other message.
"""

from __future__ import annotations

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
    """Whether the client can run a terminal auth method (`clientCapabilities.auth.terminal`).

    Read leniently from the raw params: anything malformed means no.
    """
    caps = params.get("clientCapabilities") if isinstance(params, dict) else None
    auth = caps.get("auth") if isinstance(caps, dict) else None
    return isinstance(auth, dict) and auth.get("terminal") is True


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
            },
            "auth": {"logout": {}},
        },
        # Terminal methods may be offered only to clients that said they can run them.
        "authMethods": [SETUP_METHOD] if terminal_auth else [],
        "agentInfo": {"name": "heron", "title": "Heron", "version": __version__},
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
