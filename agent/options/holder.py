"""What the pickers read and set of a session: a Protocol, so that this package does not
import the session (which sits above it). `agent.session.Session` satisfies it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent.acp.wire import Connection
    from agent.config import Settings
    from agent.notices import Note
    from agent.options.state import Choices


class SavesPicks(Protocol):
    @property
    def in_store(self) -> bool: ...


class OptionHolder(Protocol):
    mode: str  # the mode in force
    saved_mode: str  # the mode the store keeps (`Session.saved_mode`)
    told: set[str]  # what the session was told once (agent.options.unnamed)

    @property
    def id(self) -> str: ...

    @property
    def choices(self) -> Choices: ...

    @property
    def shared_settings(self) -> Settings:
        """The server's settings, without this session's picks."""

    @property
    def settings(self) -> Settings:
        """The settings with this session's picks."""

    @property
    def closed(self) -> bool: ...

    @property
    def connection(self) -> Connection: ...

    @property
    def saver(self) -> SavesPicks | None: ...

    def save(self) -> list[Note]:
        """A step boundary: save what changed (the notes are told at the next turn's)."""

    def notify(self, update: dict[str, Any]) -> None:
        """Send a `session/update` about this session (`Session.notify`)."""
