"""The `initialize` answer, in plain dicts.

It is the first thing an editor waits for, so it is built without pydantic: the fast path in
`agent.cli` answers it while the rest of Heron is still being imported. Tests validate it
against the official schema like every other message.
"""

from __future__ import annotations

from typing import Any

from agent import __version__

PROTOCOL_VERSION = 1


def initialize_result() -> dict[str, Any]:
    # Capabilities advertise only what works: whatever is omitted counts as unsupported.
    # We answer version 1 whatever the client asked: it is the only one we speak, and a
    # client that cannot speak it disconnects (ACP-NOTES §8: never echo an unsupported one).
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        },
        "authMethods": [],
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
