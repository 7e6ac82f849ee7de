"""Heron's side of the zygote (agent.sandbox.zygote_server): start one per session and
confinement, hand it commands, read back their pids and exit status.

The zygote is a child of Heron (kept from `agent.processes.tree`'s reaping like any command),
started as `launch` says: bubblewrap around it, or the bare script that makes its own
namespaces, or confines itself with Landlock alone, or not at all (commands outside the
sandbox get a reaper too). Each command runs below a reaper of its own; Heron learns both pids
from pidfds, so they are right in Heron's pid namespace even when the zygote has its own, and
stops the command's whole tree (agent.processes.tree: the reaper's descendants included). A
zygote found dead (killed by a command, crashed) is replaced before the next command; one that
dies under a running command loses only that command's exit status.
"""

from __future__ import annotations

import array
import contextlib
import functools
import marshal
import os
import socket
import subprocess
import weakref
from pathlib import Path

import anyio
from anyio.abc import Process

from agent.processes.tree import forget, open_process
from agent.sandbox.zygote_server import ACK, COMMAND, LENGTH, RECORD, RETIRE

SERVER = str(Path(__file__).with_name("zygote_server.py").resolve())
PIDFDS = 2  # the command's and its reaper's
START_TIMEOUT = 30.0  # a loaded machine may take seconds to start Python
REPLY_TIMEOUT = 30.0  # from sending a command to its pid: a stopped zygote must not hang us


@functools.cache
def reapers_available() -> bool:
    """Zygotes need pidfds (Linux 5.3): elsewhere commands start the plain way."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


_retired: list[Process] = []  # closed zygotes letting their last commands end
_live: weakref.WeakSet[Zygote] = weakref.WeakSet()


async def stop_all(timeout: float = 5.0) -> None:
    """At Heron's exit, while the event loop still runs: every zygote killed and collected
    (their sandboxes end with them), so that none ends after the loop closed (asyncio would
    log it) and none outlives Heron."""
    processes = [z._process for z in list(_live) if z._process is not None] + _retired
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    with anyio.move_on_after(timeout):
        for process in processes:
            await process.wait()
            forget(process.pid)
    _retired.clear()


def _forget_retired() -> None:
    """Zygotes that exited since they were closed: the event loop has collected them."""
    for process in list(_retired):
        if process.returncode is not None:
            _retired.remove(process)
            forget(process.pid)


class ZygoteError(OSError):
    """The zygote could not start, confine itself or start the command."""


class Zygote:
    """One zygote started by `launch` (an argv ending in the server and its confinement), with
    `pass_fds` inherited (the roots' descriptors bubblewrap binds)."""

    def __init__(self, launch: list[str], pass_fds: tuple[int, ...] = ()) -> None:
        self.launch = launch
        self.pass_fds = pass_fds
        self._process: Process | None = None
        self._control: socket.socket | None = None
        self._lock = anyio.Lock()  # one command handed over at a time
        _live.add(self)

    async def spawn(self, argv: list[str], env: dict[str, str], cwd: Path | str) -> ConfinedProcess:
        """Start `argv` confined, stdin empty, stdout and stderr into one pipe."""
        payload = marshal.dumps(
            (
                os.fsencode(argv[0]),
                [os.fsencode(arg) for arg in argv],
                {os.fsencode(k): os.fsencode(v) for k, v in env.items()},
                os.fsencode(cwd),
            )
        )
        ours, theirs = socket.socketpair()
        output, into = os.pipe2(os.O_CLOEXEC)
        stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            async with self._lock:
                await self._hand_over([stdin, into, theirs.fileno()])
                used = self._process
        except BaseException:
            ours.close()
            os.close(output)
            raise
        finally:
            theirs.close()
            os.close(into)
            os.close(stdin)
        process = ConfinedProcess(ours, output)
        try:
            await process.start(LENGTH.pack(len(payload)) + payload)
        except BaseException as exc:
            await process.aclose()
            if isinstance(exc, ZygoteError) and exc.errno is None:
                # Dead, or stopped (a command may signal it: same Landlock domain): the next
                # command gets a new one.
                async with self._lock:
                    if self._process is used:  # not one started since
                        await self._discard()
            raise
        return process

    async def _hand_over(self, fds: list[int]) -> None:
        for attempt in range(2):
            control = await self._ready()
            try:
                while True:
                    try:
                        socket.send_fds(control, [COMMAND], fds)
                        return
                    except BlockingIOError:
                        await anyio.wait_writable(control)
            except OSError:
                # Died since the last command (killed, crashed): once more with a new one.
                await self._discard()
                if attempt:
                    raise ZygoteError("the sandbox's command starter stopped") from None

    async def _ready(self) -> socket.socket:
        if self._control is not None and self._process and self._process.returncode is None:
            return self._control
        await self._discard()
        _forget_retired()
        ours, theirs = socket.socketpair()
        try:
            self._process = await open_process(
                self.launch,
                stdin=theirs.fileno(),
                pass_fds=self.pass_fds,
                stdout=subprocess.DEVNULL,
                stderr=None,  # its complaints go to Heron's log
                env={},  # it passes each command its own environment
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self._control = ours
        ready = b""
        with anyio.move_on_after(START_TIMEOUT):
            while True:
                try:
                    ready = ours.recv(1)
                    break
                except BlockingIOError:
                    await anyio.wait_readable(ours)
                except OSError:
                    break
        if ready != b"R":
            await self._discard()
            raise ZygoteError("the sandbox cannot confine commands here")
        return ours

    async def _discard(self) -> None:
        """Kill the zygote (dead already, or never ready) and collect it."""
        control, self._control = self._control, None
        process, self._process = self._process, None
        if control is not None:
            control.close()
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await process.wait()
            forget(process.pid)

    def close(self) -> None:
        """The session ended (or its rules changed): the zygote lets what still runs end, then
        exits; the event loop's child watcher collects it (`stop_everything` at Heron's exit)."""
        control, self._control = self._control, None
        if control is not None:
            with contextlib.suppress(OSError):  # gone already, or (never) a full queue
                control.send(RETIRE)
            control.close()
        if self._process is not None:
            _retired.append(self._process)
            self._process = None


class ConfinedProcess:
    """A command the zygote started: its pid and its reaper's, its output, its exit status."""

    def __init__(self, reply: socket.socket, output: int) -> None:
        reply.setblocking(False)
        os.set_blocking(output, False)
        self._reply = reply
        self._output = output
        self._received = b""
        self._closed = False
        self.pid = 0
        self.reaper = 0
        self._code: int | None = None
        self.lost = False  # the zygote died first: the exit status is unknown
        self.stdout = self  # read like anyio's process stdout

    async def start(self, command: bytes) -> None:
        await anyio.wait_writable(self._reply)
        view = memoryview(command)
        while view:
            try:
                view = view[self._reply.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._reply)
            except OSError as exc:
                raise ZygoteError("the sandbox's command starter stopped") from exc
        with anyio.move_on_after(REPLY_TIMEOUT):
            kind, value, pids = await self._first_record()
            if kind == b"E":
                raise ZygoteError(value, f"cannot start the command: {os.strerror(value)}")
            if kind != b"P" or len(pids) != PIDFDS or 0 in pids:
                raise ZygoteError("the sandbox's command starter stopped")
            self.pid, self.reaper = pids
            # Until this, the reaper leaves the command unreaped: its pid could not be reused.
            with contextlib.suppress(OSError):
                self._reply.send(ACK)
        if not self.pid:
            raise ZygoteError("the sandbox's command starter did not answer")

    async def _first_record(self) -> tuple[bytes, int, list[int]]:
        """The reaper's first record ("P" with two pidfds, or "E"), and the pids of those
        pidfds as Heron's pid namespace numbers them."""
        fds = array.array("i")
        while True:
            try:
                data, ancillary, _, _ = self._reply.recvmsg(
                    RECORD.size, socket.CMSG_SPACE(PIDFDS * fds.itemsize), socket.MSG_CMSG_CLOEXEC
                )
                break
            except BlockingIOError:
                await anyio.wait_readable(self._reply)
            except OSError:
                return b"", 0, []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        pids = []
        for fd in fds:
            pids.append(_pid_of(fd))
            os.close(fd)
        if len(data) < RECORD.size:
            return b"", 0, pids
        record_kind, value = RECORD.unpack(data)
        return record_kind, value, pids

    async def _record(self) -> tuple[bytes, int]:
        """The next record; (b"", 0) when the zygote closed the reply."""
        while len(self._received) < RECORD.size:
            try:
                chunk = self._reply.recv(64)
            except BlockingIOError:
                await anyio.wait_readable(self._reply)
                continue
            except OSError:
                chunk = b""
            if not chunk:
                return b"", 0
            self._received += chunk
        record, self._received = self._received[: RECORD.size], self._received[RECORD.size :]
        kind, value = RECORD.unpack(record)
        return kind, value

    async def wait(self) -> int | None:
        """The exit code (negative: the signal); None when the zygote died first."""
        while self._code is None and not self.lost and not self._closed:
            kind, value = await self._record()
            if kind == b"X":
                self._code = value
            elif kind == b"":
                self.lost = True
        return self._code

    @property
    def returncode(self) -> int | None:
        """The exit code if it came already (no waiting), as anyio's process has it."""
        if self._code is None and not self.lost and not self._closed:
            try:
                chunk = self._reply.recv(64)
                self.lost = not chunk
                self._received += chunk
            except BlockingIOError:
                pass
            except OSError:
                self.lost = True
            if len(self._received) >= RECORD.size:
                kind, value = RECORD.unpack(self._received[: RECORD.size])
                if kind == b"X":
                    self._code, self.lost = value, False
        return self._code

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """The command's next output; `anyio.EndOfStream` at its end."""
        while True:
            try:
                data = os.read(self._output, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._output)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._reply.close()
            os.close(self._output)


def _pid_of(pidfd: int) -> int:
    """The pid a pidfd refers to, in Heron's pid namespace (0 if it cannot be read)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pid:"):
                    return max(0, int(line.split()[1]))
    except (OSError, ValueError, IndexError):
        pass
    return 0
