"""agent.undo's parts on their own: the journal's bounds and saving, prior states on disk, and
the preview's simulation. End to end (a real heron, /undo): test_undo_e2e.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.files.backend import Files
from agent.files.disk import text_digest
from agent.store import db
from agent.tools.base import Safety
from agent.undo import journal as journal_module
from agent.undo import revert as revert_module
from agent.undo import states
from agent.undo.journal import UndoJournal
from agent.undo.revert import Real, Simulated, collapse, revert


class FakeTool:
    def __init__(self, name: str, kind: str, safety: Safety) -> None:
        self.name, self.kind, self._safety = name, kind, safety

    def safety(self, args: Any) -> Safety:
        return self._safety


BASH = FakeTool("bash", "execute", Safety.DESTRUCTIVE)


def write(journal: UndoJournal, path: Path, old: str | None, new: str) -> None:
    """What the file tools do: tell the journal, change the file, say it is done."""

    async def go() -> None:
        token = await journal.before_write(path, old)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new)
        journal.done(token, new)

    anyio.run(go)


def local_files() -> Files:
    async def no_client(method: str, params: dict[str, Any]) -> Any:
        raise AssertionError(f"no client: {method}")

    return Files("s", no_client, False, False)


def test_a_turn_keeps_prior_text_and_the_hash_of_what_was_written(tmp_path: Path):
    journal = UndoJournal()
    journal.start_turn()
    assert journal.turns == []  # a quiet turn costs nothing
    journal.end_turn()
    journal.start_turn()
    path = tmp_path / "a.txt"
    path.write_text("one\n")
    write(journal, path, "one\n", "two\n")
    journal.ran(FakeTool("read_file", "read", Safety.READ_ONLY), None)
    journal.ran(FakeTool("fetch", "fetch", Safety.NETWORK), None)
    journal.ran(BASH, None)
    journal.end_turn()
    (turn,) = journal.turns
    (change,) = turn.changes
    assert change.before["text"] == "one\n" and change.after == text_digest("two\n")
    assert turn.untracked == ["bash"]
    found, untracked = journal.last_to_undo()
    assert found is turn and untracked == ["bash"]


def test_the_oldest_turns_go_when_the_session_budget_is_full(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(journal_module, "MAX_SESSION_BYTES", 250)
    journal = UndoJournal()
    for n in range(3):
        journal.start_turn()
        path = tmp_path / f"f{n}.txt"
        write(journal, path, "x" * 100, "y")
        journal.end_turn()
    assert [t.turn for t in journal.turns] == [2, 3]
    turns, changes, dropped = journal.take_unsaved()
    assert dropped == [1]
    assert [t[0] for t in turns] == [2, 3] and [c[0] for c in changes] == [2, 3]
    # One turn bigger than the whole budget: what does not fit is said, not kept.
    journal.start_turn()
    write(journal, tmp_path / "big1.txt", "z" * 200, "y")
    write(journal, tmp_path / "big2.txt", "z" * 200, "y")
    turn = journal.turns[-1]
    assert [t.turn for t in journal.turns] == [4]
    assert turn.changes[0].before["kind"] == "text"
    assert turn.changes[1].before["kind"] == "lost"
    assert "undo history is full" in turn.changes[1].before["why"]


def test_at_most_max_turns_are_remembered(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(journal_module, "MAX_TURNS", 3)
    journal = UndoJournal()
    for _ in range(5):
        journal.start_turn()
        journal.ran(BASH, None)
        journal.end_turn()
    assert [t.turn for t in journal.turns] == [3, 4, 5]


def test_a_file_bigger_than_the_limit_is_noted_not_kept(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(journal_module, "MAX_FILE_BYTES", 10)
    journal = UndoJournal()
    journal.start_turn()
    write(journal, tmp_path / "a.txt", "more than ten bytes", "b")
    change = journal.turns[0].changes[0]
    assert change.before["kind"] == "lost" and "too big to keep" in change.before["why"]


def test_journal_round_trips_through_the_store(tmp_path: Path):
    journal = UndoJournal()
    journal.start_turn()
    odd = Path(os.fsencode(tmp_path / "caf\xe9").decode("utf-8", "surrogateescape") + "\udcff")
    write(journal, tmp_path / "a.txt", "one\n", "two\n")
    write(journal, odd, None, "new\n")  # a file name that is not UTF-8
    journal.ran(BASH, None)
    journal.end_turn()
    journal.mark_undone(journal.turns[0])

    conn = db.connect(tmp_path / "s.db")
    row = db.SessionRow("s", "/w", [], None, "t", "t", "ask", "m")

    def save() -> None:
        conn.execute("BEGIN IMMEDIATE")
        db.upsert_session(conn, row)
        db.put_undo(conn, "s", *journal.take_unsaved())
        conn.execute("COMMIT")

    save()
    stored = db.load_session(conn, "s")
    assert stored is not None
    back = UndoJournal()
    back.restore(stored.undo)
    (turn,) = back.turns
    assert turn.undone and turn.untracked == ["bash"]
    assert [c.path for c in turn.changes] == [str(tmp_path / "a.txt"), str(odd)]
    assert turn.changes[0].before["text"] == "one\n"
    back.start_turn()
    write(back, tmp_path / "b.txt", None, "b\n")
    assert back.turns[-1].turn == 2  # numbering goes on after the restored turns

    # Dropped turns leave the store; deleting the session removes its undo rows.
    journal._dropped.add(1)
    save()
    stored = db.load_session(conn, "s")
    assert stored is not None and stored.undo == []
    conn.execute("BEGIN IMMEDIATE")
    db.put_undo(conn, "s", *back.take_unsaved())
    db.delete_session(conn, "s")
    conn.execute("COMMIT")
    assert conn.execute("SELECT count(*) FROM undo_changes").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM undo_turns").fetchone()[0] == 0


def test_a_damaged_row_loses_only_its_own_turn():
    journal = UndoJournal()
    good = '{"op": "write", "path": "/w/a", "before": {"kind": "absent"}, "after": "h"}'
    journal.restore([(1, 0, "[]", ["{not json"], None), (2, 0, '["bash"]', [good], None)])
    assert [t.turn for t in journal.turns] == [2]


def test_folder_states_are_bounded_and_refuse_special_files(tmp_path: Path, monkeypatch):
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "a.txt").write_text("a")
    (tree / "bin").write_bytes(b"\x00\x01")
    (tree / "link").symlink_to("sub/a.txt")
    state = states.file_state(tree, 1 << 20)
    assert state["kind"] == "dir"
    kinds = {e["path"]: e["state"]["kind"] for e in state["entries"]}
    assert kinds == {"bin": "bytes", "link": "link", "sub": "dir", "sub/a.txt": "text"}
    copy = tmp_path / "copy"
    states.create(copy, state)
    assert (copy / "sub" / "a.txt").read_text() == "a"
    assert os.readlink(copy / "link") == "sub/a.txt"
    with pytest.raises(FileExistsError):  # never over something that is there
        states.create(copy / "bin", {"kind": "bytes", "data": "", "mode": None})

    escape = {"kind": "dir", "mode": None, "entries": [{"path": "../out", "state": state}]}
    with pytest.raises(ValueError):  # a damaged record never writes outside its folder
        states.create(tmp_path / "evil", escape)
    assert not (tmp_path / "out").exists()

    os.mkfifo(tree / "fifo")
    state = states.file_state(tree, 1 << 20)
    assert state["kind"] == "lost" and "FIFO" in state["why"]
    os.unlink(tree / "fifo")
    monkeypatch.setattr(states, "MAX_TREE_ENTRIES", 2)
    assert states.file_state(tree, 1 << 20)["kind"] == "lost"
    assert states.file_state(tree, 1)["kind"] == "lost"  # more bytes than the limit


def test_the_preview_simulates_without_writing_and_matches_the_real_run(tmp_path: Path):
    journal = UndoJournal()
    journal.start_turn()
    src, dst = tmp_path / "pkg", tmp_path / "out" / "pkg"
    src.mkdir()
    (src / "m.py").write_text("1\n")
    write(journal, src / "m.py", "1\n", "2\n")

    async def move() -> None:
        token = await journal.before_move(src, dst)
        dst.parent.mkdir()
        src.rename(dst)
        journal.done(token)

    anyio.run(move)
    write(journal, dst / "m.py", "2\n", "3\n")
    write(journal, dst / "new.py", None, "new\n")
    changes = journal.turns[0].changes
    real = Real(local_files())

    preview = anyio.run(revert, changes, Simulated(real), tmp_path)
    assert (dst / "m.py").read_text() == "3\n" and not src.exists()  # nothing written
    done = anyio.run(revert, changes, real, tmp_path)
    assert [(o.reverted, o.note) for o in done] == [(o.reverted, o.note) for o in preview]
    assert all(o.reverted for o in done)
    assert (src / "m.py").read_text() == "1\n"
    assert not (tmp_path / "out").exists() and not (src / "new.py").exists()


def test_a_file_that_cannot_be_read_is_noted_and_the_change_goes_on(tmp_path: Path, monkeypatch):
    path = tmp_path / "secret.bin"
    path.write_bytes(b"\x00")

    def unreadable(path: Path, max_bytes: int) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(states, "file_state", unreadable)  # (root reads any file: no chmod)
    journal = UndoJournal()
    journal.start_turn()

    async def go() -> Any:
        return await journal.before_delete(path)

    change = anyio.run(go)
    assert change.before["kind"] == "lost" and "could not be read" in change.before["why"]


def test_a_file_created_through_a_link_goes_and_the_link_stays(tmp_path: Path):
    link = tmp_path / "link.txt"
    link.symlink_to("target.txt")  # dangling: the write creates the target
    journal = UndoJournal()
    journal.start_turn()
    write(journal, link, None, "through the link\n")
    assert (tmp_path / "target.txt").read_text() == "through the link\n"
    outcomes = anyio.run(revert, journal.turns[0].changes, Real(local_files()), tmp_path)
    assert [o.reverted for o in outcomes] == [True]
    assert not (tmp_path / "target.txt").exists()
    assert os.readlink(link) == "target.txt"


def test_writes_merge_only_where_each_started_from_what_the_last_wrote(tmp_path: Path):
    journal = UndoJournal()
    journal.start_turn()
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    write(journal, a, "1\n", "2\n")
    write(journal, a, "2\n", "3\n")  # follows on: one step with the one before
    write(journal, b, "x\n", "y\n")
    write(journal, b, "y and the user's line\n", "z\n")  # someone typed in between: two steps
    merged = collapse(journal.turns[0].changes)
    assert [(c.path, c.before.get("text")) for c in merged] == [
        (str(a), "1\n"),
        (str(b), "x\n"),
        (str(b), "y and the user's line\n"),
    ]
    assert merged[0].after == text_digest("3\n") and merged[0].after_size == 2

    b.write_text("z\n")
    preview = anyio.run(revert, journal.turns[0].changes, Simulated(Real(local_files())), tmp_path)
    done = anyio.run(revert, journal.turns[0].changes, Real(local_files()), tmp_path)
    assert [(o.reverted, o.note) for o in done] == [(o.reverted, o.note) for o in preview]
    assert [o.reverted for o in done] == [True, False, True]
    assert b.read_text() == "y and the user's line\n" and a.read_text() == "1\n"
    assert "changed between that turn's edits" in done[1].note


def test_a_same_hash_other_size_counts_as_changed(tmp_path: Path, monkeypatch):
    journal = UndoJournal()
    journal.start_turn()
    a = tmp_path / "a.txt"
    write(journal, a, "1\n", "2\n")
    a.write_text("2 and more\n")
    (change,) = journal.turns[0].changes
    change.after = "same"  # a hash collision: every text hashes alike
    monkeypatch.setattr(revert_module, "digest", lambda text: "same")
    (outcome,) = anyio.run(revert, [change], Real(local_files()), tmp_path)
    assert not outcome.reverted and "a.txt changed since the turn" in outcome.note
    assert a.read_text() == "2 and more\n"
