"""A path's state before a change, as plain JSON-able data, and putting it back on disk.

States (dicts, saved with the session):
- `{"kind": "absent"}`: nothing was there.
- `{"kind": "text", "text": ..., "mode": ...}`: a UTF-8 text file (mode None: not on disk,
  e.g. an editor buffer).
- `{"kind": "bytes", "data": <base64>, "mode": ...}`: a file that is not UTF-8 text.
- `{"kind": "link", "target": ...}`: a symbolic link (never followed).
- `{"kind": "dir", "mode": ..., "entries": [{"path": <relative>, "state": ...}, ...]}`:
  a folder and what it held, parents before children.
- `{"kind": "lost", "why": ...}`: not kept (too big, a FIFO or device...), said at /undo.

Everything here blocks: call it in a worker thread.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Any

from agent.files import disk

State = dict[str, Any]

ABSENT: State = {"kind": "absent"}


def lost(why: str) -> State:
    return {"kind": "lost", "why": why}


def size_of(state: State) -> int:
    """What keeping the state costs, in bytes (roughly what the store holds)."""
    kind = state.get("kind")
    if kind == "text":
        return len(state["text"].encode("utf-8", "surrogatepass"))
    if kind == "bytes":
        return len(state["data"])
    if kind == "link":
        return len(state["target"])
    if kind == "dir":
        return sum(size_of(e["state"]) + len(e["path"]) for e in state["entries"])
    return 0


def _megabytes(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


def text_state(text: str, path: Path, max_bytes: int) -> State:
    """The state of a file whose text the tool read (the editor's buffer when it offers fs)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return lost(
            f"it was too big to keep ({_megabytes(size)}; the limit is {_megabytes(max_bytes)})"
        )
    return {"kind": "text", "text": text, "mode": _mode(path)}


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def file_state(path: Path, max_bytes: int) -> State:
    """The state of whatever is at `path` on disk now (symlinks not followed), bounded."""
    return _capture(path, [max_bytes], [0], max_entries=MAX_TREE_ENTRIES, max_bytes=max_bytes)


MAX_TREE_ENTRIES = 1000  # files and folders kept of one deleted folder


def _capture(
    path: Path, budget: list[int], entries: list[int], *, max_entries: int, max_bytes: int
) -> State:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ABSENT
    if stat.S_ISLNK(st.st_mode):
        return {"kind": "link", "target": os.readlink(path)}
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISDIR(st.st_mode):
        out: list[dict[str, Any]] = []
        for folder, dirs, files in os.walk(path):
            dirs.sort()
            for name in [*sorted(files), *dirs]:
                entries[0] += 1
                if entries[0] > max_entries:
                    return lost(f"the folder held more than {max_entries} files and folders")
                child = Path(folder, name)
                rel = os.path.relpath(child, path)
                if name in dirs and not child.is_symlink():
                    out.append(
                        {"path": rel, "state": {"kind": "dir", "mode": _mode(child), "entries": []}}
                    )
                    continue
                state = _capture(
                    child, budget, entries, max_entries=max_entries, max_bytes=max_bytes
                )
                if state["kind"] == "lost":
                    return lost(f"{rel} in it: {state['why']}")
                out.append({"path": rel, "state": state})
        return {"kind": "dir", "mode": mode, "entries": out}
    if not stat.S_ISREG(st.st_mode):
        return lost(f"it was {disk.special_kind(st.st_mode)}")
    if st.st_size > budget[0]:
        return lost(
            f"it was too big to keep ({_megabytes(st.st_size)}; the limit is "
            f"{_megabytes(max_bytes)})"
        )
    fd = disk.open_regular(path)
    with open(fd, "rb", closefd=True) as f:
        data = f.read(budget[0] + 1)
    if len(data) > budget[0]:
        return lost(f"it grew too big to keep (the limit is {_megabytes(max_bytes)})")
    budget[0] -= len(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and "\0" not in text:
        return {"kind": "text", "text": text, "mode": mode}
    return {"kind": "bytes", "data": base64.b64encode(data).decode("ascii"), "mode": mode}


def missing_parents(path: Path) -> list[str]:
    """The folders above `path` that do not exist yet (a change creating `path` makes them),
    deepest first."""
    out: list[str] = []
    parent = path.parent
    while parent != parent.parent and not os.path.lexists(parent):
        out.append(str(parent))
        parent = parent.parent
    return out


def data_of(state: State) -> bytes:
    if state["kind"] == "text":
        return state["text"].encode("utf-8", "surrogatepass")
    return base64.b64decode(state["data"])


# -- putting back -------------------------------------------------------------------------------


def create(path: Path, state: State) -> None:
    """Make `path` hold `state` again; it must not exist (FileExistsError otherwise: nothing
    that appeared meanwhile is ever overwritten)."""
    kind = state["kind"]
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link":
        os.symlink(state["target"], path)
    elif kind == "dir":
        os.mkdir(path, 0o700)
        for entry in state["entries"]:
            rel = Path(entry["path"])
            if rel.is_absolute() or ".." in rel.parts:  # a damaged record: stay in the folder
                raise ValueError(f"refusing to re-create {rel} outside {path}")
            create(path / rel, entry["state"])
        _chmod(path, state.get("mode"), 0o755)
    elif kind in ("text", "bytes"):
        mode = state.get("mode")
        # Private until written; a state without a mode gets the usual 0666 less the umask.
        first = 0o600 if mode is not None else 0o666
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, first)
        try:
            disk.write_all(fd, data_of(state))
            os.fsync(fd)
        finally:
            os.close(fd)
        _chmod(path, mode, None)
    else:
        raise ValueError(f"cannot re-create a state of kind {kind!r}")


def restore_mode(path: Path, state: State) -> None:
    """After a text file was re-created through the editor: give it its mode back."""
    if os.path.isfile(path) and not os.path.islink(path):
        _chmod(path, state.get("mode"), None)


def _chmod(path: Path, mode: int | None, default: int | None) -> None:
    mode = default if mode is None else mode
    if mode is not None:
        with contextlib.suppress(OSError):
            os.chmod(path, mode)


def replace_bytes(path: Path, state: State) -> None:
    """Put back a file that was not text, keeping the file's identity (agent.files.disk)."""
    disk.write_bytes(path, data_of(state))


def remove_file(path: Path) -> None:
    """Delete the file a write created (never a folder). Through a link, the file the write
    created is the link's target: that goes, and the link stays as it was before."""
    target = os.path.realpath(path)
    if os.path.isdir(target):
        raise IsADirectoryError(f"{path} is a folder now")
    os.unlink(target)


def remove_empty(folders: list[str]) -> None:
    """Remove the folders a change created, deepest first, as long as they are empty."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            return


def move(source: Path, destination: Path) -> None:
    """Move back; never over something that exists (FileExistsError)."""
    import shutil

    if os.path.lexists(destination):
        raise FileExistsError(f"{destination} exists")
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(source, destination)
    except OSError as exc:
        if exc.errno != errno.EXDEV:  # another device: copy and delete
            raise
        shutil.move(source, destination)
