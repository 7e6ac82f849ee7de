"""`heron sessions`: the stored sessions, newest first; and the look-ups behind
`heron exec --continue` and `--session ID`.

It reads the agent's own SQLite store (`agent.store`), in this process and synchronously: a
listing needs no agent, and `heron exec` must know which session (and which folder) it
continues before it starts one. The file is never created here: no store means no sessions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

from agent.config import ConfigError, Settings, add_flags, load_settings
from agent.store import db
from agent.store.db import SessionRow
from agent.store.store import data_dir
from agent.terminal.trace import visible

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class StoreUnreadable(Exception):
    """The store exists but cannot be opened or read; the message says which file and why."""


def store_path(settings: Settings) -> Path:
    return data_dir(settings) / "sessions.db"


@contextlib.contextmanager
def _opened(settings: Settings) -> Iterator[sqlite3.Connection | None]:
    path = store_path(settings)
    try:
        conn = db.connect(path) if path.is_file() else None  # is_file: EACCES raises
    except (sqlite3.Error, OSError, db.StoreTooNew) as exc:
        raise StoreUnreadable(f"cannot read the session store {path}: {exc}") from exc
    if conn is None:
        yield None
        return
    try:
        yield conn
    except sqlite3.Error as exc:
        raise StoreUnreadable(f"cannot read the session store {path}: {exc}") from exc
    finally:
        conn.close()


def cwd_forms(cwd: Path) -> list[str]:
    """How a folder may have been stored: as the editor named it (normalized, symlinks kept,
    as `session/new` stores it) or fully resolved (as `heron exec` names it)."""
    named = os.path.normpath(os.path.abspath(cwd.expanduser()))
    resolved = str(Path(named).resolve())
    return [named] if resolved == named else [named, resolved]


def list_sessions(
    settings: Settings, cwd: Path | None = None, limit: int = -1, prompted: bool = False
) -> list[SessionRow]:
    """Newest first; only those in `cwd` when given; `limit` -1 means all; `prompted` only
    those with a conversation."""
    with _opened(settings) as conn:
        if conn is None:
            return []
        if cwd is None:
            return db.list_sessions(conn, None, None, limit, prompted)
        rows = [
            row
            for form in cwd_forms(cwd)
            for row in db.list_sessions(conn, form, None, limit, prompted)
        ]
    rows.sort(key=lambda row: (row.updated_at, row.id), reverse=True)
    return rows if limit < 0 else rows[:limit]


def latest_session(settings: Settings, cwd: Path) -> SessionRow | None:
    """The conversation to continue: an editor's thread opened but never prompted is not one."""
    rows = list_sessions(settings, cwd, limit=1, prompted=True)
    return rows[0] if rows else None


def find_session(settings: Settings, session_id: str) -> SessionRow | None:
    with _opened(settings) as conn:
        return None if conn is None else db.session_row(conn, session_id)


# -- `heron sessions` ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heron sessions",
        description="List the stored sessions, newest first. Continue one with "
        "`heron exec --session ID`, or the latest of a folder with `heron exec --continue`.",
    )
    parser.add_argument("--cwd", help="only the sessions of this folder")
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per session (ACP SessionInfo: sessionId, cwd, title, updatedAt)",
    )
    parser.add_argument("--limit", type=int, help="at most this many (the newest)")
    add_flags(parser, ("data_dir", "config"))
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)  # usage errors exit with 2
    if args.limit is not None and args.limit < 1:
        return _fail("--limit must be at least 1", EXIT_USAGE)
    try:
        settings = load_settings(
            {"data_dir": args.data_dir}, args.config or os.environ.get("HERON_CONFIG")
        )
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    cwd = Path(args.cwd) if args.cwd else None
    try:
        rows = list_sessions(settings, cwd, -1 if args.limit is None else args.limit)
    except StoreUnreadable as exc:
        return _fail(str(exc), EXIT_ERROR)
    try:
        if args.json:
            for row in rows:
                print(json.dumps(row.info(), ensure_ascii=False))
        else:
            print_table(rows)
        sys.stdout.flush()
    except BrokenPipeError:  # `heron sessions | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    if not rows:
        where = f" for {cwd_forms(cwd)[0]}" if cwd is not None else ""
        line = f"No stored sessions{where} yet (store: {store_path(settings)})."
        # Scripts read stdout: an empty list stays empty there.
        print(line, file=sys.stderr if args.json else sys.stdout)
    return EXIT_OK


def print_table(rows: list[SessionRow]) -> None:
    if not rows:
        return
    table = [
        tuple(printable(cell) for cell in line)
        for line in [("ID", "UPDATED", "TITLE", "CWD")]
        + [(row.id, local_time(row.updated_at), row.title or "(untitled)", row.cwd) for row in rows]
    ]
    widths = [max(len(line[i]) for line in table) for i in range(3)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        print("  ".join([*cells, line[3]]))


def local_time(stamp: str) -> str:
    """The store's UTC ISO time as local `YYYY-MM-DD HH:MM`; unparsable text as it is."""
    try:
        when = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


def printable(text: str) -> str:
    """Control characters (escape sequences, newlines, bidi overrides) from a prompt or a path
    must not drive the terminal: they are shown escaped, as in `heron exec`'s trace."""
    return visible(text, newlines=False)


def _fail(message: str, code: int) -> int:
    print(f"heron sessions: {message}", file=sys.stderr)
    return code
