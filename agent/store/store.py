"""The store as the rest of Heron sees it: one thread owns the SQLite connection and runs
queued jobs in order; the event loop only queues them (writes) or awaits them (reads).

Nothing is imported or opened until the first job, which comes after the `session/new` answer.
Writes queued together run in one transaction, so a burst of step boundaries costs one commit.
If the database cannot be opened, the store turns itself off: `failure` says why (once on
stderr), writes are dropped and reads find nothing, and Heron goes on in memory. A write that
fails (a full disk, a file size limit, a read-only file, text SQLite refuses) fails alone: the
batch is retried one job at a time, the failing job's `on_error` is told the cause in words,
and every other session goes on being saved.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

if TYPE_CHECKING:
    import sqlite3

    from agent.config import Settings

log = logging.getLogger("heron.store")

Job = Callable[["sqlite3.Connection"], Any]


class WriteHooks(Protocol):
    """What a write learns of its transaction, in the store's thread."""

    def committed(self) -> None: ...

    def aborted(self) -> None:
        """Rolled back (it may be tried again on its own, or it failed)."""

    def failed(self, reason: str) -> None:
        """It failed; `reason` is the cause in words."""


class LogFailure:
    def committed(self) -> None:
        pass

    def aborted(self) -> None:
        pass

    def failed(self, reason: str) -> None:
        log.error("a write to the session store failed: %s", reason)


Write = tuple[Job, WriteHooks]


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
        self._jobs: queue.SimpleQueue[tuple[Job, Future[Any] | WriteHooks] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- the event loop's side -----------------------------------------------------------------

    def write(self, job: Job, hooks: WriteHooks | None = None) -> None:
        """Queue a write; it runs after every job queued before it. Never blocks. `hooks` learn
        whether its transaction committed or failed, and why."""
        if self.failure is None:
            self._submit(job, hooks or LogFailure())

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

    def _submit(self, job: Job, future: Future[Any] | WriteHooks) -> None:
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
            if isinstance(item[1], Future):
                self._read(conn, item[0], item[1])
                continue
            batch = [item]
            # Take the writes already queued: one transaction, one commit, for all of them.
            while True:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None or isinstance(more[1], Future):
                    self._write_batch(conn, batch)  # type: ignore[arg-type]
                    batch = []
                    if more is None:
                        return
                    self._read(conn, more[0], more[1])  # type: ignore[arg-type]
                    continue
                batch.append(more)
            if batch:
                self._write_batch(conn, batch)  # type: ignore[arg-type]

    def _open(self) -> sqlite3.Connection | None:
        try:
            from agent.store import db

            return db.connect(self.path)
        except Exception as exc:
            from agent.store.failures import describe

            self._fail(f"cannot open {self.path}: {describe(exc, self.path)}")
            return None

    def _write_batch(self, conn: sqlite3.Connection | None, batch: list[Write]) -> None:
        if conn is None or self.failure is not None:
            return
        try:
            self._transaction(conn, batch)
            return
        except Exception as exc:
            if len(batch) == 1:
                self._tell(batch[0][1], exc)
                return
        for write in batch:  # one of them failed: each on its own, so it fails alone
            try:
                self._transaction(conn, [write])
            except Exception as exc:
                self._tell(write[1], exc)

    def _transaction(self, conn: sqlite3.Connection, batch: list[Write]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for job, _ in batch:
                job(conn)
            conn.execute("COMMIT")
        except BaseException:
            # SQLite rolls back by itself after some errors (a full disk, an I/O error): a
            # second ROLLBACK would fail and hide the cause.
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except Exception as exc:
                    log.warning("session store rollback failed: %s", exc)
            for _, hooks in batch:
                hooks.aborted()
            raise
        for _, hooks in batch:
            hooks.committed()

    def _tell(self, hooks: WriteHooks, exc: Exception) -> None:
        from agent.store.failures import describe

        hooks.failed(describe(exc, self.path))

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
        """The store cannot be used at all (it cannot be opened)."""
        if self.failure is None:
            log.error("sessions will not be saved: %s", reason)
            self.failure = reason
