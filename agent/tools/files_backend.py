"""Text files, read and written through the editor when it offers, else the local disk.

With `fs.readTextFile` the editor's unsaved buffer is the truth, so reads go through
`fs/read_text_file`; with `fs.writeTextFile`, writes go through `fs/write_text_file` so the
editor sees (and can undo) them. Otherwise the local disk is used, and writes are atomic:
a temp file in the same folder, fsync, then rename over the original, keeping its mode.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import anyio

from agent.tools.base import ClientRequest

RESOURCE_NOT_FOUND = -32002


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
        self.client_reads = client_reads
        self.client_writes = client_writes

    async def read_text(self, path: Path) -> str:
        """The whole text of `path`. FileNotFoundError if it does not exist."""
        if self.client_reads:
            from agent.wire import RpcError

            try:
                result: Any = await self._request(
                    "fs/read_text_file", {"sessionId": self._session_id, "path": str(path)}
                )
            except RpcError as exc:
                if exc.code == RESOURCE_NOT_FOUND or not await anyio.Path(path).exists():
                    raise FileNotFoundError(str(path)) from exc
                raise OSError(f"the editor could not read {path}: {exc.message}") from exc
            content = result.get("content") if isinstance(result, dict) else None
            if not isinstance(content, str):
                raise OSError(f"the editor answered fs/read_text_file for {path} without text")
            return content
        return await anyio.to_thread.run_sync(_read_local, path)

    async def write_text(self, path: Path, text: str) -> None:
        if self.client_writes:
            await self._request(
                "fs/write_text_file",
                {"sessionId": self._session_id, "path": str(path), "content": text},
            )
            return
        await anyio.to_thread.run_sync(write_atomically, path, text)


def _read_local(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return f.read()


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so a reader sees the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".heron-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
