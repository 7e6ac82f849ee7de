"""Restoring files as a rewind does: /undo's revert (agent.undo.revert, with its rule: a file
goes back only while it holds exactly what Heron's turns last wrote), with each write kept in
the undo journal as the rewind's own change, so that /undo can take the rewind back."""

from __future__ import annotations

from pathlib import Path

from agent.undo.journal import UndoJournal
from agent.undo.revert import FilesLike, Look
from agent.undo.states import State


class Recording:
    """The files (`real`), each change noted in `journal` (its current turn: the rewind's)."""

    def __init__(self, real: FilesLike, journal: UndoJournal) -> None:
        self.real = real
        self.journal = journal

    async def look(self, path: str) -> Look:
        return await self.real.look(path)

    async def put_text(self, path: str, text: str) -> None:
        now = await self.real.look(path)
        token = await self.journal.before_write(Path(path), now.text if now.exists else None)
        await self.real.put_text(path, text)
        self.journal.done(token, text)

    async def put_bytes(self, path: str, state: State) -> None:
        token = await self.journal.before_write(Path(path), None)
        await self.real.put_bytes(path, state)
        self.journal.done(token)

    async def create(self, path: str, state: State) -> None:
        token = await self.journal.before_write(Path(path), None)
        await self.real.create(path, state)
        self.journal.done(token, state.get("text") if state.get("kind") == "text" else None)

    async def remove(self, path: str) -> None:
        token = await self.journal.before_delete(Path(path))
        await self.real.remove(path)
        self.journal.done(token)

    async def remove_dirs(self, folders: list[str]) -> None:
        await self.real.remove_dirs(folders)

    async def move(self, source: str, destination: str) -> None:
        token = await self.journal.before_move(Path(source), Path(destination))
        await self.real.move(source, destination)
        self.journal.done(token)
