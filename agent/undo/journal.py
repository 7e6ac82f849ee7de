"""Per session: what each turn's file tools changed, so `/undo` can take it back.

The file tools tell the journal (through `ToolContext.changes`) right before a change, with
the text they are about to replace; the prior state is captured then, and kept once the change
is done, with the hash and size of what the tool wrote (to see later whether someone changed
the file since). A turn that ran commands (or other tools whose effects are not tracked) says so.

Bounded: a file bigger than MAX_FILE_BYTES is noted as not kept (and `/undo` says so); when the
kept states of a session pass MAX_SESSION_BYTES, or it has more than MAX_TURNS turns, the
oldest turns are forgotten. What changed since the last save is handed to the saver
(`take_unsaved`), each change once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from agent.files.disk import text_digest
from agent.tools.base import FileChanges, Safety, Tool
from agent.undo import states
from agent.undo.states import State

MAX_FILE_BYTES = 1 << 20  # one file's prior state
MAX_SESSION_BYTES = 16 << 20  # all prior states of a session
MAX_TURNS = 50  # turns remembered (those that changed files or ran commands)


@dataclass
class Change:
    """One change by a tool. `op`: write (edit_file, write_file), delete or move."""

    op: str
    path: str  # the file written or deleted; for a move, the destination
    before: State = field(default_factory=lambda: dict(states.ABSENT))
    after: str | None = None  # hash of the text the tool wrote (write only)
    after_size: int | None = None  # its size in bytes (None in records saved before it was)
    source: str | None = None  # for a move: where it came from
    made_dirs: list[str] = field(default_factory=list)  # folders the change created

    def size(self) -> int:
        return states.size_of(self.before)

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "path": self.path, "before": self.before}
        if self.after is not None:
            out["after"] = self.after
        if self.after_size is not None:
            out["afterSize"] = self.after_size
        if self.source is not None:
            out["source"] = self.source
        if self.made_dirs:
            out["madeDirs"] = self.made_dirs
        return out

    @classmethod
    def load(cls, data: dict[str, Any]) -> Change:
        return cls(
            op=data["op"],
            path=data["path"],
            before=data.get("before") or dict(states.ABSENT),
            after=data.get("after"),
            after_size=data.get("afterSize"),
            source=data.get("source"),
            made_dirs=list(data.get("madeDirs") or ()),
        )


@dataclass
class TurnChanges:
    turn: int  # numbered in the session, from 1
    changes: list[Change] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)  # tools run whose effects are not kept
    undone: bool = False
    # A rewind's (agent.rewind): what it took out of the conversation, so /undo can bring
    # it back; its `changes` are the files it restored.
    conversation: dict[str, Any] | None = None

    def size(self) -> int:
        kept = len(json.dumps(self.conversation)) if self.conversation else 0
        return sum(c.size() for c in self.changes) + kept

    @property
    def undoable(self) -> bool:
        return bool(self.changes or self.conversation) and not self.undone


def digest(text: str) -> str:
    return text_digest(text)


def text_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class UndoJournal(FileChanges):
    def __init__(self) -> None:
        self.turns: list[TurnChanges] = []
        self.current: TurnChanges | None = None
        self._next_turn = 1
        self._size = 0
        # Not saved yet: turn rows to write, changes to add, turns to drop.
        self._dirty_turns: set[int] = set()
        self._new_changes: list[tuple[int, int, Change]] = []
        self._dropped: set[int] = set()
        self.forgotten = 0  # the newest turn number dropped to keep the journal bounded

    # -- the turn's boundaries (agent.turn) ---------------------------------------------------

    def start_turn(self) -> None:
        self.current = None  # made on the first change, so quiet turns cost nothing

    def end_turn(self) -> None:
        self.current = None

    def _turn(self) -> TurnChanges:
        if self.current is None:
            self.current = TurnChanges(self._next_turn)
            self._next_turn += 1
            self.turns.append(self.current)
            self._dirty_turns.add(self.current.turn)
            self._trim()
        return self.current

    def position(self) -> tuple[int, int]:
        """Where the journal stands: changes from the `n`-th on of turn `turn`, and all the
        changes of later turns, are made after this point (agent.rewind.marks)."""
        if self.current is not None:
            return self.current.turn, len(self.current.changes)
        return self._next_turn, 0

    def ran(self, tool: Tool[Any], args: Any) -> None:
        """A call is about to run: note it when what it changes is not tracked (commands)."""
        if tool.kind in ("read", "search", "think", "edit", "delete", "move"):
            return
        if tool.kind != "execute" and tool.safety(args) is not Safety.DESTRUCTIVE:
            return
        turn = self._turn()
        if tool.name not in turn.untracked:
            turn.untracked.append(tool.name)
            self._dirty_turns.add(turn.turn)

    # -- FileChanges: told by the file tools ---------------------------------------------------

    async def before_write(self, path: Path, old: str | None) -> Change:
        def capture() -> Change:
            made = states.missing_parents(path)
            if old is not None:
                before = states.text_state(old, path, MAX_FILE_BYTES)
            else:  # nothing there, or a file that is not text (overwrite_binary)
                # (through a link: the file written is the link's target)
                before = _file_state(Path(os.path.realpath(path)))
            return Change("write", str(path), before, made_dirs=made)

        return await anyio.to_thread.run_sync(capture)

    async def before_delete(self, path: Path) -> Change:
        def capture() -> Change:
            return Change("delete", str(path), _file_state(path))

        return await anyio.to_thread.run_sync(capture)

    async def before_move(self, source: Path, destination: Path) -> Change:
        def capture() -> Change:
            made = states.missing_parents(destination)
            return Change("move", str(destination), source=str(source), made_dirs=made)

        return await anyio.to_thread.run_sync(capture)

    def done(self, token: Any, written: str | None = None) -> None:
        if not isinstance(token, Change):
            return
        if token.op == "write" and written is not None:
            token.after, token.after_size = digest(written), text_size(written)
        turn = self._turn()
        size = token.size()
        if self._size + size > MAX_SESSION_BYTES:
            self._trim(room=size)
            if self._size + size > MAX_SESSION_BYTES:
                token.before = states.lost(
                    "this session's undo history is full (the limit is "
                    f"{MAX_SESSION_BYTES >> 20} MB of earlier file contents)"
                )
                size = 0
        self._size += size
        turn.changes.append(token)
        self._new_changes.append((turn.turn, len(turn.changes) - 1, token))

    def _trim(self, room: int = 0) -> None:
        """Forget the oldest turns beyond MAX_TURNS, and while `room` more bytes do not fit."""
        while (
            self.turns
            and self.turns[0] is not self.current
            and (len(self.turns) > MAX_TURNS or self._size + room > MAX_SESSION_BYTES)
        ):
            old = self.turns.pop(0)
            self._size -= old.size()
            self.forgotten = max(self.forgotten, old.turn)
            self._dropped.add(old.turn)
            self._dirty_turns.discard(old.turn)
            self._new_changes = [c for c in self._new_changes if c[0] != old.turn]

    # -- /undo -----------------------------------------------------------------------------------

    def last_to_undo(self) -> tuple[TurnChanges | None, list[str]]:
        """The newest turn with file changes not undone yet, and the untracked tools run in the
        turns after it (and in it)."""
        untracked: list[str] = []
        for turn in reversed(self.turns):
            untracked += [t for t in turn.untracked if t not in untracked]
            if turn.undoable:
                return turn, untracked
        return None, untracked

    def mark_undone(self, turn: TurnChanges, undone: bool = True) -> None:
        turn.undone = undone
        self._dirty_turns.add(turn.turn)

    # -- rewinds (agent.rewind) ------------------------------------------------------------------

    def since(self, position: tuple[int, int]) -> tuple[list[TurnChanges], list[Change], bool]:
        """What changed files after `position` (`position()` then) and is not undone: the
        turns, their changes oldest first, and whether older turns of that span were
        forgotten (the journal is bounded)."""
        number, first = position
        turns, changes = [], []
        for turn in self.turns:
            if turn.turn < number or turn.undone or not turn.changes:
                continue
            part = turn.changes[first:] if turn.turn == number else turn.changes
            if part:
                turns.append(turn)
                changes += part
        return turns, changes, self.forgotten >= number

    def untracked_since(self, position: tuple[int, int]) -> list[str]:
        """The tools run after `position` whose changes are not tracked (commands)."""
        names: list[str] = []
        for turn in self.turns:
            if turn.turn >= position[0]:
                names += [n for n in turn.untracked if n not in names]
        return names

    def begin_rewind(self, conversation: dict[str, Any] | None) -> TurnChanges:
        """A rewind, as a turn of its own: the files it restores are its changes (so /undo
        takes them back), `conversation` what it took out of the conversation."""
        turn = TurnChanges(self._next_turn, conversation=conversation)
        self._next_turn += 1
        self.turns.append(turn)
        self.current = turn
        self._size += turn.size()
        self._dirty_turns.add(turn.turn)
        self._trim()
        return turn

    def forget(self, turn: TurnChanges) -> None:
        """A rewind that did not happen: its turn goes, and what was not saved yet is saved
        at the next step (the rows a failed write took are written again)."""
        if turn in self.turns:
            self.turns.remove(turn)
            self._size -= turn.size()
            self._dropped.add(turn.turn)
        if self.current is turn:
            self.current = None
        self._dirty_turns.update(t.turn for t in self.turns)
        self._new_changes = [
            (t.turn, seq, change) for t in self.turns for seq, change in enumerate(t.changes)
        ]

    # -- saving and restoring (agent.store) --------------------------------------------------------

    def take_unsaved(
        self,
    ) -> tuple[list[tuple[int, int, str, str | None]], list[tuple[int, int, str]], list[int]]:
        """(turn rows, change rows, dropped turns) to write since the last call, as JSON."""
        by_number = {t.turn: t for t in self.turns}
        turns = [
            (
                n,
                int(by_number[n].undone),
                json.dumps(by_number[n].untracked),
                _json(by_number[n].conversation) if by_number[n].conversation else None,
            )
            for n in sorted(self._dirty_turns)
            if n in by_number
        ]
        changes = [(n, seq, _json(c.dump())) for n, seq, c in self._new_changes]
        dropped = sorted(self._dropped)
        self._dirty_turns.clear()
        self._new_changes = []
        self._dropped.clear()
        return turns, changes, dropped

    def restore(self, rows: list[tuple[int, int, str, list[str], str | None]]) -> None:
        """Put back saved turns: (turn, undone, untracked JSON, change JSON texts in order,
        a rewind's conversation JSON or None)."""
        self.turns = []
        self._size = 0
        for number, undone, untracked, changes, conversation in sorted(rows, key=lambda r: r[0]):
            turn = TurnChanges(number, undone=bool(undone))
            try:
                names = json.loads(untracked)
                turn.untracked = [str(n) for n in names] if isinstance(names, list) else []
                turn.changes = [Change.load(json.loads(c)) for c in changes]
                taken = json.loads(conversation) if conversation else None
                turn.conversation = taken if isinstance(taken, dict) else None
            except (ValueError, KeyError, TypeError):
                continue  # a damaged row: that turn cannot be undone, the others can
            self.turns.append(turn)
            self._size += turn.size()
        # Past every saved number, damaged rows included, so no new turn mixes with one.
        self._next_turn = max((row[0] for row in rows), default=0) + 1
        self._dirty_turns.clear()
        self._new_changes = []
        self._dropped.clear()


def _file_state(path: Path) -> State:
    """The state on disk; keeping it must never stop the tool, so a file that cannot be read
    is noted as not kept."""
    try:
        return states.file_state(path, MAX_FILE_BYTES)
    except OSError as exc:
        return states.lost(f"it could not be read to keep it ({exc.strerror or exc})")


def _json(data: Any) -> str:
    """JSON text SQLite can store: a path that is not UTF-8 (its bytes kept as surrogates)
    cannot be encoded as is, so then everything is escaped."""
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data)
    return text
