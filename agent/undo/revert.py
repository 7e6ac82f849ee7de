"""Reverting one turn's changes, newest first, never over a file changed since.

The same steps run twice: first against `Simulated` files (what the preview and the permission
question show, nothing written), then, once allowed, against the `Real` ones, where every step
checks the file again right before writing. The turn's changes are taken back one at a time,
newest first: a write is reverted only while the file holds exactly what that write left (hash
and size), so the first step compares with the text the turn wrote last, and a change someone
made between two of the turn's edits stops the walk there (the later edits go back, the
earlier ones and that change stay). A deleted path is re-created only when nothing is there
again (an editor buffer that still holds just what was deleted does not count); a move goes
back only when the destination is still there and the source is free. Once a step of a path is
left as it is, the turn's earlier changes of that path are too. Everything left is reported:
an undo never loses anyone's edit.

Text goes through the session's `Files` (the editor's fs/write_text_file when it offers it,
else the disk with agent.files.disk's care for links, owner and mode); what ACP cannot do (delete,
move, files that are not text, links, folders) is done on the local disk, like the tools do.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio

from agent.acp.protocol import ContentItem, DiffItem, ToolCallContent
from agent.errors import EditorRefused
from agent.files.backend import Files
from agent.files.disk import NotAFile, NotText, WriteFailed
from agent.files.paths import display_path, printable
from agent.undo import states
from agent.undo.journal import Change, digest, text_size
from agent.undo.states import State

log = logging.getLogger("heron.undo")


@dataclass(frozen=True)
class Look:
    """A path as it is now (or will be, in a simulation)."""

    exists: bool
    text: str | None = None  # None: missing, a folder, or not text
    digest: str | None = None
    folder: bool = False
    size: int | None = None  # of the text, in bytes
    unsaved: bool = False  # only an editor buffer: nothing on disk


GONE = Look(False)


def text_look(text: str, unsaved: bool = False) -> Look:
    return Look(True, text, digest(text), size=text_size(text), unsaved=unsaved)


def look_of(state: State) -> Look:
    kind = state["kind"]
    if kind == "absent":
        return GONE
    if kind == "text":
        return text_look(state["text"])
    return Look(True, folder=kind == "dir")


def holds(look: Look, digest_: str | None, size: int | None) -> bool:
    """Whether the path holds exactly the text with that hash (and size, when known)."""
    return digest_ is not None and look.digest == digest_ and size in (None, look.size)


class FilesLike(Protocol):
    async def look(self, path: str) -> Look: ...
    async def put_text(self, path: str, text: str) -> None: ...
    async def put_bytes(self, path: str, state: State) -> None: ...
    async def create(self, path: str, state: State) -> None: ...
    async def remove(self, path: str) -> None: ...
    async def remove_dirs(self, folders: list[str]) -> None: ...
    async def move(self, source: str, destination: str) -> None: ...


class Real:
    """The files themselves, through the session's `Files` for text."""

    def __init__(self, files: Files) -> None:
        self.files = files

    async def look(self, path: str) -> Look:
        try:
            current = await self.files.current(Path(path))
        except IsADirectoryError:
            return Look(True, folder=True)
        except (NotText, NotAFile):
            return Look(True)
        on_disk = await anyio.to_thread.run_sync(os.path.lexists, path)
        if current.text is None:
            return Look(on_disk)
        return text_look(current.text, unsaved=not on_disk)

    async def put_text(self, path: str, text: str) -> None:
        await self.files.write_text(Path(path), text)

    async def put_bytes(self, path: str, state: State) -> None:
        await anyio.to_thread.run_sync(states.replace_bytes, Path(path), state)

    async def create(self, path: str, state: State) -> None:
        if state["kind"] == "text" and self.files.via_editor:
            if await anyio.to_thread.run_sync(os.path.lexists, path):
                raise FileExistsError(f"{path} exists")
            await self.files.write_text(Path(path), state["text"])
            await anyio.to_thread.run_sync(states.restore_mode, Path(path), state)
            return
        await anyio.to_thread.run_sync(states.create, Path(path), state)

    async def remove(self, path: str) -> None:
        await anyio.to_thread.run_sync(states.remove_file, Path(path))

    async def remove_dirs(self, folders: list[str]) -> None:
        await anyio.to_thread.run_sync(states.remove_empty, folders)

    async def move(self, source: str, destination: str) -> None:
        await anyio.to_thread.run_sync(states.move, Path(source), Path(destination))


class Simulated:
    """The real files seen through the steps taken so far; nothing is written."""

    def __init__(self, real: Real) -> None:
        self.real = real
        self.overlay: dict[str, Look] = {}
        # Moves taken, oldest first: ("vacated", path) and ("from", path, real path).
        self.moves: list[tuple[str, ...]] = []

    def _real_path(self, path: str) -> str | None:
        for move in reversed(self.moves):
            if path == move[1] or path.startswith(move[1].rstrip("/") + "/"):
                return None if move[0] == "vacated" else move[2] + path[len(move[1]) :]
        return path

    async def look(self, path: str) -> Look:
        if path in self.overlay:
            return self.overlay[path]
        real = self._real_path(path)
        return GONE if real is None else await self.real.look(real)

    async def put_text(self, path: str, text: str) -> None:
        self.overlay[path] = text_look(text)

    async def put_bytes(self, path: str, state: State) -> None:
        self.overlay[path] = Look(True)

    async def create(self, path: str, state: State) -> None:
        self.overlay[path] = look_of(state)
        for entry in state.get("entries") or ():
            self.overlay[os.path.join(path, entry["path"])] = look_of(entry["state"])

    async def remove(self, path: str) -> None:
        self.overlay[path] = GONE

    async def remove_dirs(self, folders: list[str]) -> None:
        return None

    async def move(self, source: str, destination: str) -> None:
        real = self._real_path(source)
        prefix = source.rstrip("/") + "/"
        for key in [k for k in self.overlay if k == source or k.startswith(prefix)]:
            self.overlay[destination + key[len(source) :]] = self.overlay.pop(key)
        self.moves.append(("vacated", source))
        if real is not None:
            self.moves.append(("from", destination, real))
        self.overlay[source] = GONE


@dataclass
class Outcome:
    """What became of one change: reverted or left as it is, and why."""

    path: str  # as shown to the user
    reverted: bool
    note: str  # what was done, or why not
    diff: DiffItem | None = None
    will: str = ""  # what will be done (the preview's words); empty: as `note`

    def content(self, preview: bool) -> list[ToolCallContent]:
        """What the editor shows: the diff, with words for what a diff does not say."""
        words = (self.will or self.note) if preview else self.note
        if self.diff is None:
            return [ContentItem.of(words)]
        if self.reverted and self.diff.new_text == "" and self.diff.old_text is not None:
            return [ContentItem.of(words), self.diff]  # a deletion, not an emptied file
        return [self.diff]


def collapse(changes: list[Change]) -> list[Change]:
    """Writes to one path in a row become one (the first's prior state, the last's result)
    where each started from exactly the text the one before it wrote. Anything between them
    (the user typing, a delete or move touching the path) keeps them apart: then each is
    reverted in turn, and the walk back stops at that change."""
    moved = [p for c in changes if c.op != "write" for p in (c.path, c.source) if p]

    def touched(path: str) -> bool:
        return any(_within(path, p) for p in moved)

    out: list[Change | None] = []
    where: dict[str, int] = {}
    for change in changes:
        if change.op == "write" and not touched(change.path):
            earlier = out[where[change.path]] if change.path in where else None
            if earlier is not None and _continues(earlier, change):
                out[where[change.path]] = None
                change = Change(
                    "write",
                    change.path,
                    earlier.before,
                    change.after,
                    change.after_size,
                    made_dirs=earlier.made_dirs,
                )
            where[change.path] = len(out)
        out.append(change)
    return [c for c in out if c is not None]


def _continues(earlier: Change, later: Change) -> bool:
    """Whether `later` started from exactly the text `earlier` wrote."""
    before = later.before
    return before["kind"] == "text" and holds(
        text_look(before["text"]), earlier.after, earlier.after_size
    )


def _within(path: str, other: str) -> bool:
    return path == other or path.startswith(other.rstrip("/") + "/")


async def revert(changes: list[Change], files: FilesLike, cwd: Path) -> list[Outcome]:
    """Revert a turn's changes, newest first; one outcome per change reverted or left (a
    change behind one left as it is is not reported again)."""
    outcomes = []
    reverted: set[str] = set()  # paths of which a later change was taken back
    left: set[str] = set()  # paths of which a change was left as it is
    for change in reversed(collapse(changes)):
        shown = display_path(Path(change.path), cwd)
        paths = [p for p in (change.path, change.source) if p]
        if any(p in left for p in paths):
            # The turn's later change of this path stays, so this earlier one stays too:
            # reverting it would take back what that change was made on.
            left.update(paths)
            if change.op == "move":
                source = display_path(Path(change.source or ""), cwd)
                note = f"{shown} was not moved back to {source}: it changed since the turn."
                outcomes.append(Outcome(shown, False, note))
            continue
        try:
            outcome = await _revert(change, files, cwd, shown, change.path in reverted)
        except (OSError, WriteFailed) as exc:
            outcome = Outcome(shown, False, f"{shown} could not be reverted: {exc}.")
        except EditorRefused as exc:
            outcome = Outcome(shown, False, f"{shown} could not be reverted: {exc.for_user}.")
        except Exception as exc:  # a damaged record...: the rest goes on
            log.warning("reverting %s failed", change.path, exc_info=True)
            outcome = Outcome(shown, False, f"{shown} could not be reverted: {exc}.")
        (reverted if outcome.reverted else left).update(paths)
        outcomes.append(outcome)
    return outcomes


async def _revert(change: Change, files: FilesLike, cwd: Path, shown: str, partly: bool) -> Outcome:
    """Revert one change; `partly`: a later change of the same path was reverted already."""
    before = change.before
    path = change.path
    if change.op == "move":
        assert change.source is not None
        source = display_path(Path(change.source), cwd)
        if not (await files.look(path)).exists:
            return Outcome(
                shown, False, f"{shown} is gone since, so it was not moved back to {source}."
            )
        if (await files.look(change.source)).exists:
            return Outcome(
                shown, False, f"{source} exists again, so {shown} was not moved back over it."
            )
        await files.move(path, change.source)
        await files.remove_dirs(change.made_dirs)
        return Outcome(
            shown, True, f"Moved {shown} back to {source}.", will=f"Move {shown} back to {source}."
        )
    if before["kind"] == "lost":
        verb = "re-created" if change.op == "delete" else "reverted"
        return Outcome(shown, False, f"{shown} was not {verb}: {before['why']}.")
    now = await files.look(path)
    if change.op == "delete":
        if now.unsaved and not (before["kind"] == "text" and now.text == before["text"]):
            return Outcome(
                shown,
                False,
                f"{shown} has unsaved text in the editor that is not what was deleted, so it "
                "was not re-created over it.",
            )
        if now.exists and not now.unsaved:
            return Outcome(shown, False, f"{shown} exists again, so it was not re-created over it.")
        await files.create(path, before)
        if before["kind"] == "text":
            diff = DiffItem(path=printable(path), old_text=None, new_text=before["text"])
            return Outcome(shown, True, f"Re-created {shown}.", diff, f"Re-create {shown}.")
        what = {"dir": "the folder ", "link": "the link "}.get(before["kind"], "")
        return Outcome(shown, True, f"Re-created {what}{shown}.", will=f"Re-create {what}{shown}.")
    if not holds(now, change.after, change.after_size):
        if partly:
            return Outcome(
                shown,
                False,
                f"{shown} changed between that turn's edits (not by Heron), so only the edits "
                "after that change went back; the ones before it were not reverted, to keep it.",
            )
        since = "was deleted" if not now.exists else "changed"
        return Outcome(shown, False, f"{shown} {since} since the turn; not reverted.")
    if before["kind"] == "absent":
        await files.remove(path)
        await files.remove_dirs(change.made_dirs)
        diff = DiffItem(path=printable(path), old_text=now.text, new_text="")
        return Outcome(
            shown,
            True,
            f"Deleted {shown}, which that turn created.",
            diff,
            f"Delete {shown}, which that turn created.",
        )
    if before["kind"] == "text":
        await files.put_text(path, before["text"])
        diff = DiffItem(path=printable(path), old_text=now.text, new_text=before["text"])
        return Outcome(shown, True, f"Reverted {shown}.", diff, f"Revert {shown}.")
    await files.put_bytes(path, before)
    return Outcome(
        shown,
        True,
        f"Put back the earlier bytes of {shown} (not text).",
        will=f"Put back the earlier bytes of {shown} (not text).",
    )
