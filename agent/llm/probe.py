"""Can the server's chat template take tools? Asked once per endpoint, in the background.

llama.cpp's `llama-server` says so in `GET /props` → `chat_template_caps.supports_tools`
(false without `--jinja` or with a template that has no tool syntax). Other servers answer
404, and then nothing is known and nothing is said.
"""

from __future__ import annotations

import logging

from agent.config import Settings
from agent.llm.client import get_client

log = logging.getLogger("heron.llm")

NO_TOOLS = (
    "Note: the model server at {where} reports that its chat template cannot take tools, so "
    "the model cannot read, edit or run anything here. For llama.cpp's llama-server, start it "
    "with --jinja (and, if needed, --chat-template-file with a tool-capable template).\n\n"
)

_supports_tools: dict[str, bool | None] = {}  # endpoint → answer; absent: not asked yet


def known_tool_support(settings: Settings) -> bool | None:
    return _supports_tools.get(settings.base_url or "")


def should_probe(settings: Settings) -> bool:
    """Only servers the user pointed Heron at; each endpoint once."""
    return bool(settings.base_url) and settings.base_url not in _supports_tools


async def probe_tool_support(settings: Settings) -> bool | None:
    """Ask the server (2 s at most); never raises. None: the server does not say."""
    endpoint = settings.base_url or ""
    _supports_tools.setdefault(endpoint, None)  # asked: no second probe meanwhile
    root = endpoint.rstrip("/").removesuffix("/v1")
    answer: bool | None = None
    import httpx2 as httpx  # openai's transport (pyproject: openai>=3.57, httpx2)

    try:
        client = await get_client(settings)
        response = await client.get(
            f"{root}/props", cast_to=httpx.Response, options={"max_retries": 0, "timeout": 2}
        )
        caps = response.json().get("chat_template_caps") or {}
        if isinstance(caps.get("supports_tools"), bool):
            answer = caps["supports_tools"]
    except Exception as exc:  # 404, not JSON, unreachable: the server does not say
        log.debug("no tool support information at %s/props: %s", root, exc)
    _supports_tools[endpoint] = answer
    return answer
