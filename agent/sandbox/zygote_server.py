"""The zygote: one process per session that starts its commands, each under a reaper of its own.

    python -I -S zygote_server.py CONFINEMENT        (fd 0: a socket to Heron)

CONFINEMENT is `agent.sandbox.confine.encode`'s: the layers the zygote applies to itself before
it reads anything else, or none for commands that run outside the sandbox (they still get a
reaper). The zygote answers "R" on the socket once confined, then starts each command
Heron asks for: a one-byte message carrying three descriptors (the command's stdin, its
stdout/stderr, and a reply socket), then on the reply socket the command as a marshalled
(program, argv, env, cwd) of bytes.

Each command gets a reaper: a fork of the zygote that becomes a child subreaper and spawns the
command in a session of its own (its pid is its process group). Whatever the command leaves
behind — background jobs, `setsid`, `env -i`, double forks — is re-parented to the reaper and
stays below it, so Heron finds and stops all of it with the command (agent.processes.tree).
The reaper answers on the reply socket: "P" with pidfds of the command and of itself (Heron
reads their pids in its own pid namespace from them, then acknowledges: until then the command
stays unreaped, so its pid cannot be reused), later "X" and the exit code (negative: the
signal), or "E" and an errno; it exits once the command and everything below it ended.

When Heron sends "Q" (the session ended) the zygote lets its running commands end, then exits;
when the socket ends without it (Heron was killed), it kills them first. It is not dumpable: a
command (same sandbox) cannot read its memory or environment through /proc. Standard library
only: it runs as a bare script, like the launcher.
"""

from __future__ import annotations

import array
import contextlib
import marshal
import os
import select
import signal
import socket
import struct
import sys

if __package__:  # Heron reads the wire format from here
    from agent.sandbox import confine, reap
else:  # a bare script: `-I` leaves its folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import confine  # type: ignore[import-not-found,no-redef]
    import reap  # type: ignore[import-not-found,no-redef]

COMMAND, RETIRE = b"C", b"Q"  # Heron's messages: start one (with its descriptors), no more
ACK = b"A"  # Heron read the pids: the reaper may collect the command from now on
RECORD = struct.Struct("=cq")  # kind, value
LENGTH = struct.Struct("=Q")  # before the marshalled command
READ_TIMEOUT = 10.0  # Heron sends the command right after the descriptors
REAP_EVERY = 1000  # ms: orphans of a reaper that was killed are collected this often
PR_SET_DUMPABLE = 4


def main(argv: list[str]) -> int:
    try:
        config = confine.decode(argv[0]) if len(argv) == 1 else None
    except ValueError:
        config = None
    if config is None:
        print("usage: zygote_server.py CONFINEMENT  (fd 0: Heron's socket)", file=sys.stderr)
        return 2
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the socket must not look like anyone's stdin
    os.close(null)
    try:
        confine.confine(config)
    except OSError as exc:
        print(f"heron sandbox: cannot confine the commands: {exc}", file=sys.stderr)
        return confine.DENIED
    reap.prctl(PR_SET_DUMPABLE, 0)
    reap.become_subreaper()  # orphans of a killed reaper come here
    control.sendall(b"R")
    Zygote(control).serve()
    return 0


class Zygote:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.reapers: dict[int, int] = {}  # pidfd: pid
        self.poll = select.poll()
        self.poll.register(control, select.POLLIN)

    def serve(self) -> None:
        listening = True
        while listening or self.reapers:
            for fd, _ in self.poll.poll(REAP_EVERY):
                if fd != self.control.fileno():
                    self.collect(fd)
                elif (message := self.accept()) != COMMAND:
                    listening = False
                    self.poll.unregister(self.control)
                    if message != RETIRE:  # Heron died: nobody else will stop them
                        reap.kill_descendants()
            self.collect_orphans()

    def accept(self) -> bytes:
        """Start the next command; returns the message (b"": Heron is gone)."""
        try:
            message, fds = _receive(self.control)
        except OSError:
            return b""
        if message != COMMAND or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            return message
        stdin, stdout, reply_fd = fds
        try:
            pid = os.fork()
        except OSError as exc:
            with socket.socket(fileno=os.dup(reply_fd)) as reply:
                _send(reply, b"E", exc.errno or 0)
            pid = -1
        if pid == 0:  # the reaper: never returns
            code = 1
            try:
                self.control.close()
                code = Reaper(stdin, stdout, reply_fd).run()
            finally:
                os._exit(code)
        for fd in (stdin, stdout, reply_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        if pid > 0:
            pidfd = os.pidfd_open(pid)
            self.reapers[pidfd] = pid
            self.poll.register(pidfd, select.POLLIN)
        return message

    def collect(self, pidfd: int) -> None:
        pid = self.reapers.pop(pidfd)
        self.poll.unregister(pidfd)
        os.close(pidfd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    def collect_orphans(self) -> None:
        """Adopted orphans (a reaper was killed under its command) that ended."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for pidfd, reaper in list(self.reapers.items()):
                if reaper == pid:  # collected here first: forget it
                    self.reapers.pop(pidfd)
                    self.poll.unregister(pidfd)
                    os.close(pidfd)


class Reaper:
    """One command, and everything it leaves behind, below a child subreaper."""

    def __init__(self, stdin: int, stdout: int, reply_fd: int) -> None:
        self.stdin, self.stdout = stdin, stdout
        self.reply = socket.socket(fileno=reply_fd)

    def run(self) -> int:
        reap.become_subreaper()
        try:
            self.reply.settimeout(READ_TIMEOUT)
            size = LENGTH.unpack(_read(self.reply, LENGTH.size))[0]
            program, args, env, cwd = marshal.loads(_read(self.reply, size))
            os.chdir(cwd)
            pid = os.posix_spawn(
                program,
                args,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, self.stdin, 0),
                    (os.POSIX_SPAWN_DUP2, self.stdout, 1),
                    (os.POSIX_SPAWN_DUP2, self.stdout, 2),
                ],
                setsid=True,  # its own process group, as `start_new_session` gives
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),  # what Python ignores
            )
        except OSError as exc:
            _send(self.reply, b"E", exc.errno or 0)
            return 1
        except (EOFError, ValueError, TypeError, struct.error):
            return 1  # not a command: Heron reads the end of the reply as a failure
        finally:
            os.close(self.stdin)
            os.close(self.stdout)  # else the command's output would never end
        pidfds = [os.pidfd_open(pid), os.pidfd_open(os.getpid())]
        with contextlib.suppress(OSError, EOFError):  # Heron stopped listening: collect anyway
            socket.send_fds(self.reply, [RECORD.pack(b"P", pid)], pidfds)
            # Not reaped before Heron read the pids: a pid never names another process.
            _read(self.reply, len(ACK))
        for fd in pidfds:
            os.close(fd)
        while True:
            try:
                ended, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return 0  # the command and all it left behind are gone
            if ended == pid:
                _send(self.reply, b"X", os.waitstatus_to_exitcode(status))


def _receive(control: socket.socket) -> tuple[bytes, list[int]]:
    """One message and its descriptors, close-on-exec (`socket.recv_fds` drops the flag
    before 3.12: a command would inherit its own reply socket)."""
    fds = array.array("i")
    message, ancillary, _, _ = control.recvmsg(
        1, socket.CMSG_LEN(3 * fds.itemsize), socket.MSG_CMSG_CLOEXEC
    )
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _send(reply: socket.socket, kind: bytes, value: int) -> None:
    with contextlib.suppress(OSError):  # Heron stopped listening (a cancelled command)
        reply.sendall(RECORD.pack(kind, value))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
