"""The zygote: one confined process per session that starts its sandboxed commands.

    python -I -S zygote_server.py --write DIR --read DIR … --device FILE …   (fd 0: a socket)

Confines itself once (agent.sandbox.landlock) and answers "R" on the socket, then starts each
command Heron asks for: a one-byte message carrying three descriptors (the command's stdin,
its stdout/stderr, and a reply socket), then on the reply socket the command as a marshalled
(program, argv, env, cwd) of bytes. The command is spawned in a session of its own (its pid is
its process group) and inherits the confinement, which it cannot lift; the reply socket gets
"P" and the pid, later "X" and the exit code (negative: the signal), or "E" and an errno.
Heron pays the interpreter's start once per session instead of once per command.

When Heron sends "Q" (the session ended) the zygote lets its running commands end, then exits;
when the socket ends without it (Heron was killed), it kills them first. It is not dumpable: a
command (same Landlock domain) cannot read its memory or environment through /proc.
Standard library only: it runs as a bare script, like the launcher.
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

if __name__ == "__main__":  # a bare script: `-I` leaves its folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import landlock  # type: ignore[import-not-found]  # the bare script beside this one
else:  # Heron reads the wire format from here
    from agent.sandbox import landlock

COMMAND, RETIRE = b"C", b"Q"  # Heron's messages: start one (with its descriptors), no more
RECORD = struct.Struct("=cq")  # kind, value
LENGTH = struct.Struct("=Q")  # before the marshalled command
READ_TIMEOUT = 10.0  # Heron sends the command right after the descriptors
PR_SET_DUMPABLE = 4


def main(argv: list[str]) -> int:
    parsed = landlock.parse_rules(argv)
    if parsed is None or parsed[1]:
        print("usage: zygote_server.py [--read DIR] [--write DIR] [--device FILE] ...")
        return 2
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the socket must not look like anyone's stdin
    os.close(null)
    try:
        landlock.confine(parsed[0])
    except OSError as exc:
        print(f"heron sandbox: cannot confine the commands: {exc.strerror}", file=sys.stderr)
        return landlock.DENIED
    landlock._libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    control.sendall(b"R")
    Zygote(control).serve()
    return 0


class Zygote:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd: (pid, reply)
        self.poll = select.poll()
        self.poll.register(control, select.POLLIN)

    def serve(self) -> None:
        listening = True
        while listening or self.children:
            for fd, _ in self.poll.poll():
                if fd != self.control.fileno():
                    self.reap(fd)
                elif (message := self.accept()) != COMMAND:
                    listening = False
                    self.poll.unregister(self.control)
                    if message != RETIRE:  # Heron died: nobody else will stop them
                        self.kill_all()

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
        reply = socket.socket(fileno=reply_fd)
        try:
            reply.settimeout(READ_TIMEOUT)
            program, args, env, cwd = marshal.loads(_read(reply, LENGTH.unpack(_read(reply, 8))[0]))
            os.chdir(cwd)
            pid = os.posix_spawn(
                program,
                args,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, stdin, 0),
                    (os.POSIX_SPAWN_DUP2, stdout, 1),
                    (os.POSIX_SPAWN_DUP2, stdout, 2),
                ],
                setsid=True,  # its own process group, as `start_new_session` gives
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),  # what Python ignores
            )
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            _send(reply, b"E", exc.errno or 0)
            reply.close()
            return message
        except (EOFError, ValueError, TypeError, struct.error):
            reply.close()  # not a command: Heron reads the end of the reply as a failure
            return message
        finally:
            os.close(stdin)
            os.close(stdout)  # else the command's output would never end
        self.children[pidfd] = (pid, reply)
        self.poll.register(pidfd, select.POLLIN)
        _send(reply, b"P", pid)
        return message

    def reap(self, pidfd: int) -> None:
        pid, reply = self.children.pop(pidfd)
        self.poll.unregister(pidfd)
        os.close(pidfd)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 0
        _send(reply, b"X", os.waitstatus_to_exitcode(status))
        reply.close()

    def kill_all(self) -> None:
        for pid, _ in self.children.values():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


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
