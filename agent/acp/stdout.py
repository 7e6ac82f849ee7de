"""Writing to the editor's stdout from the event loop, without ever blocking it.

A write handed to a thread waits for that thread to get the GIL back from the busy event loop
(up to Python's 5 ms switch interval per write), which is what made the first chunk of a burst
late by a varying amount. When stdout can take non-blocking writes, the event loop writes
itself: what fits goes out at once, the rest waits for the pipe to drain (`anyio.wait_writable`).

The file description behind fd 1 must keep its flags (O_NONBLOCK on it would also hit whoever
shares it: a shell on a terminal, or stdin when one socket serves both), so:
- a pipe (Linux) is opened anew through /proc/self/fd, a file description of Heron's own that
  can be non-blocking;
- a socket (what libuv-based editors pass) is written with MSG_DONTWAIT, per call.
Anything else (a terminal, a regular file, other systems) gets `None`: the caller writes from
a thread, as before.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
from typing import BinaryIO, Protocol

log = logging.getLogger("heron.wire")


class NonBlockingStdout(Protocol):
    """`write()` returns how many bytes went out (0 when the pipe is full); OSError when the
    editor is gone. `fileno()` is what to wait on for room."""

    def fileno(self) -> int: ...

    def write(self, data: memoryview) -> int: ...


class _Pipe:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def write(self, data: memoryview) -> int:
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0


class _Socket:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def write(self, data: memoryview) -> int:
        try:
            return self._sock.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0


def open_nonblocking(stdout: BinaryIO) -> NonBlockingStdout | None:
    """A non-blocking way to write `stdout`, or None to write it from a thread."""
    try:
        stdout.flush()  # what was written through the buffered object goes first
        fd = stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # not a real file (tests), or closed
        return None
    try:
        if stat.S_ISFIFO(mode):
            return _reopened_pipe(fd)
        if stat.S_ISSOCK(mode) and hasattr(socket, "MSG_DONTWAIT"):
            sock = socket.socket(fileno=os.dup(fd))
            if sock.type != socket.SOCK_STREAM:
                sock.close()
                return None
            return _Socket(sock)
    except OSError as exc:
        log.debug("stdout is written from a thread: %s", exc)
    return None


def _reopened_pipe(fd: int) -> NonBlockingStdout | None:
    path = f"/proc/self/fd/{fd}"
    if not os.path.exists(path):  # not Linux
        return None
    own = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    before, after = os.fstat(fd), os.fstat(own)
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):
        os.close(own)
        return None
    return _Pipe(own)
