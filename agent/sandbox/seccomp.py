"""seccomp for sandboxed commands: a classic-BPF filter built here and installed through ctypes.

    python -I -S seccomp.py PROFILE -- COMMAND [ARG...]

installs PROFILE's filter on its own process and execs the command: the filter holds for
everything the command starts, and no child can lift it. `build()` gives the same program as
bytes (what `bwrap --seccomp FD` reads); `install()` puts it on the calling thread (and, with
TSYNC, any other), after no-new-privs. Two profiles:

- "namespaced": the command runs in Heron's user, mount and network namespaces, which already
  hide the filesystem, the network and other processes. Denied (EPERM) is what a namespace does
  not cover: other processes' memory and descriptors (ptrace, process_vm_*, pidfd_getfd, kcmp),
  the kernel keyrings (per user, not per namespace), mounts, roots and new namespaces (a user
  namespace gives its owner CAP_SYS_ADMIN over its own mounts: a command could remount what the
  sandbox made read-only), clone with a CLONE_NEW* flag, and kernel surfaces no command needs:
  bpf, perf_event_open, userfaultfd, io_uring (its operations never pass through seccomp),
  modules, kexec, file handles, acct, swap, reboot, the clock, quotas, personality changes and
  terminal injection (ioctl TIOCSTI, TIOCLINUX). clone3 gets ENOSYS: its flags sit in memory
  that seccomp cannot read, and glibc falls back to clone, whose flags it can.
- "landlock-only": no namespaces; Landlock alone confines files. On top of "namespaced": socket()
  in every family, connect and bind (Landlock has no right for pathname Unix sockets — Docker,
  D-Bus, X11, ssh-agent — nor for UDP, and TCP only from ABI 4), socketpair other than a
  stream or seqpacket Unix pair (a datagram pair can `sendto` any named datagram socket:
  journald, syslog), System V IPC (a command could attach, read and write the shared memory
  of any process of the user's: an IPC namespace is what hides it), truncate by path
  (Landlock's TRUNCATE right came with ABI 3), and the metadata calls Landlock does not
  cover: chmod, chown, timestamps (even `touch`'s "now": the times of any file of the user's
  would change), xattrs and file_setattr; and the calls that act on another process by its pid,
  which Landlock's scoping does not cover (prlimit, setpriority, the scheduler's calls, ioprio,
  page migration, process_madvise): only the caller's own (pid 0) are let through. Seccomp
  cannot tell a path inside the workspace from one outside, so the metadata calls are denied
  everywhere: `chmod +x`, `touch`, `cp -p`, `tar x` and installers that set modes or times
  fail under this profile, and so do programs that need SysV shared memory (PostgreSQL).

Both profiles first check that the call comes from this machine's own ABI: a call through
another one (i386 `int 0x80` on x86_64, x32 numbers) would be read against the wrong syscall
table, so it kills the process (SIGSYS) instead of answering: no 64-bit program makes one, and
a 32-bit program dies at its first call with "Bad system call" instead of half-running on
errors. Syscalls not listed are allowed; a listed one the kernel lacks is denied harmlessly.

Built here rather than with libseccomp: the filter must be in place before anything else is
read, by a bare script (`-I -S`, standard library only) that cannot count on a C library or a
binding being installed, and the program is small enough to test branch by branch
(tests/test_sandbox_seccomp.py runs it in a BPF interpreter and in the kernel).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # not `signal`: its enums slow the start
import ctypes
import os
import struct
import sys

# Every syscall the filter names: its number on x86_64 and on aarch64 ("-": none there, as
# aarch64 has only the *at forms of chmod, chown and utime), and which profile denies it
# outright: N both ("namespaced" and "landlock-only"), L "landlock-only"; A: its arguments
# decide (`_checks`), E: ENOSYS in both, ".": allowed (`install` uses it). Numbers from the kernel's
# arch/x86/entry/syscalls/syscall_64.tbl and scripts/syscall.tbl (the generic table of arm64);
# the tests check them against the installed headers: a wrong one would silently leave a hole.
TABLE = """
ioctl              16  29 A   shmget             29 194 L   shmat              30 196 L
shmctl             31 195 L   socket             41 198 L   connect            42 203 L
bind               49 200 L   socketpair         53 199 A   clone              56 220 A
semget             64 190 L   semop              65 193 L   semctl             66 191 L
msgget             68 186 L   msgsnd             69 189 L   msgrcv             70 188 L
msgctl             71 187 L   truncate           76  45 L   chmod              90   - L
fchmod             91  52 L   chown              92   - L   fchown             93  55 L
lchown             94   - L   ptrace            101 117 N   utime             132   - L
personality       135  92 A   pivot_root        155  41 N   adjtimex          159 171 N
chroot            161  51 N   acct              163  89 N   settimeofday      164 170 N
mount             165  40 N   umount2           166  39 N   swapon            167 224 N
swapoff           168 225 N   reboot            169 142 N   init_module       175 105 N
delete_module     176 106 N   quotactl          179  60 N   setxattr          188   5 L
lsetxattr         189   6 L   fsetxattr         190   7 L   removexattr       197  14 L
lremovexattr      198  15 L   fremovexattr      199  16 L   lookup_dcookie    212  18 N
semtimedop        220 192 L   clock_settime     227 112 N   utimes            235   - L
kexec_load        246 104 N   add_key           248 217 N   request_key       249 218 N
keyctl            250 219 N   fchownat          260  54 L   futimesat         261   - L
fchmodat          268  53 L   unshare           272  97 N   utimensat         280  88 L
perf_event_open   298 241 N   name_to_handle_at 303 264 N   open_by_handle_at 304 265 N
clock_adjtime     305 266 N   setns             308 268 N   process_vm_readv  310 270 N
process_vm_writev 311 271 N   kcmp              312 272 N   finit_module      313 273 N
seccomp           317 277 .   kexec_file_load   320 294 N   bpf               321 280 N
userfaultfd       323 282 N   io_uring_setup    425 425 N   io_uring_enter    426 426 N
io_uring_register 427 427 N   open_tree         428 428 N   move_mount        429 429 N
fsopen            430 430 N   fsconfig          431 431 N   fsmount           432 432 N
fspick            433 433 N   clone3            435 435 E   pidfd_getfd       438 438 N
mount_setattr     442 442 N   quotactl_fd       443 443 N   fchmodat2         452 452 L
setxattrat        463 463 L   removexattrat     466 466 L   open_tree_attr    467 467 N
file_setattr      469 469 L   setpriority       141 140 A   sched_setparam    142 118 A
sched_setscheduler 144 119 A  sched_setaffinity 203 122 A   ioprio_set        251  30 A
migrate_pages     256 238 A   move_pages        279 239 A   prlimit64         302 261 A
sched_setattr     314 274 A   process_madvise   440 440 L   process_mrelease  448 448 L
"""
_WORDS = TABLE.split()
ROWS = [_WORDS[i : i + 4] for i in range(0, len(_WORDS), 4)]
MACHINES = ("x86_64", "aarch64")
SYSCALLS = {
    m: {r[0]: int(r[1 + c]) for r in ROWS if r[1 + c] != "-"} for c, m in enumerate(MACHINES)
}
NAMESPACED = tuple(r[0] for r in ROWS if r[3] == "N")
LANDLOCK_ONLY = NAMESPACED + tuple(r[0] for r in ROWS if r[3] == "L")
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # seccomp_data.arch, native calls
X32_BIT = 0x40000000  # x86_64: a syscall number with this bit is an x32 call
PROFILES = {"namespaced": NAMESPACED, "landlock-only": LANDLOCK_ONLY}

CLONE_NEW = 0x7E020000  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET (NEWTIME is 0x80:
# in clone's flags that bit belongs to the exit signal; unshare and clone3 are denied whole)
TIOCSTI, TIOCLINUX = 0x5412, 0x541C  # push input into a terminal; the console's paste buffer
FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR = 0x40086602, 0x401C5820  # chattr: metadata again
PERSONALITY_OK = (0, 0xFFFFFFFF)  # PER_LINUX, and the query
AF_UNIX, SOCK_STREAM, SOCK_SEQPACKET, SOCK_TYPE_MASK = 1, 1, 5, 0xF
# Calls on another process named by a pid argument (its index): Landlock scopes signals and
# ptrace, not these. Only 0, the caller itself, is let through.
OWN_PID_ARG = {
    "prlimit64": 0, "sched_setparam": 0, "sched_setscheduler": 0, "sched_setaffinity": 0,
    "sched_setattr": 0, "migrate_pages": 0, "move_pages": 0,
}  # fmt: skip
# setpriority and ioprio_set: (which, who) with who 0, and `which` the process or its group:
# "the user" (every process of theirs, the editor's too) is not let through.
OWN_PRIORITY = {"setpriority": (0, 1), "ioprio_set": (1, 2)}

RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM, ENOSYS = 1, 38  # the same on every architecture this knows
LD_ABS, JEQ, JGE, JSET, AND, RET = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06  # word loads, K operands
INSN = struct.Struct("=HBBI")  # struct sock_filter
NR, ARCH = 0, 4  # offsets in struct seccomp_data; args[i] at 16 + 8 * i (little-endian words)
PR_SET_NO_NEW_PRIVS = 38
SET_MODE_FILTER, GET_ACTION_AVAIL, FLAG_TSYNC = 1, 2, 1

DENIED = 126  # the launcher's exit status when it cannot confine (the shell's "cannot execute")

Target = int | str  # a jump: 0 falls through, a string names a label further on
Item = tuple[int, Target, Target, int] | str  # an instruction, or a label


class SeccompError(OSError):
    """The kernel refused the filter, or this system has no table for it."""


def _arg(index: int, high: bool = False) -> int:
    return 16 + 8 * index + (4 if high else 0)


def _load(offset: int) -> Item:
    return (LD_ABS, 0, 0, offset)


def _any_of(values: tuple[int, ...], hit: Target, miss: Target) -> list[Item]:
    """Jump to `hit` when the accumulator is one of `values`, else to `miss`."""
    *first, last = values
    jumps: list[Item] = [(JEQ, hit, 0, v) for v in first]
    return [*jumps, (JEQ, hit, miss, last)]


def _checks(profile: str) -> dict[str, list[Item]]:
    """Calls denied by their arguments: their blocks end at "allow" or "eperm". Only the low
    word is read where the kernel itself truncates the argument to 32 bits (clone's flags,
    ioctl's command, personality, socketpair's family and type): a high word cannot hide a
    value from the check."""
    ioctls: tuple[int, ...] = (TIOCSTI, TIOCLINUX)
    checks: dict[str, list[Item]] = {
        "clone": [_load(_arg(0)), (JSET, "eperm", "allow", CLONE_NEW)],
        "personality": [_load(_arg(0)), *_any_of(PERSONALITY_OK, "allow", "eperm")],
    }
    if profile == "landlock-only":
        ioctls += (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR)
        checks["socketpair"] = [
            _load(_arg(0)),
            (JEQ, 0, "eperm", AF_UNIX),
            _load(_arg(1)),
            (AND, 0, 0, SOCK_TYPE_MASK),  # SOCK_CLOEXEC and SOCK_NONBLOCK are flags above
            *_any_of((SOCK_STREAM, SOCK_SEQPACKET), "allow", "eperm"),
        ]
        for name, index in OWN_PID_ARG.items():  # pid_t: the kernel reads the low word
            checks[name] = [_load(_arg(index)), (JEQ, "allow", "eperm", 0)]
        for name, whiches in OWN_PRIORITY.items():
            checks[name] = [
                _load(_arg(1)),
                (JEQ, 0, "eperm", 0),
                _load(_arg(0)),
                *_any_of(whiches, "allow", "eperm"),
            ]
    checks["ioctl"] = [_load(_arg(1)), *_any_of(ioctls, "eperm", "allow")]
    return checks


def build(profile: str, machine: str | None = None) -> bytes:
    """The filter for `profile` as struct sock_filter records, for this machine's architecture
    (or `machine`, as `uname -m` names it). ValueError for an unknown profile or machine."""
    if profile not in PROFILES:
        raise ValueError(f"unknown seccomp profile {profile!r} (known: {', '.join(PROFILES)})")
    machine = machine or os.uname().machine
    if machine not in SYSCALLS:
        raise ValueError(f"no syscall table for {machine}: seccomp is not available there")
    numbers = SYSCALLS[machine]
    checks = {name: block for name, block in _checks(profile).items() if name in numbers}
    program: list[Item] = [_load(ARCH), (JEQ, 0, "kill", AUDIT_ARCH[machine]), _load(NR)]
    if machine == "x86_64":
        program.append((JGE, "x32", 0, X32_BIT))
    denied = sorted({numbers[name] for name in PROFILES[profile] if name in numbers})
    program += [(JEQ, "eperm", 0, nr) for nr in denied]
    program += [(JEQ, name, 0, numbers[name]) for name in checks]
    program += [(JEQ, "enosys", 0, numbers["clone3"]), (RET, 0, 0, RET_ALLOW)]
    if machine == "x86_64":  # -1 is no call at all (the kernel answers ENOSYS): let it be
        program += ["x32", (JEQ, "allow", "kill", 0xFFFFFFFF)]
    for name, block in checks.items():
        program += [name, *block]
    program += [
        "allow", (RET, 0, 0, RET_ALLOW),
        "eperm", (RET, 0, 0, RET_ERRNO | EPERM),
        "enosys", (RET, 0, 0, RET_ERRNO | ENOSYS),
        "kill", (RET, 0, 0, RET_KILL_PROCESS),
    ]  # fmt: skip
    return assemble(program)


def assemble(items: list[Item]) -> bytes:
    """Resolve the labels into classic BPF's forward jump offsets (0-255)."""
    labels: dict[str, int] = {}
    code: list[tuple[int, Target, Target, int]] = []
    for item in items:
        if isinstance(item, str):
            labels[item] = len(code)
        else:
            code.append(item)

    def offset(target: Target, index: int) -> int:
        if isinstance(target, int):
            return target
        distance = labels[target] - index - 1
        if not 0 <= distance <= 255:
            raise ValueError(f"seccomp: the jump to {target!r} is out of reach ({distance})")
        return distance

    return b"".join(
        INSN.pack(op, offset(jt, i), offset(jf, i), k) for i, (op, jt, jf, k) in enumerate(code)
    )


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc: ctypes.CDLL | None = None
_supported: bool | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _seccomp(operation: int, flags: int, argument: object) -> int:
    nr = SYSCALLS[os.uname().machine]["seccomp"]
    wide = [ctypes.c_long(nr), ctypes.c_long(operation), ctypes.c_long(flags)]
    result: int = _c().syscall(*wide, argument)
    return result


def supported() -> bool:
    """Whether `install` can work here: Linux on an architecture with a syscall table (x86_64,
    aarch64) running a 64-bit process, with a kernel that filters (KILL_PROCESS: 4.14+)."""
    global _supported
    if _supported is None:
        _supported = False
        machine = os.uname().machine if hasattr(os, "uname") else ""
        if sys.platform == "linux" and machine in SYSCALLS and struct.calcsize("P") == 8:
            action = ctypes.c_uint32(RET_KILL_PROCESS)
            try:  # noqa: SIM105 (contextlib would slow the launcher's start)
                _supported = _seccomp(GET_ACTION_AVAIL, 0, ctypes.pointer(action)) == 0
            except (OSError, AttributeError):
                pass
    return _supported


def install(profile: str) -> None:
    """Confine the calling thread (and its other threads, if any) with `profile` for good."""
    try:
        program = build(profile)
    except ValueError as exc:
        raise SeccompError(0, str(exc)) from None  # strerror carries the message
    install_program(program)


def install_program(program: bytes) -> None:
    """Set no-new-privs, then load `program` (sock_filter records) as a seccomp filter."""
    if not 0 < len(program) <= 4096 * INSN.size or len(program) % INSN.size:
        raise SeccompError(22, f"seccomp: not a filter program ({len(program)} bytes)")
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    if _c().prctl(PR_SET_NO_NEW_PRIVS, one, zero, zero, zero) != 0:
        _raise("cannot set no-new-privs")
    code = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // INSN.size, ctypes.addressof(code))
    result = _seccomp(SET_MODE_FILTER, FLAG_TSYNC, ctypes.pointer(fprog))
    if result > 0:  # TSYNC names the thread it could not move to the filter
        raise SeccompError(0, f"seccomp: thread {result} cannot take the filter")
    if result < 0:
        _raise("the kernel refused the seccomp filter")


def _raise(what: str) -> None:
    errno = ctypes.get_errno()
    raise SeccompError(errno, f"{what}: {os.strerror(errno)}")


USAGE = f"usage: seccomp.py {'|'.join(PROFILES)} -- COMMAND [ARG...]"


def main(argv: list[str]) -> int:
    """Install the profile's filter, then exec the command; never runs it unfiltered."""
    if len(argv) < 3 or argv[0] not in PROFILES or argv[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    try:
        install(argv[0])
    except OSError as exc:
        print(f"heron sandbox: cannot filter the command's calls: {exc.strerror}", file=sys.stderr)
        return DENIED
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; an exec keeps that
        _signal.signal(sig, _signal.SIG_DFL)
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"heron sandbox: {argv[2]}: {exc.strerror}", file=sys.stderr)
    return DENIED


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
