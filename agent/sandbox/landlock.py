"""Landlock over its three syscalls (ctypes): one layer of auto mode's sandbox.

`restrict_self` confines the calling (single-threaded) process and everything it starts
later; a child cannot lift it. Standard library only: the zygote and the launcher import it as
bare scripts (agent.sandbox.confine).

What is handled: every filesystem access the kernel's ABI knows (reads allowed only under the
read and write paths, writes only under the write paths), TCP bind and connect (ABI ≥ 4, none
allowed), and from ABI 6 signals and abstract Unix sockets reaching outside the sandbox.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same on every arch
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file takes
# Writing to a device that exists (/dev/null, /dev/tty): no creating or removing there.
DEVICE_WRITE = WRITE_FILE | TRUNCATE | IOCTL_DEV


class RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    """The kernel refused: no Landlock, or a rule it cannot take."""


_libc: ctypes.CDLL | None = None
_abi: int | None = None


def libc() -> ctypes.CDLL:
    """The C library (prctl, syscall), loaded once."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _syscall(*args: object) -> int:  # ints, pointers (byref) or None
    # Variadic: every argument passed as a full long, as the kernel reads it.
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result: int = libc().syscall(*wide)
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, os.strerror(errno))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none: not Linux, too old, or disabled at boot)."""
    global _abi
    if _abi is None:
        _abi = 0
        if sys.platform.startswith("linux"):
            try:  # noqa: SIM105 (contextlib would slow the launcher's start)
                _abi = _syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
            except (OSError, AttributeError):
                pass
    return _abi


def handled_fs(abi: int) -> int:
    """Every filesystem access this ABI can restrict."""
    handled = (1 << 13) - 1  # ABI 1: EXECUTE … MAKE_SYM
    if abi >= 2:
        handled |= REFER
    if abi >= 3:
        handled |= TRUNCATE
    if abi >= 5:
        handled |= IOCTL_DEV
    return handled


def restrict_self(
    reads: list[str | int], writes: list[str | int], devices: list[str], highest: int = 99
) -> int:
    """Confine this process and its future children; returns the ABI used.

    `reads`: trees readable and executable; `writes`: trees fully usable; `devices`: files
    (or a folder of them) that may be opened for writing (and read). Paths that do not exist
    are skipped. `highest`: use no newer ABI than this (to emulate an older kernel)."""
    abi = min(abi_version(), highest)
    if abi < 1:
        raise LandlockError(0, "Landlock is not available on this system")
    fs = handled_fs(abi)
    attr = RulesetAttr(handled_access_fs=fs)
    size = 8
    if abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL
        size = 24
    ruleset = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    try:
        for paths, access in ((reads, READ), (writes, fs), (devices, READ | DEVICE_WRITE)):
            for path in paths:
                _allow(ruleset, path, access & fs)
        libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _syscall(SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


def _allow(ruleset: int, path: str | int, access: int) -> None:
    """Allow `access` beneath `path`, or beneath what the descriptor `path` refers to."""
    if isinstance(path, int):
        fd = os.dup(path)
    else:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # nothing there to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_ONLY
        rule = PathBeneathAttr(allowed_access=access, parent_fd=fd)
        _syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    except LandlockError as exc:
        # A rule the kernel will not take only leaves that path out: stricter, never looser.
        print(f"heron sandbox: {path} stays closed: {exc.strerror}", file=sys.stderr)
    finally:
        os.close(fd)
