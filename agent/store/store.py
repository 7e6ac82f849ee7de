"""The store as the rest of Heron sees it: one thread owns the SQLite connection and runs
queued jobs in order; the event loop only queues them (writes) or awaits them (reads).

Nothing is imported or opened until the first job, which comes after the `initialize` answer.
Writes queued together run in one transaction, so a burst of step boundaries costs one commit.
If the database cannot be opened or written, the store turns itself off: `failure` says why
(once on stderr), writes are dropped and reads find nothing, and Heron goes on in memory.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import sqlite3

    from agent.config import Settings

log = logging.getLogger("heron.store")

Job = Callable[["sqlite3.Connection"], Any]


def data_dir(settings: Settings) -> Path:
    """`data_dir` setting, else $XDG_DATA_HOME/heron, else ~/.local/share/heron."""
    configured = getattr(settings, "data_dir", None)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")
    return Path(base) / "heron"


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.failure: str | None = None  # why nothing is being saved, once that is known
        self._jobs: queue.SimpleQueue[tuple[Job, Future[Any] | None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- the event loop's side -----------------------------------------------------------------

    def write(self, job: Job) -> None:
        """Queue a write; it runs after every job queued before it. Never blocks."""
        if self.failure is None:
            self._submit(job, None)

    async def read(self, job: Job) -> Any:
        """Run a job after every write queued so far; None when the store is off."""
        if self.failure is not None:
            return None
        future: Future[Any] = Future()
        self._submit(job, future)
        return await anyio.to_thread.run_sync(future.result)

    async def ready(self) -> None:
        """Wait until the database is open (or known to be unusable)."""
        await self.read(lambda conn: None)

    async def flush(self) -> None:
        """Wait for every queued write (at exit)."""
        if self._thread is not None:
            with anyio.move_on_after(10):  # a store locked by another process must not hang us
                await self.read(lambda conn: None)

    # -- the store thread ----------------------------------------------------------------------

    def _submit(self, job: Job, future: Future[Any] | None) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heron-store", daemon=True)
                self._thread.start()
        self._jobs.put((job, future))

    def _run(self) -> None:
        conn = self._open()
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, future = item
            if future is not None:
                self._read(conn, job, future)
                continue
            batch = [job]
            # Take the writes already queued: one transaction, one commit, for all of them.
            while True:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None or more[1] is not None:
                    self._write_batch(conn, batch)
                    batch = []
                    if more is None:
                        return
                    self._read(conn, more[0], more[1])  # type: ignore[arg-type]
                    continue
                batch.append(more[0])
            if batch:
                self._write_batch(conn, batch)

    def _open(self) -> sqlite3.Connection | None:
        try:
            from agent.store import db

            return db.connect(self.path)
        except Exception as exc:
            self._fail(f"cannot open {self.path}: {exc}")
            return None

    def _write_batch(self, conn: sqlite3.Connection | None, batch: list[Job]) -> None:
        if conn is None or self.failure is not None:
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for job in batch:
                    job(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except Exception as exc:
            self._fail(f"cannot write to {self.path}: {exc}")

    def _read(self, conn: sqlite3.Connection | None, job: Job, future: Future[Any]) -> None:
        if conn is None or self.failure is not None:
            future.set_result(None)
            return
        try:
            future.set_result(job(conn))
        except Exception as exc:
            log.warning("session store read failed: %s", exc)
            future.set_exception(exc)

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            log.error("sessions will not be saved: %s", reason)
            self.failure = reason
