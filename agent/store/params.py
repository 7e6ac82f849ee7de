"""The params of the store's methods (session/load, resume, list, close, delete).

Apart from `agent.app.sessions` so that registering those methods, before `session/new` is
answered, imports neither pydantic nor the ACP models.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from agent.acp.protocol import Incoming, SkipInvalid

# Heron's own ids are `sess_` and hex; any id it could have made, or a client could mean, fits
# this. Anything else (control characters, half a surrogate pair, a megabyte) is refused with
# -32602 before it reaches the store: SQLite could not even bind some of them.
SessionId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:@+-]{1,200}$")]


class LoadSessionParams(Incoming):
    session_id: SessionId
    cwd: str
    mcp_servers: Annotated[list[dict[str, Any]], SkipInvalid] = Field(default_factory=list)
    additional_directories: Annotated[list[str], SkipInvalid] = Field(default_factory=list)


class ListSessionsParams(Incoming):
    cwd: str | None = None
    cursor: str | None = None


class SessionIdOnly(Incoming):
    session_id: SessionId
