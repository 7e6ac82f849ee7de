"""The session store's parts on their own: schema and migrations, the store thread, replay
folding, titles and the repair of a history cut mid-turn. End to end: test_sessions_e2e.py."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import anyio
import pytest

from agent.context.history import answer_dangling_calls
from agent.store import db
from agent.store.failures import describe
from agent.store.replay import INTERRUPTED, replay_updates
from agent.store.saver import Saver, SessionParts, storable
from agent.store.store import Store
from agent.store.titles import make_title


def row(session_id: str, updated: str = "2025-01-01T00:00:00.000000Z") -> db.SessionRow:
    return db.SessionRow(session_id, "/w", [], None, updated, updated, "ask", "m")


def test_a_new_store_gets_the_current_schema_and_reopens_cleanly(tmp_path: Path):
    path = tmp_path / "d" / "sessions.db"
    conn = db.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    db.connect(path).close()  # already migrated: nothing to do, no error


def test_a_store_from_a_newer_heron_is_refused_not_touched(tmp_path: Path):
    path = tmp_path / "sessions.db"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {db.SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(db.StoreTooNew):
        db.connect(path)


def test_save_load_and_delete(tmp_path: Path):
    conn = db.connect(tmp_path / "s.db")
    conn.execute("BEGIN IMMEDIATE")
    db.upsert_session(conn, row("a"))
    db.put_history(conn, "a", 0, ['{"role": "user", "content": "hi"}'])
    db.put_updates(conn, "a", 0, ['{"sessionUpdate": "user_message_chunk"}'])
    db.put_history(conn, "a", 0, ['{"role": "user", "content": "summary"}'], replace_from=0)
    conn.execute("COMMIT")
    stored = db.load_session(conn, "a")
    assert stored is not None
    assert stored.history == [{"role": "user", "content": "summary"}]
    assert stored.transcript == [{"sessionUpdate": "user_message_chunk"}]
    conn.execute("BEGIN IMMEDIATE")
    db.delete_session(conn, "a")
    conn.execute("COMMIT")
    assert db.load_session(conn, "a") is None
    assert conn.execute("SELECT count(*) FROM history").fetchone()[0] == 0


def _write_many(path: str, prefix: str, count: int) -> None:
    conn = db.connect(Path(path))
    for n in range(count):
        conn.execute("BEGIN IMMEDIATE")
        db.upsert_session(conn, row(f"{prefix}{n}"))
        db.put_updates(conn, f"{prefix}{n}", 0, ["{}"] * 20)
        conn.execute("COMMIT")
    conn.close()


def test_two_processes_write_at_once_without_locking_errors(tmp_path: Path):
    path = str(tmp_path / "shared.db")
    db.connect(Path(path)).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(path, p, 200)) for p in ("x", "y")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    conn = db.connect(Path(path))
    assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 400
    assert conn.execute("SELECT count(*) FROM updates").fetchone()[0] == 8000


def test_the_store_thread_keeps_order_and_reads_see_earlier_writes(tmp_path: Path):
    store = Store(tmp_path / "s.db")

    async def main() -> list[db.SessionRow]:
        for n in range(100):
            store.write(lambda conn, n=n: db.upsert_session(conn, row(f"s{n:03d}", f"t{n:03d}")))
        return await store.read(lambda conn: db.list_sessions(conn, None, None, 1000))

    rows = anyio.run(main)
    assert [r.id for r in rows] == [f"s{n:03d}" for n in range(99, -1, -1)]
    assert store.failure is None


def test_an_unopenable_store_turns_off_and_says_why(tmp_path: Path):
    (tmp_path / "file").write_text("")
    store = Store(tmp_path / "file" / "sessions.db")

    async def main() -> object:
        store.write(lambda conn: None)
        return await store.read(lambda conn: "never")

    assert anyio.run(main) is None
    assert store.failure and "cannot open" in store.failure


class Hooks:
    def __init__(self) -> None:
        self.events: list[str] = []

    def committed(self) -> None:
        self.events.append("committed")

    def aborted(self) -> None:
        self.events.append("aborted")

    def failed(self, reason: str) -> None:
        self.events.append(f"failed: {reason}")


def test_a_failing_write_fails_alone_and_the_store_stays_on(tmp_path: Path):
    store = Store(tmp_path / "s.db")
    good, bad, later = Hooks(), Hooks(), Hooks()

    def unencodable(conn: sqlite3.Connection) -> None:
        db.upsert_session(conn, row("bad\udc80"))

    async def main() -> list[db.SessionRow]:
        # Queued together: one transaction, which fails; each is then tried on its own.
        store.write(lambda conn: db.upsert_session(conn, row("a")), good)
        store.write(unencodable, bad)
        store.write(lambda conn: db.upsert_session(conn, row("b")), later)
        return await store.read(lambda conn: db.list_sessions(conn, None, None, 10))

    rows = anyio.run(main)
    assert sorted(r.id for r in rows) == ["a", "b"]
    assert store.failure is None
    assert bad.events[-2] == "aborted" and bad.events[-1].startswith("failed: text that cannot")
    assert good.events[-1] == later.events[-1] == "committed"


def test_failures_name_their_cause(tmp_path: Path):
    path = tmp_path / "s.db"
    db.connect(path).close()
    readonly = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as err:
        readonly.execute("INSERT INTO sessions (id) VALUES ('x')")
    assert describe(err.value, path).startswith("the store is read-only (")
    too_big = OSError(27, "File too large")
    assert describe(too_big, path) == "the file is too large ([Errno 27] File too large)"
    assert describe(OSError(28, "No space left on device"), path).startswith("the disk is full")
    # After SQLite rolled back by itself, a ROLLBACK would only say "no transaction is active".
    assert "rollback" not in describe(sqlite3.OperationalError("disk I/O error"), path)


def test_lone_surrogates_are_made_storable():
    assert storable("plain é 😀") == "plain é 😀"
    assert storable("caf\udce9.txt") == "caf\ufffd.txt"
    assert storable("\ud83d\ude00 and \ud83d") == "😀 and \ufffd"  # halves joined if they pair


def test_never_prompted_sessions_written_by_heron_are_pruned_after_a_while(tmp_path: Path):
    conn = db.connect(tmp_path / "s.db")
    conn.execute("BEGIN IMMEDIATE")
    db.upsert_session(conn, row("old-empty", "2025-01-01T00:00:00.000000Z"), revision=1)
    db.upsert_session(conn, row("old-prompted", "2025-01-01T00:00:00.000000Z"), revision=3)
    db.put_history(conn, "old-prompted", 0, ['{"role": "user", "content": "hi"}'])
    db.upsert_session(conn, row("new-empty", "2026-11-20T00:00:00.000000Z"), revision=1)
    db.upsert_session(conn, row("seeded", "2025-01-01T00:00:00.000000Z"))  # not by Heron
    assert db.prune_unprompted(conn, "2026-01-01T00:00:00.000000Z") == 1
    conn.execute("COMMIT")
    left = sorted(r.id for r in db.list_sessions(conn, None, None, 10))
    assert left == ["new-empty", "old-prompted", "seeded"]


def test_replay_folds_tool_calls_keeps_the_last_plan_and_fails_open_calls():
    plan = {"sessionUpdate": "plan", "entries": []}
    last_plan = {"sessionUpdate": "plan", "entries": [{"content": "x"}]}
    text = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a"}}
    transcript = [
        text,
        {"sessionUpdate": "tool_call", "toolCallId": "1", "title": "t", "status": "pending"},
        plan,
        {"sessionUpdate": "tool_call_update", "toolCallId": "1", "status": "completed"},
        {"sessionUpdate": "tool_call", "toolCallId": "2", "title": "u", "status": "pending"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "2", "status": "in_progress"},
        last_plan,
    ]
    replayed = replay_updates(transcript)
    # Stored before Heron sent message ids: given one by its place, the same at every load.
    assert replayed[0] == {**text, "messageId": "legacy-0"}
    assert replayed[1] == {
        "sessionUpdate": "tool_call",
        "toolCallId": "1",
        "title": "t",
        "status": "completed",
    }
    assert replayed[2]["status"] == "failed"
    assert replayed[2]["content"][-1]["content"]["text"] == INTERRUPTED
    assert replayed[3:] == [last_plan]
    assert transcript[1]["status"] == "pending"  # the session's own transcript is untouched


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("Fix the bug", "Fix the bug"),
        ("\n\n  First line  \nsecond line", "First line"),
        ("word " * 30, "word word word word word word word word word word word word…"),
        ("x" * 100, "x" * 60 + "…"),
    ],
)
def test_titles(prompt: str, title: str):
    assert make_title(prompt) == title


def test_a_history_cut_mid_turn_gets_answers_for_its_open_calls():
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    other = {**call, "id": "c2"}
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call, other]},
        {"role": "tool", "tool_call_id": "c2", "content": "done"},
    ]
    fixed = answer_dangling_calls(history, lambda call_id: f"lost {call_id}")
    # The missing answer goes after the ones given: a history saved step by step only grows.
    assert [m.get("tool_call_id") for m in fixed] == [None, None, "c2", "c1"]
    assert fixed[-1]["content"] == "lost c1"
    assert answer_dangling_calls(fixed, str) is fixed  # nothing left to answer


def test_only_the_calls_without_an_answer_get_one_in_each_assistant_message():
    def call(i: str) -> dict:
        return {"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}}

    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "done"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": None, "tool_calls": [call("c")]},
    ]
    fixed = answer_dangling_calls(history, lambda call_id: "cut")
    assert [(m["role"], m.get("tool_call_id")) for m in fixed] == [
        ("user", None),
        ("assistant", None),
        ("tool", "b"),
        ("tool", "a"),
        ("user", None),
        ("assistant", None),
        ("tool", "c"),
    ]
    assert history[-1]["role"] == "assistant"  # the given list is left as it was


class FakeSession:
    """A session as far as its saver sees it."""

    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.history: list[dict[str, object]] = []
        self.transcript: list[dict[str, object]] = []

    def parts(self) -> SessionParts:
        return SessionParts(
            self.id, Path("/w"), [], "t", "ask", "m", {}, self.history, self.transcript
        )

    def turn(self, words: str) -> None:
        self.history += [{"role": "user", "content": words}, {"role": "assistant", "content": "ok"}]
        self.transcript.append({"sessionUpdate": "user_message_chunk", "text": words})


def test_two_savers_of_one_session_append_after_each_other_even_through_a_compaction(
    tmp_path: Path,
):
    path = tmp_path / "s.db"
    here, there = Store(path), Store(path)  # two processes' stores
    a, b = FakeSession("s"), FakeSession("s")
    saver_a, saver_b = Saver(here), Saver(there)

    async def flush() -> None:
        await here.flush()
        await there.flush()

    async def main() -> db.StoredSession | None:
        a.turn("a1")
        saver_a.checkpoint(a.parts())
        await flush()
        stored = await there.read(lambda conn: db.load_session(conn, "s"))
        b.history, b.transcript = list(stored.history), list(stored.transcript)
        restore_saver(saver_b, stored)
        b.turn("b1")
        saver_b.checkpoint(b.parts())
        await flush()
        a.turn("a2")
        assert saver_a.checkpoint(a.parts()) == []  # the conflict is found by this write...
        await flush()
        a.history = [{"role": "user", "content": "summary"}, *a.history[-2:]]  # compaction
        a.turn("a3")
        notes = saver_a.checkpoint(a.parts())  # ... and told at the next step
        assert [note.key for note in notes] == ["moved on"]
        assert "another Heron process" in notes[0].text
        await flush()
        return await here.read(lambda conn: db.load_session(conn, "s"))

    stored = anyio.run(main)
    assert stored is not None
    said = [m["content"] for m in stored.history if m["role"] == "user"]
    # b's turn kept; a's turns after it; a's compaction replaced only a's own part
    assert said == ["a1", "b1", "summary", "a2", "a3"]
    assert [u["text"] for u in stored.transcript] == ["a1", "b1", "a2", "a3"]


def restore_saver(saver: Saver, stored: db.StoredSession) -> None:
    saver.restored(stored)
    saver.first_saved_message = stored.history[0]
    saver.last_saved_message = stored.history[-1]
