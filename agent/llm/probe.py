"""Can the server's chat template take tools? Asked once per endpoint, in the background.

llama.cpp's `llama-server` says so in `GET /props` → `chat_template_caps.supports_tools`
(false without `--jinja` or with a template that has no tool syntax; agent.llm.serverinfo).
Other servers answer 404, and then nothing is known and nothing is said.
"""

from __future__ import annotations

from agent.config import Settings
from agent.llm import serverinfo

NO_TOOLS = (
    "Note: the model server at {where} reports that its chat template cannot take tools, so "
    "the model cannot read, edit or run anything here. For llama.cpp's llama-server, start it "
    "with --jinja (and, if needed, --chat-template-file with a tool-capable template).\n\n"
)


def known_tool_support(settings: Settings) -> bool | None:
    return serverinfo.supports_tools(serverinfo.known_props(settings))


def should_probe(settings: Settings) -> bool:
    """Only servers the user pointed Heron at; each endpoint once."""
    return bool(settings.base_url) and not serverinfo.props_asked(settings)


async def probe_tool_support(settings: Settings) -> bool | None:
    """Ask the server (2 s at most); never raises. None: the server does not say."""
    return serverinfo.supports_tools(await serverinfo.props(settings))
