"""The folders the user trusts, or keeps inert, remembered in the user's own configuration.

`$XDG_CONFIG_HOME/heron/trusted-folders.toml` (`~/.config/heron/`), never in a project and
never only in a session: a decision holds for every session and every Heron process. A
decision covers its folder and everything below it, and the nearest one wins (trust `~/src`,
keep `~/src/untrusted-clone` inert). Folders are named by their real path: a path through a
symlink counts as the folder it leads to, and a folder moved elsewhere is a new folder.

    trusted = ["/home/me/src"]
    untrusted = ["/home/me/src/untrusted-clone"]

Written as Heron writes its config (owner-only, a temporary file then a rename, fsynced) under
an advisory lock, so two processes deciding at once both keep their decision. A file Heron
cannot read is never written over: the error says to fix it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agent.config import ConfigError, default_config_path, replace_private_file

log = logging.getLogger("heron.trust")

FILE_NAME = "trusted-folders.toml"
HEADER = (
    "# Folders Heron trusts (or keeps inert), by real path; a decision covers the folder and\n"
    "# everything below it, the nearest one wins. Written by /trust; edit it freely.\n"
)

# The file as last read, by its (inode, size, mtime): read again only when it changed.
_cache: dict[str, tuple[tuple[int, int, int], dict[str, bool]]] = {}


@dataclass(frozen=True)
class Remembered:
    trusted: bool
    folder: str  # the folder whose entry decides (the folder itself or one above it)


def trust_file() -> Path:
    return default_config_path().parent / FILE_NAME


def real(folder: Path | str) -> str:
    return os.path.realpath(os.path.expanduser(folder))


def remembered(folder: Path | str) -> Remembered | None:
    """The decision that covers `folder` (the nearest entry at or above it); None if none."""
    decisions = _read(trust_file(), strict=False)
    path = Path(real(folder))
    for candidate in (path, *path.parents):
        decided = decisions.get(str(candidate))
        if decided is not None:
            return Remembered(decided, str(candidate))
    return None


def remember(folder: Path | str, trusted: bool) -> None:
    """Record a decision for `folder` (replacing its own earlier one). ConfigError (with what
    to do) or OSError when it cannot be written."""
    path = trust_file()
    key = real(folder)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"cannot remember {key!r}: its name is not UTF-8") from None
    with _locked(path):
        decisions = _read(path, strict=True)
        decisions[key] = trusted
        data = _render(decisions)
        import tomllib

        tomllib.loads(data)  # never write a file Heron itself could not read back
        replace_private_file(path, data)
    _cache.pop(str(path), None)
    log.info("remembered %s as %s in %s", key, "trusted" if trusted else "untrusted", path)


def _read(path: Path, strict: bool) -> dict[str, bool]:
    """folder → trusted; a missing file is no decision. An unreadable one: ConfigError when
    `strict` (before writing), else logged and taken as no decision."""
    try:
        info = os.stat(path)
    except OSError:
        return {}
    stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
    cached = _cache.get(str(path))
    if cached is not None and cached[0] == stamp:
        return dict(cached[1])
    try:
        decisions = _parse(path)
    except ConfigError as exc:
        if strict:
            raise
        log.warning("%s; every folder counts as untrusted until it is fixed", exc)
        return {}
    _cache[str(path)] = (stamp, decisions)
    return dict(decisions)


def _parse(path: Path) -> dict[str, bool]:
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({exc}); fix or remove it") from exc
    decisions: dict[str, bool] = {}
    for name, trusted in (("untrusted", False), ("trusted", True)):
        entries = data.get(name, [])
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise ConfigError(f"{path}: `{name}` must be a list of folder paths; fix it")
        for entry in entries:
            decisions[os.path.normpath(entry)] = trusted  # in both lists: trusted wins
    return decisions


def _render(decisions: dict[str, bool]) -> str:
    def listing(trusted: bool) -> str:
        folders = sorted(f for f, t in decisions.items() if t is trusted)
        inner = "".join(f"\n  {json.dumps(f, ensure_ascii=False)}," for f in folders)
        return f"[{inner}\n]" if folders else "[]"

    return f"{HEADER}trusted = {listing(True)}\nuntrusted = {listing(False)}\n"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An advisory lock beside the file for a read-modify-write (other Heron processes)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
