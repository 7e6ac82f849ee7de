"""The attack a sandboxed command makes on everything around it (run by the sandbox tests).

    python sandbox_attack.py TARGETS.json

Tries each way out the third attack round found, one after another, and prints one JSON line
per attempt: {"check": NAME, "stopped": BOOL, "detail": TEXT}. "stopped" is the command's own
view (the call failed); the tests also look from outside at what each attempt would have
changed. Standard library only: it runs inside the sandbox with whatever Python is visible.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH = 16
CLONE_NEWUSER = 0x10000000
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine, -1)
KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING = 0, -4


def attempt(name: str, action: Callable[[], object]) -> None:
    try:
        result = action()
    except BaseException as exc:  # every failure is the sandbox stopping it
        print(json.dumps({"check": name, "stopped": True, "detail": repr(exc)}), flush=True)
        return
    print(json.dumps({"check": name, "stopped": False, "detail": repr(result)}), flush=True)


def raise_on_minus_one(value: int) -> int:
    if value == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return value


def write(path: str, text: str = "attacked\n", mode: str = "a") -> int:
    with open(path, mode, encoding="utf-8") as f:
        return f.write(text)


def connect_unix(path: str) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(b"attacked")
    return "connected"


def connect_tcp(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"attacked")
    return "connected"


def send_udp(port: int) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        return s.sendto(b"attacked", ("127.0.0.1", port))


def main(targets_file: str) -> None:
    t = json.loads(Path(targets_file).read_text())
    attempt("write_outside", lambda: write(t["outside_file"]))
    attempt("read_home_secret", lambda: Path(t["home_secret"]).read_text())
    attempt("write_system_tmp", lambda: write(t["system_tmp_file"], mode="w"))
    attempt("chmod_outside", lambda: os.chmod(t["visible_outside"], 0o666))
    attempt("utime_outside", lambda: os.utime(t["visible_outside"], (0, 0)))
    attempt("truncate_outside", lambda: os.truncate(t["visible_outside"], 0))
    attempt("xattr_outside", lambda: os.setxattr(t["visible_outside"], "user.heron", b"x"))
    attempt("chown_outside", lambda: os.chown(t["visible_outside"], os.getuid(), os.getgid()))
    attempt("unix_socket_home", lambda: connect_unix(t["home_socket"]))
    attempt("unix_socket_runtime", lambda: connect_unix(t["runtime_socket"]))
    attempt("unix_socket_tmp", lambda: connect_unix(t["tmp_socket"]))
    attempt("abstract_socket", lambda: connect_unix("\0" + t["abstract_name"]))
    attempt("tcp_loopback", lambda: connect_tcp(t["tcp_port"]))
    attempt("udp_loopback", lambda: send_udp(t["udp_port"]))
    attempt("signal_heron", lambda: os.kill(t["heron_pid"], signal.SIGCONT))
    attempt("signal_editor", lambda: os.kill(t["editor_pid"], signal.SIGCONT))
    attempt("other_terminal", lambda: write(t["other_pty"]))
    attempt(
        "ptrace_heron", lambda: raise_on_minus_one(libc.ptrace(PTRACE_ATTACH, t["heron_pid"], 0, 0))
    )
    attempt("unshare_user", lambda: raise_on_minus_one(libc.unshare(CLONE_NEWUSER)))
    attempt(
        "keyctl",
        lambda: raise_on_minus_one(
            libc.syscall(SYS_KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0)
        ),
    )
    attempt("git_hook", lambda: write(t["git_hook"], "#!/bin/sh\necho planted\n", "w"))
    attempt("git_config", lambda: write(t["git_config"], "[core]\n\tfsmonitor = ./evil\n"))
    attempt("heron_folder", lambda: write(t["heron_command"], "planted\n", "w"))
    attempt("big_file", lambda: write(t["big_file"], "x" * t["big_size"], "w"))
    attempt("big_memory", lambda: len(bytearray(t["big_memory"])))
    # Last: a job that leaves the command's process group and environment behind.
    attempt(
        "escape_job",
        lambda: os.system(f"setsid env -i sleep {t['escape_marker']} >/dev/null 2>&1 &"),
    )


if __name__ == "__main__":
    main(sys.argv[1])
