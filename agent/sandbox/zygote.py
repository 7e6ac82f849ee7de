"""Heron's side of the zygote (agent.sandbox.zygote_server): start one per rule set, hand it
commands, read back their pid and exit status.

The zygote is a child of Heron (kept from `agent.processes.tree`'s reaping like any command);
the commands it starts are Heron's grandchildren, so a command's tree (its process group, the
marker in its environment, everything below) is found and stopped as before, and orphans are
still adopted by Heron, the subreaper. A zygote found dead (killed by a command, crashed) is
replaced before the next command; one that dies under a running command loses only that
command's exit status.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import socket
import subprocess
import sys
from pathlib import Path

import anyio
from anyio.abc import Process

from agent.processes.tree import forget, open_process
from agent.sandbox.zygote_server import COMMAND, LENGTH, RECORD, RETIRE

SERVER = str(Path(__file__).with_name("zygote_server.py").resolve())
START_TIMEOUT = 30.0  # a loaded machine may take seconds to start Python
REPLY_TIMEOUT = 30.0  # from sending a command to its pid: a stopped zygote must not hang us


_retired: list[Process] = []  # closed zygotes letting their last commands end


def _forget_retired() -> None:
    """Zygotes that exited since they were closed: the event loop has collected them."""
    for process in list(_retired):
        if process.returncode is not None:
            _retired.remove(process)
            forget(process.pid)


class ZygoteError(OSError):
    """The zygote could not start, confine itself or start the command."""


class Zygote:
    """One confined zygote for one set of launcher rules (`--read/--write/--device …`)."""

    def __init__(self, rules: list[str]) -> None:
        self.rules = rules
        self._process: Process | None = None
        self._control: socket.socket | None = None
        self._lock = anyio.Lock()  # one command handed over at a time

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
                [sys.executable, "-I", "-S", SERVER, *self.rules],
                stdin=theirs.fileno(),
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
    """A command the zygote started: its pid, its output, its exit status."""

    def __init__(self, reply: socket.socket, output: int) -> None:
        reply.setblocking(False)
        os.set_blocking(output, False)
        self._reply = reply
        self._output = output
        self._received = b""
        self._closed = False
        self.pid = 0
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
            while not self.pid:
                kind, value = await self._record()
                if kind == b"E":
                    raise ZygoteError(value, f"cannot start the command: {os.strerror(value)}")
                if kind == b"P":
                    self.pid = value
                elif kind == b"":
                    raise ZygoteError("the sandbox's command starter stopped")
        if not self.pid:
            raise ZygoteError("the sandbox's command starter did not answer")

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
