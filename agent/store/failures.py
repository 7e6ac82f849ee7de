"""Why a write to the session store failed, in the words a user can act on.

SQLite reports a full disk, a file size limit and an I/O error alike ("database or disk is
full", "disk I/O error"), and after such an error a later statement may only say "cannot
rollback - no transaction is active". The cause is found by looking at the machine: the file
size limit of this process, the free space, whether the file or its folder can be written.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

# Free space below this (bytes) counts as a full disk: SQLite needs room for a few pages.
NEARLY_FULL = 1 << 20
# A file this close to the size limit has reached it (the failed write stopped at the limit).
SIZE_MARGIN = 64 << 10


def describe(exc: BaseException, path: Path) -> str:
    """`exc` (raised while writing `path`) as a cause: read-only, file too large, disk full, or
    what SQLite or the OS said, always with that original message."""
    said = str(exc) or type(exc).__name__
    if isinstance(exc, UnicodeError):
        return f"text that cannot be stored ({said})"
    cause = _os_cause(exc) or _machine_cause(exc, path)
    return f"{cause} ({said})" if cause else said


def _os_cause(exc: BaseException) -> str | None:
    number = getattr(exc, "errno", None)
    if number == errno.ENOSPC:
        return "the disk is full"
    if number == errno.EFBIG:
        return "the file is too large"
    if number in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "the store is read-only"
    return None


def _machine_cause(exc: BaseException, path: Path) -> str | None:
    name = getattr(exc, "sqlite_errorname", "") or ""
    if not isinstance(exc, sqlite3.Error):
        return None
    if name.startswith("SQLITE_READONLY") or not _writable(path):
        return "the store is read-only"
    if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or "full" in str(exc):
        if limit := _size_limit_reached(path):
            return f"the file is too large (this process may write files up to {limit} bytes)"
        if _free_bytes(path.parent) < NEARLY_FULL:
            return "the disk is full"
    return None


def _writable(path: Path) -> bool:
    if path.exists():
        return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    return os.access(path.parent, os.W_OK)


def _size_limit_reached(path: Path) -> int | None:
    """The file size limit (`ulimit -f`), when the database or its journal has reached it."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return None
    for suffix in ("", "-wal", "-journal"):
        try:
            size = os.path.getsize(f"{path}{suffix}")
        except OSError:
            continue
        if size + SIZE_MARGIN >= soft:
            return soft
    return None


def _free_bytes(folder: Path) -> int:
    try:
        stat = os.statvfs(folder)
    except OSError:
        return NEARLY_FULL  # unknown: not called full
    return stat.f_bavail * stat.f_frsize
