"""Landlock over its three syscalls (ctypes), and the launcher that confines itself then execs.

    python -I -S landlock.py --write DIR --read DIR … -- sh -c CMD

applies the rules to its own (single-threaded) process and execs the command, which, with
everything it starts, stays confined: Landlock cannot be lifted by a child. Heron starts
commands through this launcher instead of confining a forked child of its own threaded process
(a `preexec_fn` may deadlock there). Standard library only, so it runs as a bare script
(`-I -S`: no site, no environment hooks) in about ten milliseconds.

What is handled: every filesystem access the kernel's ABI knows (reads allowed only under the
`--read` and `--write` paths, writes only under `--write`), TCP bind and connect (ABI ≥ 4, none
allowed), and from ABI 6 signals and abstract Unix sockets reaching outside the sandbox.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # not `signal`: its enums slow the start
import ctypes
import os
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

DENIED = 126  # the launcher's exit status when it cannot confine (the shell's "cannot execute")


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


def _syscall(*args: object) -> int:  # ints, pointers (byref) or None
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    # Variadic: every argument passed as a full long, as the kernel reads it.
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result: int = _libc.syscall(*wide)
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


def restrict_self(reads: list[str], writes: list[str], devices: list[str]) -> int:
    """Confine this process and its future children; returns the ABI used.

    `reads`: trees readable and executable; `writes`: trees fully usable; `devices`: files
    that may be opened for writing (and read). Paths that do not exist are skipped."""
    abi = abi_version()
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
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # type: ignore[union-attr]
        _syscall(SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


def _allow(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # nothing there to allow
    try:
        if not os.path.isdir(path):
            access &= FILE_ONLY
        rule = PathBeneathAttr(allowed_access=access, parent_fd=fd)
        _syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0)
    except LandlockError as exc:
        # A rule the kernel will not take only leaves that path out: stricter, never looser.
        print(f"heron sandbox: {path} stays closed: {exc.strerror}", file=sys.stderr)
    finally:
        os.close(fd)


USAGE = "usage: heron sandbox [--read DIR] [--write DIR] [--device FILE] ... -- COMMAND [ARG...]"

Rules = dict[str, list[str]]


def parse_rules(argv: list[str]) -> tuple[Rules, list[str]] | None:
    """`--read/--write/--device PATH …` up to `--`, and what follows; None when malformed."""
    rules: Rules = {"--read": [], "--write": [], "--device": []}
    i = 0
    while i < len(argv) and argv[i] != "--":
        flag = argv[i]
        if flag not in rules or i + 1 >= len(argv):
            return None
        rules[flag].append(argv[i + 1])
        i += 2
    return rules, argv[i + 1 :]


def confine(rules: Rules) -> int:
    """`restrict_self` with parsed rules."""
    return restrict_self(rules["--read"], rules["--write"], rules["--device"])


def default_signals() -> None:
    """Python ignores SIGPIPE and SIGXFSZ, and an exec keeps what is ignored: the command must
    get the defaults a shell expects (`yes | head -1` ends quietly)."""
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(sig, _signal.SIG_DFL)


def main(argv: list[str]) -> int:
    """Parse the rules, confine, exec the command; never runs it unconfined."""
    parsed = parse_rules(argv)
    if parsed is None or not parsed[1]:
        print(USAGE, file=sys.stderr)
        return 2
    rules, command = parsed
    # Found before confining: afterwards Python's own library may be unreadable.
    program = _which(command[0])
    try:
        confine(rules)
    except OSError as exc:
        print(f"heron sandbox: cannot confine the command: {exc.strerror}", file=sys.stderr)
        return DENIED
    default_signals()
    try:
        os.execv(program, command)
    except OSError as exc:
        print(f"heron sandbox: {command[0]}: {exc.strerror}", file=sys.stderr)
    return DENIED


def _which(name: str) -> str:
    if "/" in name:
        return name
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return name


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
