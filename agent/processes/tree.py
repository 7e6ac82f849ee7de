"""Every process a command started, found again and stopped, whatever it did to hide.

A command runs in its own process group, but `setsid`, `nohup … &` and daemons leave that group,
and a background job outlives the shell that started it. So:

- Heron is a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): an orphaned descendant is
  re-parented to Heron instead of init, so everything a command started stays a descendant of
  Heron, visible in /proc. Heron reaps those adopted orphans itself (`_reap_adopted`), never
  the children anyio waits for (`spawned`), whose exit status is not ours to take.
- Each command's environment carries a marker (`MARKER`) that its descendants inherit, so a
  process that left the group is still known as the command's.

A command's tree is then: its process group, the descendants of Heron carrying its marker,
and every descendant of those. A command started below a reaper of its own (agent.sandbox's
zygotes start every local command so) has everything it left behind below that reaper, even
what cleared its environment and left its group (`setsid env -i …`): those count too, the
reaper itself not (it ends by itself once they are gone). `stop_everything` takes all
descendants of Heron, at exit. Without /proc (not Linux) only the process group is reached.

Imports stay light (no asyncio, anyio at module level): `agent.cli` installs the exit handlers
before the first line of input is read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from anyio.abc import Process

log = logging.getLogger(__name__)

MARKER = "HERON_COMMAND_ID"
KILL_GRACE = 0.5  # between SIGTERM and SIGKILL
GIVE_UP = 2.0  # after SIGKILL: a process stuck in the kernel must not hang us
PR_SET_CHILD_SUBREAPER = 36

_spawned: set[int] = set()  # Heron's own children: anyio waits for them, we must not reap them
_starting = 0  # spawns under way, whose pid is not in _spawned yet
_leaders: set[int] = set()  # process groups of commands not yet fully stopped
_background: set[asyncio.Task[None]] = set()  # stops still under way, kept from the GC
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux); idempotent. False where the system cannot."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            pass
        if not _subreaper:
            log.debug("cannot become a child subreaper; escaped processes may survive")
    return _subreaper


async def open_process(argv: list[str], **kwargs: Any) -> Process:
    """`anyio.open_process`, with the child kept from `_reap_adopted` until `forget(pid)`."""
    import anyio

    global _starting
    become_subreaper()
    _starting += 1  # until its pid is known, no zombie child of ours may be reaped
    try:
        process = await anyio.open_process(argv, **kwargs)
        _spawned.add(process.pid)
    finally:
        _starting -= 1
    return process


def forget(pid: int) -> None:
    """The child `pid` has been waited for."""
    _spawned.discard(pid)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgrp: int
    zombie: bool


def process_table() -> dict[int, Proc]:
    """Every process we can see, from /proc; empty without /proc."""
    table: dict[int, Proc] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # after the (command name)
            pid = int(name)
            table[pid] = Proc(pid, int(fields[1]), int(fields[2]), fields[0] in (b"Z", b"X"))
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return table


def descendants(table: dict[int, Proc], roots: Iterable[int]) -> set[int]:
    """The processes below `roots` (not the roots themselves)."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _marker_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    key = MARKER.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key) :].decode("ascii", "replace")
    return None


class CommandTree:
    """The processes of one command: started with `env` in its environment, in the process
    group led by `leader`."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self.env = {MARKER: self.id}
        self.leader: int | None = None
        self.reaper: int | None = None

    def attach(self, leader: int, reaper: int | None = None) -> None:
        """The command runs as `leader`, in a new session (its pid is the group's id), below
        `reaper` when it has one."""
        self.leader = leader
        self.reaper = reaper
        _leaders.add(leader)

    def members(self, table: dict[int, Proc] | None = None) -> set[int]:
        """The command's live processes (zombies are dead and do not count)."""
        table = process_table() if table is None else table
        mine = os.getpid()
        ours = descendants(table, [mine])
        roots = {
            pid
            for pid in ours
            if (self.leader is not None and table[pid].pgrp == self.leader)
            or pid == self.leader
            or (not table[pid].zombie and _marker_of(pid) == self.id)
        }
        if self.reaper is not None and self.reaper in ours:
            roots.add(self.reaper)
        tree = roots | descendants(table, roots)
        tree.discard(self.reaper or 0)
        return {pid for pid in tree if pid != mine and not table[pid].zombie}

    def signal(self, sig: int) -> set[int]:
        """Send `sig` to every live member; returns who was signalled."""
        table = process_table()
        if not table:  # no /proc: the process group is all we can reach
            if self.leader is not None and _killpg(self.leader, sig):
                return {self.leader}
            return set()
        _reap_adopted(table)
        found = self.members(table)
        if self.leader is not None and self.leader in found:
            _killpg(self.leader, sig)
        for pid in found:
            _kill(pid, sig)
        return found

    def alive(self) -> bool:
        table = process_table()
        if not table:
            return self.leader is not None and _killpg(self.leader, 0)
        _reap_adopted(table)
        return bool(self.members(table))

    async def stop(self, grace: float = KILL_GRACE) -> int:
        """SIGTERM the tree, SIGKILL what is left after `grace`; returns how many processes
        were running. Keeps going until none is left (a tree may fork while it dies)."""
        found = self.signal(signal.SIGTERM)
        await self._finish_stop(grace)
        return len(found)

    def stop_in_background(
        self, grace: float = KILL_GRACE, then: Callable[[], Awaitable[Any]] | None = None
    ) -> int:
        """SIGTERM the tree now; SIGKILL what is left after `grace`, then await `then()`, in a
        task of its own, so whoever asked (a cancelled turn) answers at once. Returns how
        many processes were running."""
        import asyncio

        found = self.signal(signal.SIGTERM)
        if found or then is not None:
            task = asyncio.get_running_loop().create_task(self._finish_stop(grace, then))
            _background.add(task)
            task.add_done_callback(_background.discard)
        else:
            _leaders.discard(self.leader or 0)
        return len(found)

    async def _finish_stop(
        self, grace: float, then: Callable[[], Awaitable[Any]] | None = None
    ) -> None:
        import asyncio

        try:
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline + GIVE_UP:
                if time.monotonic() >= deadline:
                    self.signal(signal.SIGKILL)
                await asyncio.sleep(0.02)
            if then is not None:
                await then()
        except BaseException:
            self.signal(signal.SIGKILL)  # shutting down: no more grace
            raise
        finally:
            _leaders.discard(self.leader or 0)


def stop_everything(grace: float = 0.3) -> None:
    """At exit: SIGTERM every descendant of Heron, SIGKILL those still there after `grace`.
    Synchronous: it runs in signal handlers and after the event loop has stopped."""
    deadline = time.monotonic() + grace
    termed: set[int] = set()
    for leader in list(_leaders):  # all we can reach without /proc
        _killpg(leader, signal.SIGTERM)
    while True:
        table = process_table()
        alive = {pid for pid in descendants(table, [os.getpid()]) if not table[pid].zombie}
        now = time.monotonic()
        if not alive or now >= deadline + GIVE_UP:
            break
        late = now >= deadline
        for pid in alive:
            if late or pid not in termed:
                _kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                termed.add(pid)
        time.sleep(0.01)
    for leader in list(_leaders):
        _killpg(leader, signal.SIGKILL)


def _reap_adopted(table: dict[int, Proc]) -> None:
    """Collect the exit status of orphans re-parented to us, which nobody else will."""
    if _starting:
        return  # the zombie may be a child whose pid anyio has not handed us yet
    mine = os.getpid()
    for proc in table.values():
        if proc.zombie and proc.ppid == mine and proc.pid not in _spawned:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(proc.pid, os.WNOHANG)


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
