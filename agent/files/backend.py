"""Text files, read and written through the editor when it offers both, else the local disk.

With both `fs.readTextFile` and `fs.writeTextFile`, the editor's buffers are the truth: reads
go through `fs/read_text_file` (unsaved changes included) and writes through
`fs/write_text_file` (so the editor sees, and can undo, them). A path missing on disk is asked
for too: an editor buffer never saved is the user's text (the editor's "not found" means new).
A client that offers only one of the two gets the local disk for both: reading the buffer but
writing the disk (or the reverse) would drop either the unsaved lines or the lines only on
disk. The disk side lives in `disk` (strict UTF-8, FIFOs refused, writes that keep links,
owner, mode and xattrs).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from agent.acp.wire import RpcError
from agent.errors import EditorRefused
from agent.files import disk
from agent.files.disk import Lines, NotText
from agent.files.seen import lines_of

RESOURCE_NOT_FOUND = -32002

ClientRequest = Callable[[str, dict[str, Any]], Awaitable[Any]]  # ask the client, await it


@dataclass
class Current:
    """A file as it is now, before a change: its text (None: it does not exist) and, when on
    the local disk, its stat."""

    text: str | None
    stat: os.stat_result | None = None


class Files:
    def __init__(
        self,
        session_id: str,
        client_request: ClientRequest,
        client_reads: bool,
        client_writes: bool,
    ) -> None:
        self._session_id = session_id
        self._request = client_request
        self.via_editor = client_reads and client_writes

    # -- reading -------------------------------------------------------------------------------

    async def read_lines(
        self, path: Path, first: int, limit: int, max_bytes: int, max_line_bytes: int
    ) -> Lines:
        """Lines first..first+limit-1, reading no more of the file than that."""
        on_disk = await anyio.to_thread.run_sync(_local_kind, path)
        if not self.via_editor:
            return await anyio.to_thread.run_sync(
                disk.read_lines, path, first, limit, max_bytes, max_line_bytes
            )
        if on_disk and await anyio.to_thread.run_sync(_binary, path):
            raise NotText(binary=True)
        # One more line than wanted tells whether the file goes on.
        text = await self._editor_read(path, {"line": first, "limit": limit + 1})
        lines = lines_of(text)
        more = len(lines) > limit
        out: list[str] = []
        size = 0
        for line in lines[:limit]:
            size += len(line.encode("utf-8", "surrogatepass")) + 1
            if size > max_bytes and out:
                more = True
                break
            out.append(line)
        encoding = None
        if on_disk and "\ufffd" in text:
            # The editor may have decoded a non-UTF-8 file with replacement characters.
            problem = await anyio.to_thread.run_sync(disk.text_problem, path)
            encoding = problem.encoding if problem else None
        total = first - 1 + len(out) if not more else None
        return Lines(out, more, total, encoding, cut=False)

    async def read_text(self, path: Path) -> str:
        """The whole text of `path`. FileNotFoundError if it does not exist; NotText if it is
        not UTF-8 text; NotAFile for FIFOs and devices."""
        current = await self.current(path)
        if current.text is None:
            raise FileNotFoundError(str(path))
        return current.text

    async def current(self, path: Path) -> Current:
        """The file as a change would find it; text None when it does not exist."""
        on_disk = await anyio.to_thread.run_sync(_local_kind, path)
        if not self.via_editor:
            if not on_disk:
                return Current(None)
            try:
                text, st = await anyio.to_thread.run_sync(disk.read_text, path)
            except FileNotFoundError:
                return Current(None)
            return Current(text, st)
        # Asked even when nothing is on disk: an unsaved buffer (a new file never saved, or
        # one deleted on disk that the editor kept open) is the user's text all the same.
        if on_disk:
            problem = await anyio.to_thread.run_sync(disk.text_problem, path)
            if problem:
                raise problem
        try:
            text = await self._editor_read(path, {})
        except FileNotFoundError:
            return Current(None)
        if not text and not on_disk:
            # Some editors answer "" for any missing file (an empty new buffer): nothing of
            # the user's to keep, and taking it for a file would refuse to create new ones.
            return Current(None)
        return Current(text)

    async def _editor_read(self, path: Path, extra: dict[str, Any]) -> str:
        params = {"sessionId": self._session_id, "path": str(path), **extra}
        try:
            result: Any = await self._request("fs/read_text_file", params)
        except RpcError as exc:
            if exc.code == RESOURCE_NOT_FOUND or not await anyio.Path(path).exists():
                raise FileNotFoundError(str(path)) from exc
            raise OSError(f"the editor could not read {path}: {exc.reason}") from exc
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise OSError(f"the editor answered fs/read_text_file for {path} without text")
        return content

    # -- writing -------------------------------------------------------------------------------

    async def write_text(self, path: Path, text: str) -> os.stat_result | None:
        """Replace the file's text; the new disk stat when written locally. WriteFailed (the
        file untouched) when the disk refuses, EditorRefused when the editor does."""
        if self.via_editor:
            params = {"sessionId": self._session_id, "path": str(path), "content": text}
            try:
                await self._request("fs/write_text_file", params)
            except RpcError as exc:
                raise EditorRefused(f"write {path}", exc.reason) from None
            return None
        return await anyio.to_thread.run_sync(disk.write_text, path, text)


def _local_kind(path: Path) -> bool:
    """Whether the path exists on the local disk as a file (symlinks followed); NotAFile for a
    FIFO, device or socket, IsADirectoryError for a folder; refused before any open."""
    try:
        disk.check_regular(path)
    except FileNotFoundError:
        return False
    return True


def _binary(path: Path) -> bool:
    fd = disk.open_regular(path)
    with open(fd, "rb", closefd=True) as f:
        return b"\0" in f.read(disk.SNIFF_BYTES)
