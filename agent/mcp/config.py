"""The ACP `McpServer` entries of `session/new` (and load/resume), checked and normalised.

An entry Heron cannot use is skipped with a logged reason; it never fails the request.
Kept free of the `mcp` SDK so that a session without servers never imports it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("heron.mcp")

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class StdioServer:
    name: str
    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    transport = "stdio"


@dataclass(frozen=True)
class HttpServer:
    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    transport: str = "http"  # "http" (streamable HTTP) or "sse"


ServerConfig = StdioServer | HttpServer


def parse_servers(
    entries: list[dict[str, Any]], inherit: dict[str, str] | None = None
) -> list[ServerConfig]:
    """The usable entries, in order; each unusable one is logged with the reason and skipped.

    A stdio server's environment is the SDK's short list of safe variables (PATH, HOME, ...),
    `inherit` (the user's `pass_env`), then exactly the `env` the client gave for it."""
    servers: list[ServerConfig] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        try:
            server = _parse(entry)
        except ValueError as exc:
            label = entry.get("name") if isinstance(entry, dict) else None
            log.warning("MCP server %s skipped: %s", label or f"#{index + 1}", exc)
            continue
        key = safe_name(server.name)
        if key in seen:
            log.warning("MCP server %s skipped: another server has the same name", server.name)
            continue
        seen.add(key)
        if inherit and isinstance(server, StdioServer):
            server = StdioServer(server.name, server.command, server.args, inherit | server.env)
        servers.append(server)
    return servers


def _parse(entry: Any) -> ServerConfig:
    if not isinstance(entry, dict):
        raise ValueError("not an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("no name")
    kind = entry.get("type")
    if kind in ("http", "sse"):
        url = entry.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise ValueError(f"url must be an http(s) URL, got {url!r}")
        return HttpServer(name, url, _pairs(entry.get("headers"), "headers"), kind)
    if kind not in (None, "stdio"):
        raise ValueError(f"unknown transport type {kind!r}")
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise ValueError("no command")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError("args must be a list of strings")
    return StdioServer(name, command, list(args), _pairs(entry.get("env"), "env"))


def _pairs(value: Any, what: str) -> dict[str, str]:
    """ACP sends env and headers as lists of {name, value}."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list of {{name, value}}")
    pairs: dict[str, str] = {}
    for item in value:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise ValueError(f"{what} must be a list of {{name, value}}, got {item!r}")
        pairs[item["name"]] = item["value"]
    return pairs


def safe_name(name: str) -> str:
    """What OpenAI function names allow (^[a-zA-Z0-9_-]+$); never empty."""
    return _UNSAFE.sub("_", name.strip()) or "_"


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """`mcp__<server>__<tool>`, sanitised, at most 64 characters and unique within `taken`."""
    base = f"mcp__{safe_name(server)}__{safe_name(tool)}"
    name = base[:64]
    counter = 2
    while name in taken:
        suffix = f"_{counter}"
        name = base[: 64 - len(suffix)] + suffix
        counter += 1
    return name
