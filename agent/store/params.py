"""The params of the store's methods (session/load, resume, list, close, delete).

Apart from `agent.store.methods` so that registering those methods, before `session/new` is
answered, imports neither pydantic nor the ACP models.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from agent.acp.protocol import Incoming, SkipInvalid


class LoadSessionParams(Incoming):
    session_id: str
    cwd: str
    mcp_servers: Annotated[list[dict[str, Any]], SkipInvalid] = Field(default_factory=list)
    additional_directories: Annotated[list[str], SkipInvalid] = Field(default_factory=list)


class ListSessionsParams(Incoming):
    cwd: str | None = None
    cursor: str | None = None


class SessionIdOnly(Incoming):
    session_id: str
