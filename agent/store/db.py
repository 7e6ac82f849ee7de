"""The SQLite side of the store: schema, migrations and the queries. Synchronous on purpose:
everything here runs in the store's own thread (see `agent.store.store`), never on the event
loop.

Two Heron processes may share the file: WAL lets readers run beside a writer, every write
transaction starts with BEGIN IMMEDIATE (so it waits for the lock at once, under busy_timeout,
instead of failing when it upgrades from reading) and stays short.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_MS = 10_000

# Forward migrations: MIGRATIONS[n] takes schema version n to n + 1 (PRAGMA user_version).
MIGRATIONS: list[str] = [
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        cwd TEXT NOT NULL,
        additional_dirs TEXT NOT NULL DEFAULT '[]',
        title TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        mode TEXT,
        model TEXT
    );
    CREATE INDEX sessions_by_update ON sessions (updated_at DESC, id DESC);
    CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, id DESC);
    -- The model's view: OpenAI chat messages, in order.
    CREATE TABLE history (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    -- The editor's view: the session/update payloads sent, consecutive chunks merged.
    CREATE TABLE updates (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    """,
    """
    -- /undo (agent.undo): per turn, whether it was undone and the untracked tools it ran...
    CREATE TABLE undo_turns (
        session_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        undone INTEGER NOT NULL DEFAULT 0,
        untracked TEXT NOT NULL DEFAULT '[]',
        PRIMARY KEY (session_id, turn)
    ) WITHOUT ROWID;
    -- ... and each change's prior state (JSON, up to a MB: a rowid table holds that better).
    CREATE TABLE undo_changes (
        session_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        change TEXT NOT NULL,
        UNIQUE (session_id, turn, seq)
    );
    """,
    # The session's picks besides its mode (agent.options.state.Choices.saved), as JSON.
    """
    ALTER TABLE sessions ADD COLUMN options TEXT NOT NULL DEFAULT '{}'
    """,
    # Bumped by every save: a process that finds another number than it wrote last knows that
    # another process saved this session since (agent.store.saver).
    """
    ALTER TABLE sessions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0
    """,
    # A rewind's turn (agent.rewind): what it took out of the conversation (JSON), for /undo.
    """
    ALTER TABLE undo_turns ADD COLUMN conversation TEXT
    """,
    # The session's own answer to "trust this folder?" ("trusted" or "untrusted" for this
    # session; NULL: the user's remembered decision counts; agent.trust.state).
    """
    ALTER TABLE sessions ADD COLUMN trust TEXT
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class StoreTooNew(Exception):
    """The file was written by a newer Heron; writing to it could corrupt its data."""


@dataclass
class SessionRow:
    id: str
    cwd: str
    additional_dirs: list[str]
    title: str | None
    created_at: str
    updated_at: str
    mode: str | None
    model: str | None
    options: dict[str, Any] = field(default_factory=dict)  # the session's picks (agent.options)
    revision: int = 0  # see MIGRATIONS[3]
    trust: str | None = None  # see MIGRATIONS[5]

    def info(self) -> dict[str, Any]:
        """The session as ACP's `session/list` describes it (SessionInfo)."""
        info: dict[str, Any] = {"sessionId": self.id, "cwd": self.cwd, "updatedAt": self.updated_at}
        if self.title:
            info["title"] = self.title
        if self.additional_dirs:
            info["additionalDirectories"] = self.additional_dirs
        return info


@dataclass
class StoredSession:
    row: SessionRow
    history: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    # /undo's turns: (turn, undone, untracked JSON, change JSON texts in order, a rewind's
    # conversation JSON or None)
    undo: list[tuple[int, int, str, list[str], str | None]] = field(default_factory=list)


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the database; raises sqlite3/OS errors."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode: a power cut may lose the last commits, a killed process loses none.
        conn.execute("PRAGMA synchronous = NORMAL")
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise StoreTooNew(f"schema version {version}, this Heron knows up to {SCHEMA_VERSION}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated while we waited for the lock.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step].split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# -- writes (called inside a transaction) ------------------------------------------------------


def upsert_session(conn: sqlite3.Connection, row: SessionRow, revision: int = 0) -> None:
    """Insert or update the row; a title once given is kept when `row` has none."""
    conn.execute(
        """INSERT INTO sessions (id, cwd, additional_dirs, title, created_at, updated_at, mode,
                                 model, options, revision, trust)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET cwd = excluded.cwd,
               additional_dirs = excluded.additional_dirs,
               title = coalesce(excluded.title, sessions.title),
               updated_at = excluded.updated_at, mode = excluded.mode, model = excluded.model,
               options = excluded.options, revision = excluded.revision,
               trust = excluded.trust""",
        (
            row.id,
            row.cwd,
            json.dumps(row.additional_dirs),
            row.title,
            row.created_at,
            row.updated_at,
            row.mode,
            row.model,
            json.dumps(row.options),
            revision,
            row.trust,
        ),
    )


def revision(conn: sqlite3.Connection, session_id: str) -> int | None:
    """The session's revision in the store; None when it is not there."""
    found = conn.execute("SELECT revision FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if found is None else found[0]


def stored_lengths(conn: sqlite3.Connection, session_id: str) -> tuple[int, int]:
    """How many history messages and transcript entries the store holds (their next seq)."""
    history, updates = (
        conn.execute(
            f"SELECT coalesce(max(seq) + 1, 0) FROM {table} WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
        for table in ("history", "updates")
    )
    return history, updates


def prune_unprompted(conn: sqlite3.Connection, before: str) -> int:
    """Forget sessions opened by `session/new` but never prompted (no history, no transcript)
    and not touched since `before`. Only rows a Heron wrote (revision > 0) are candidates:
    rows put there by other means are left alone."""
    return conn.execute(
        """DELETE FROM sessions WHERE updated_at < ? AND revision > 0
           AND NOT EXISTS (SELECT 1 FROM history WHERE session_id = sessions.id)
           AND NOT EXISTS (SELECT 1 FROM updates WHERE session_id = sessions.id)""",
        (before,),
    ).rowcount


def put_history(
    conn: sqlite3.Connection,
    session_id: str,
    start: int,
    messages: list[str],
    replace_from: int | None = None,
) -> None:
    """Write messages (JSON text) from position `start`; `replace_from` first drops every
    message from that position on."""
    if replace_from is not None:
        conn.execute(
            "DELETE FROM history WHERE session_id = ? AND seq >= ?", (session_id, replace_from)
        )
    conn.executemany(
        "INSERT OR REPLACE INTO history (session_id, seq, message) VALUES (?, ?, ?)",
        [(session_id, start + i, m) for i, m in enumerate(messages)],
    )


def put_updates(conn: sqlite3.Connection, session_id: str, start: int, payloads: list[str]) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO updates (session_id, seq, payload) VALUES (?, ?, ?)",
        [(session_id, start + i, p) for i, p in enumerate(payloads)],
    )


def put_undo(
    conn: sqlite3.Connection,
    session_id: str,
    turns: list[tuple[int, int, str, str | None]],
    changes: list[tuple[int, int, str]],
    dropped: list[int],
) -> None:
    """Upsert undo turn rows (turn, undone, untracked, conversation), add change rows (turn,
    seq, change), and forget dropped turns."""
    for turn in dropped:
        conn.execute("DELETE FROM undo_turns WHERE session_id = ? AND turn = ?", (session_id, turn))
        conn.execute(
            "DELETE FROM undo_changes WHERE session_id = ? AND turn = ?", (session_id, turn)
        )
    conn.executemany(
        """INSERT INTO undo_turns (session_id, turn, undone, untracked, conversation)
           VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (session_id, turn) DO UPDATE SET undone = excluded.undone,
               untracked = excluded.untracked, conversation = excluded.conversation""",
        [(session_id, *row) for row in turns],
    )
    conn.executemany(
        "INSERT OR REPLACE INTO undo_changes (session_id, turn, seq, change) VALUES (?, ?, ?, ?)",
        [(session_id, *row) for row in changes],
    )


def replace_updates(conn: sqlite3.Connection, session_id: str, payloads: list[str]) -> None:
    """The session's whole transcript, in place of the stored one."""
    conn.execute("DELETE FROM updates WHERE session_id = ?", (session_id,))
    put_updates(conn, session_id, 0, payloads)


def delete_session(conn: sqlite3.Connection, session_id: str) -> None:
    for table, column in (
        ("history", "session_id"),
        ("updates", "session_id"),
        ("undo_turns", "session_id"),
        ("undo_changes", "session_id"),
        ("sessions", "id"),
    ):
        conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (session_id,))


# -- reads ---------------------------------------------------------------------------------------


def load_session(conn: sqlite3.Connection, session_id: str) -> StoredSession | None:
    conn.execute("BEGIN")  # one snapshot for the three reads
    try:
        found = conn.execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if found is None:
            return None
        stored = StoredSession(_row(found))
        stored.history = _json_list(
            conn, "SELECT message FROM history WHERE session_id = ? ORDER BY seq", session_id
        )
        stored.transcript = _json_list(
            conn, "SELECT payload FROM updates WHERE session_id = ? ORDER BY seq", session_id
        )
        stored.undo = _undo_turns(conn, session_id)
        return stored
    finally:
        conn.execute("COMMIT")


def list_sessions(
    conn: sqlite3.Connection,
    cwd: str | None,
    after: tuple[str, str] | None,
    limit: int,
    prompted: bool = False,
) -> list[SessionRow]:
    """Newest first; `after` is the (updated_at, id) of the last row of the previous page;
    `prompted` leaves out the sessions without a message yet."""
    where: list[str] = []
    args: list[Any] = []
    if prompted:
        where.append("EXISTS (SELECT 1 FROM history WHERE session_id = sessions.id)")
    if cwd is not None:
        where.append("cwd = ?")
        args.append(cwd)
    if after is not None:
        where.append("(updated_at, id) < (?, ?)")
        args.extend(after)
    sql = f"SELECT {_COLUMNS} FROM sessions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
    args.append(limit)
    return [_row(r) for r in conn.execute(sql, args)]


def _undo_turns(
    conn: sqlite3.Connection, session_id: str
) -> list[tuple[int, int, str, list[str], str | None]]:
    changes: dict[int, list[str]] = {}
    for turn, change in conn.execute(
        "SELECT turn, change FROM undo_changes WHERE session_id = ? ORDER BY turn, seq",
        (session_id,),
    ):
        changes.setdefault(turn, []).append(change)
    return [
        (turn, undone, untracked, changes.get(turn, []), conversation)
        for turn, undone, untracked, conversation in conn.execute(
            """SELECT turn, undone, untracked, conversation FROM undo_turns
               WHERE session_id = ? ORDER BY turn""",
            (session_id,),
        )
    ]


def session_row(conn: sqlite3.Connection, session_id: str) -> SessionRow | None:
    """One session's row, without its history (`heron exec --session`)."""
    found = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if found is None else _row(found)


def _json_list(conn: sqlite3.Connection, sql: str, session_id: str) -> list[Any]:
    # One parse of the joined rows: much less per-row overhead than thousands of json.loads.
    return json.loads("[" + ",".join(text for (text,) in conn.execute(sql, (session_id,))) + "]")


_COLUMNS = (
    "id, cwd, additional_dirs, title, created_at, updated_at, mode, model, options, revision, trust"
)


def _row(r: tuple[Any, ...]) -> SessionRow:
    dirs, options = _json_or(r[2], list), _json_or(r[8], dict)
    trust = r[10] if isinstance(r[10], str) else None
    return SessionRow(r[0], r[1], dirs, r[3], r[4], r[5], r[6], r[7], options, r[9], trust)


def _json_or(text: str, kind: type) -> Any:
    """A JSON column, or an empty `kind` if it is not what it should be."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return kind()
    return value if isinstance(value, kind) else kind()
