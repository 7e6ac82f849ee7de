"""Orphans kept below their command: a child subreaper, and the sweep of what is below it.

A process that is a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`) adopts every orphan of its
descendants, so nothing a command starts — background jobs, `setsid`, `env -i`, double forks —
leaves its tree. Standard library only: the zygote and the launcher import it as bare scripts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

PR_SET_CHILD_SUBREAPER = 36


def prctl(option: int, value: int) -> int:
    result: int = ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    return result


def become_subreaper() -> None:
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def descendants(parent: int) -> list[int]:
    """The live processes below `parent` (from /proc: who has whom as parent)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X"):
            parents.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [parent]
    while todo:
        for child in parents.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants() -> None:
    """SIGKILL every process below this one, and again what comes back here (this process is
    a subreaper: what a killed process leaves is re-parented to it), until none is left."""
    me = os.getpid()
    while found := descendants(me):
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(-1, 0)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
