"""The seccomp layer (agent.sandbox.seccomp) on its own.

Three ways in: a classic-BPF interpreter here runs the built programs of both architectures
over crafted seccomp_data records, so every branch is tried without the kernel; the syscall
numbers and constants are checked against the installed kernel headers and, for calls newer
than them, against what the running kernel does with each number; and real child processes run
under `python -I -S seccomp.py PROFILE -- …` and make each call, next to an unfiltered baseline.
The deny lists below are the specification (issue 24), written out independently of the module.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.sandbox import seccomp

SCRIPT = Path(seccomp.__file__)
MACHINE = os.uname().machine
needs_seccomp = pytest.mark.skipif(not seccomp.supported(), reason="no seccomp filter here")
x86_64_only = pytest.mark.skipif(MACHINE != "x86_64", reason="an x86_64 ABI")

# What each profile must deny with EPERM (issue 24), and the siblings the module adds: the new
# mount API's open_tree_attr, quotactl_fd, clock_adjtime, and pidfd_getfd and kcmp, which reach
# into other processes as ptrace does; without namespaces, System V IPC (another process's
# shared memory) too.
BOTH = set(
    """
    ptrace process_vm_readv process_vm_writev keyctl add_key request_key
    mount umount2 mount_setattr move_mount open_tree fsopen fsconfig fsmount fspick
    pivot_root chroot unshare setns bpf perf_event_open userfaultfd
    io_uring_setup io_uring_enter io_uring_register kexec_load kexec_file_load
    init_module finit_module delete_module open_by_handle_at name_to_handle_at
    acct swapon swapoff reboot settimeofday clock_settime adjtimex quotactl lookup_dcookie
    open_tree_attr quotactl_fd clock_adjtime pidfd_getfd kcmp
    """.split()  # noqa: SIM905 (a list of words)
)
LANDLOCK_ONLY = BOTH | set(
    """
    socket connect bind truncate
    shmget shmat shmctl semget semop semctl semtimedop msgget msgsnd msgrcv msgctl
    chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat
    setxattr lsetxattr fsetxattr setxattrat removexattr lremovexattr fremovexattr removexattrat
    file_setattr utime utimes futimesat utimensat process_madvise process_mrelease
    """.split()  # noqa: SIM905
)
# Without namespaces, calls on another process by pid (Landlock scopes signals and ptrace, not
# these): the argument that names it, or for setpriority/ioprio_set (which, who) the `which`
# values let through with who 0.
OWN_PID = {
    "prlimit64": 0, "sched_setparam": 0, "sched_setscheduler": 0, "sched_setaffinity": 0,
    "sched_setattr": 0, "migrate_pages": 0, "move_pages": 0,
}  # fmt: skip
OWN_PRIORITY = {"setpriority": (0, 1), "ioprio_set": (1, 2)}
DENIED = {"namespaced": BOTH, "landlock-only": LANDLOCK_ONLY}

# The kernel's values (linux/seccomp.h, audit.h, filter.h, sched.h, ioctls), for the test's
# own interpreter and records: not taken from the module under test.
KILL_PROCESS, ERRNO, ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM, ENOSYS = ERRNO | errno.EPERM, ERRNO | errno.ENOSYS
AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7, "i386": 0x40000003, "arm": 0x40000028}
CLONE_NEW = {
    "NEWNS": 0x00020000, "NEWCGROUP": 0x02000000, "NEWUTS": 0x04000000,
    "NEWIPC": 0x08000000, "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000,
}  # fmt: skip
# VM FS FILES SIGHAND THREAD SYSVSEM SETTLS PARENT_SETTID CHILD_CLEARTID: pthread_create's
CLONE_THREAD_FLAGS = 0x003D0F00
CLONE_THREAD, SIGCHLD = 0x00010000, 17
TIOCSTI, TIOCLINUX, TCGETS = 0x5412, 0x541C, 0x5401
FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR = 0x40086602, 0x401C5820
AF_UNIX, AF_INET = 1, 2
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
SOCK_NONBLOCK, SOCK_CLOEXEC = 0o4000, 0o2000000
ADDR_NO_RANDOMIZE, PER_LINUX32, READ_IMPLIES_EXEC = 0x0040000, 0x0008, 0x0400000


def run_filter(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Classic BPF as the kernel runs a seccomp filter: what it returns for this call. Only the
    instructions a seccomp program may use here are known; anything else fails the test."""
    insns = list(struct.iter_unpack("=HBBI", program))
    assert 0 < len(insns) <= 4096 and len(program) % 8 == 0
    data = struct.pack("<IIQ6Q", nr & 0xFFFFFFFF, arch, 0, *(*args, 0, 0, 0, 0, 0, 0)[:6])
    a, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            assert k % 4 == 0 and k < len(data)
            a = struct.unpack_from("<I", data, k)[0]
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset #k
            hit = a == k if code == 0x15 else a >= k if code == 0x35 else bool(a & k)
            pc += jt if hit else jf
        elif code == 0x54:  # and #k
            a &= k
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"instruction {code:#x} at {pc - 1}")
        assert pc < len(insns), "the program runs off its end"


def numbers(machine: str) -> dict[str, int]:
    return seccomp.SYSCALLS[machine]


MACHINES = ["x86_64", "aarch64"]
PROFILES = ["namespaced", "landlock-only"]
both_ways = pytest.mark.parametrize("machine", MACHINES)
each_profile = pytest.mark.parametrize("profile", PROFILES)


def verdict(profile: str, machine: str, name: str, *args: int) -> int:
    return run_filter(seccomp.build(profile, machine), numbers(machine)[name], AUDIT[machine], args)


# ---- The programs, in the interpreter ------------------------------------------------------


@both_ways
@each_profile
def test_each_listed_call_is_denied_and_every_other_number_allowed(profile, machine):
    program = seccomp.build(profile, machine)
    table = numbers(machine)
    denied = {table[name] for name in DENIED[profile] if name in table}
    # aarch64 has no such calls (only their *at forms)
    assert DENIED[profile] - set(table) <= {
        "chmod",
        "chown",
        "lchown",
        "utime",
        "utimes",
        "futimesat",
    }
    for nr in [*range(1024), 0x3FFFFFFF, 0xFFFFFFFF]:
        got = run_filter(program, nr, AUDIT[machine])
        if nr in denied:
            assert got == EPERM, nr
        elif nr == table["clone3"]:
            assert got == ENOSYS
        elif nr == table["socketpair"] and profile == "landlock-only":
            assert got == EPERM  # family 0 is not AF_UNIX
        elif nr == table["ioprio_set"] and profile == "landlock-only":
            assert got == EPERM  # `which` 0 is none of the process's own
        else:
            assert got == ALLOW, nr  # clone, ioctl, personality, pid 0: harmless zeros


@both_ways
@each_profile
def test_a_call_through_another_abi_kills_the_process(profile, machine):
    program = seccomp.build(profile, machine)
    other = {"x86_64": "aarch64", "aarch64": "x86_64"}[machine]
    for arch in (AUDIT["i386"], AUDIT["arm"], AUDIT[other], 0):
        for nr in (0, 20, 39, numbers(machine)["ptrace"], 0xFFFFFFFF):
            assert run_filter(program, nr, arch) == KILL_PROCESS


@each_profile
def test_x32_numbers_kill_and_minus_one_stays_the_kernels_enosys(profile):
    program = seccomp.build(profile, "x86_64")
    for nr in (0x40000000 | 39, 0x40000000 | 101, 0x40000000 + 521, 0x80000000, 0xFFFFFFFE):
        assert run_filter(program, nr, AUDIT["x86_64"]) == KILL_PROCESS
    assert run_filter(program, 0xFFFFFFFF, AUDIT["x86_64"]) == ALLOW
    aarch64 = seccomp.build(profile, "aarch64")
    assert run_filter(aarch64, 0x40000000 | 172, AUDIT["aarch64"]) == ALLOW  # no x32 there


@both_ways
@each_profile
def test_clone_is_denied_exactly_when_it_asks_for_a_namespace(profile, machine):
    for flag in CLONE_NEW.values():
        for extra in (0, SIGCHLD, CLONE_THREAD_FLAGS, 0xFFFFFFFF_00000000):
            assert verdict(profile, machine, "clone", flag | extra) == EPERM
    for flags in (0, SIGCHLD, CLONE_THREAD_FLAGS, 0x01200000 | SIGCHLD, 0x00004100 | SIGCHLD):
        assert verdict(profile, machine, "clone", flags) == ALLOW  # threads, fork, vfork
    # The kernel reads only the low 32 bits of clone's flags: bits above change nothing.
    assert verdict(profile, machine, "clone", CLONE_NEW["NEWUSER"] << 32 | SIGCHLD) == ALLOW
    assert verdict(profile, machine, "clone3", 0, 0) == ENOSYS


@both_ways
@each_profile
def test_terminal_injection_is_denied_even_behind_high_bits(profile, machine):
    for command in (TIOCSTI, TIOCLINUX):
        for high in (0, 1 << 32, 0xFFFFFFFF_00000000):  # ioctl's command is an unsigned int
            assert verdict(profile, machine, "ioctl", 0, command | high) == EPERM
    chattr = EPERM if profile == "landlock-only" else ALLOW
    for command in (FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR):
        assert verdict(profile, machine, "ioctl", 3, command) == chattr
    for command in (TCGETS, 0x5413, 0x80086601, TIOCSTI + 1):  # TIOCGWINSZ, FS_IOC_GETFLAGS
        assert verdict(profile, machine, "ioctl", 1, command) == ALLOW


@both_ways
@each_profile
def test_personality_may_only_be_read_or_reset(profile, machine):
    for persona in (0, 0xFFFFFFFF, 0xFFFFFFFF_00000000):
        assert verdict(profile, machine, "personality", persona) == ALLOW
    for persona in (ADDR_NO_RANDOMIZE, PER_LINUX32, READ_IMPLIES_EXEC, 0xFFFFFFFE):
        assert verdict(profile, machine, "personality", persona) == EPERM


@both_ways
def test_without_namespaces_only_stream_unix_pairs_are_left(machine):
    flags = SOCK_CLOEXEC | SOCK_NONBLOCK
    for kind in (SOCK_STREAM, SOCK_SEQPACKET, SOCK_STREAM | flags, SOCK_SEQPACKET | flags):
        assert verdict("landlock-only", machine, "socketpair", AF_UNIX, kind) == ALLOW
        assert verdict("namespaced", machine, "socketpair", AF_UNIX, kind) == ALLOW
    for family, kind in [(AF_UNIX, SOCK_DGRAM), (AF_UNIX, SOCK_RAW), (AF_UNIX, SOCK_DGRAM | flags)]:
        assert verdict("landlock-only", machine, "socketpair", family, kind) == EPERM
    for family in (AF_INET, AF_UNIX | 1 << 32 | 2, 0):
        assert verdict("landlock-only", machine, "socketpair", family, SOCK_STREAM) == EPERM
    for family, kind in [(AF_UNIX, SOCK_DGRAM), (AF_INET, SOCK_DGRAM)]:
        assert verdict("namespaced", machine, "socketpair", family, kind) == ALLOW
        assert verdict("namespaced", machine, "socket", family, kind) == ALLOW
        assert verdict("landlock-only", machine, "socket", family, kind) == EPERM


@both_ways
def test_without_namespaces_only_the_callers_own_process_is_reniced_or_limited(machine):
    table = numbers(machine)
    for name, index in OWN_PID.items():
        own = tuple(0 for _ in range(index + 1))
        other = tuple(4242 if i == index else 0 for i in range(index + 1))
        assert verdict("landlock-only", machine, name, *own) == ALLOW, name
        assert verdict("landlock-only", machine, name, *other) == EPERM, name
        assert verdict("namespaced", machine, name, *other) == ALLOW, name  # a pid namespace
    for name, whiches in OWN_PRIORITY.items():
        for which in range(4):
            expected_own = ALLOW if which in whiches else EPERM  # "the user": never
            assert verdict("landlock-only", machine, name, which, 0) == expected_own
            assert verdict("landlock-only", machine, name, which, 4242) == EPERM
    assert set(OWN_PID) | set(OWN_PRIORITY) <= set(table)


def test_the_builder_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match="unknown seccomp profile"):
        seccomp.build("bogus", "x86_64")
    with pytest.raises(ValueError, match="no syscall table for riscv64"):
        seccomp.build("namespaced", "riscv64")
    with pytest.raises(ValueError, match="out of reach"):
        seccomp.assemble([(0x15, "far", 0, 1), *[(0x06, 0, 0, 0)] * 256, "far", (0x06, 0, 0, 0)])
    with pytest.raises(seccomp.SeccompError, match="unknown seccomp profile"):
        seccomp.install("bogus")  # refused before touching the process
    for program in (b"", b"\0" * 7, b"\0" * 8 * 4097):
        with pytest.raises(seccomp.SeccompError, match="not a filter program"):
            seccomp.install_program(program)  # likewise


def test_supported_says_no_for_a_machine_without_a_table(monkeypatch):
    uname = os.uname()
    fake = os.uname_result((*uname[:4], "riscv64"))
    monkeypatch.setattr(seccomp, "_supported", None)
    monkeypatch.setattr(seccomp.os, "uname", lambda: fake)
    assert seccomp.supported() is False


# ---- The numbers and constants -------------------------------------------------------------


def header_numbers(path: Path) -> dict[str, int]:
    text = path.read_text()
    found = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", text)}
    # The generic header spells 64-bit-only calls (truncate, …) through __NR3264_ names.
    wide = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR3264_(\w+)\s+(\d+)\b", text)}
    for m in re.finditer(r"#define __NR_(\w+)\s+__NR3264_(\w+)", text):
        if m[2] in wide:  # (some only under #ifdef, for architectures that have them)
            found.setdefault(m[1], wide[m[2]])
    return found


HEADERS = {
    "x86_64": [Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")],
    "aarch64": [Path("/usr/include/asm-generic/unistd.h")],
}
HEADERS["x86_64"].append(Path("/usr/include/asm/unistd_64.h"))
# Newer than the headers of the oldest distributions we meet; each has a test below that checks
# what the running kernel does with the number.
CHECKED_BY_BEHAVIOUR = {"fchmodat2", "setxattrat", "removexattrat", "open_tree_attr"}
CHECKED_BY_BEHAVIOUR |= {"file_setattr"}


@both_ways
def test_the_syscall_numbers_match_the_installed_headers(machine):
    header = next((h for h in HEADERS[machine] if h.is_file()), None)
    if header is None:
        pytest.skip(f"no kernel headers for {machine}")
    known = header_numbers(header)
    assert known["read"] == {"x86_64": 0, "aarch64": 63}[machine]  # the right header
    newest = max(known.values())
    for name, nr in numbers(machine).items():
        if name in known:
            assert nr == known[name], name
        else:
            assert nr > newest and name in CHECKED_BY_BEHAVIOUR, name
    if machine == "aarch64":  # the legacy path calls do not exist in the generic table
        assert not {"chmod", "chown", "lchown", "utime", "utimes", "futimesat"} & set(known)


def test_new_calls_have_one_number_on_every_architecture():
    """Since 424 every architecture numbers new calls alike (alpha apart)."""
    x86, arm = numbers("x86_64"), numbers("aarch64")
    assert {n: x86[n] for n in x86 if x86[n] >= 424} == {n: arm[n] for n in arm if arm[n] >= 424}
    assert set(x86) - set(arm) == {"chmod", "chown", "lchown", "utime", "utimes", "futimesat"}


C_CONSTANTS = {
    "AUDIT_ARCH_X86_64": (seccomp.AUDIT_ARCH["x86_64"], AUDIT["x86_64"]),
    "AUDIT_ARCH_AARCH64": (seccomp.AUDIT_ARCH["aarch64"], AUDIT["aarch64"]),
    "AUDIT_ARCH_I386": (AUDIT["i386"],),
    "AUDIT_ARCH_ARM": (AUDIT["arm"],),
    "SECCOMP_RET_KILL_PROCESS": (seccomp.RET_KILL_PROCESS, KILL_PROCESS),
    "SECCOMP_RET_ERRNO": (seccomp.RET_ERRNO, ERRNO),
    "SECCOMP_RET_ALLOW": (seccomp.RET_ALLOW, ALLOW),
    "SECCOMP_SET_MODE_FILTER": (seccomp.SET_MODE_FILTER,),
    "SECCOMP_GET_ACTION_AVAIL": (seccomp.GET_ACTION_AVAIL,),
    "SECCOMP_FILTER_FLAG_TSYNC": (seccomp.FLAG_TSYNC,),
    "PR_SET_NO_NEW_PRIVS": (seccomp.PR_SET_NO_NEW_PRIVS,),
    "BPF_LD | BPF_W | BPF_ABS": (seccomp.LD_ABS, 0x20),
    "BPF_JMP | BPF_JEQ | BPF_K": (seccomp.JEQ, 0x15),
    "BPF_JMP | BPF_JGE | BPF_K": (seccomp.JGE, 0x35),
    "BPF_JMP | BPF_JSET | BPF_K": (seccomp.JSET, 0x45),
    "BPF_ALU | BPF_AND | BPF_K": (seccomp.AND, 0x54),
    "BPF_RET | BPF_K": (seccomp.RET, 0x06),
    "offsetof(struct seccomp_data, nr)": (seccomp.NR,),
    "offsetof(struct seccomp_data, arch)": (seccomp.ARCH,),
    "offsetof(struct seccomp_data, args)": (seccomp._arg(0),),
    "sizeof(struct sock_filter)": (seccomp.INSN.size,),
    "CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER"
    " | CLONE_NEWPID | CLONE_NEWNET": (seccomp.CLONE_NEW, sum(CLONE_NEW.values())),
    "CLONE_THREAD": (CLONE_THREAD,),
    "TIOCSTI": (seccomp.TIOCSTI, TIOCSTI),
    "TIOCLINUX": (seccomp.TIOCLINUX, TIOCLINUX),
    "FS_IOC_SETFLAGS": (seccomp.FS_IOC_SETFLAGS, FS_IOC_SETFLAGS),
    "FS_IOC_FSSETXATTR": (seccomp.FS_IOC_FSSETXATTR, FS_IOC_FSSETXATTR),
    "AF_UNIX": (seccomp.AF_UNIX, AF_UNIX),
    "SOCK_STREAM": (seccomp.SOCK_STREAM, SOCK_STREAM),
    "SOCK_SEQPACKET": (seccomp.SOCK_SEQPACKET, SOCK_SEQPACKET),
    "SOCK_DGRAM": (SOCK_DGRAM,),
    "SOCK_CLOEXEC": (SOCK_CLOEXEC,),
}


def test_the_constants_match_the_c_headers(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not Path("/usr/include/linux/seccomp.h").is_file():
        pytest.skip("no C compiler or kernel headers")
    headers = "stdio.h stddef.h linux/audit.h linux/filter.h linux/fs.h linux/sched.h"
    headers += " linux/seccomp.h sys/ioctl.h sys/prctl.h sys/socket.h"
    lines = [f"#include <{h}>" for h in headers.split()] + ["int main(void) {"]
    lines += [f'printf("%lu\\n", (unsigned long)({c}));' for c in C_CONSTANTS]
    (tmp_path / "c.c").write_text("\n".join([*lines, "return 0; }"]))
    built = subprocess.run([cc, "-o", tmp_path / "c", tmp_path / "c.c"], capture_output=True)
    if built.returncode:
        pytest.skip(f"the headers do not build here: {built.stderr[-300:]!r}")
    values = subprocess.check_output([tmp_path / "c"], text=True).split()
    for (name, ours), value in zip(C_CONSTANTS.items(), values, strict=True):
        assert set(ours) == {int(value)}, name


def _syscall(name: str, *args: object) -> int:
    """Call by this machine's number from the module's table; -errno on failure."""
    libc = ctypes.CDLL(None, use_errno=True)
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result: int = libc.syscall(ctypes.c_long(numbers(MACHINE)[name]), *wide)
    return -ctypes.get_errno() if result < 0 else result


def _skip_unless_present(result: int, name: str) -> None:
    if result in (-errno.ENOSYS, -errno.EOPNOTSUPP, -errno.ENOTTY):
        pytest.skip(f"{name} is not available on this kernel or filesystem")


@pytest.mark.skipif(MACHINE not in MACHINES, reason="no table for this machine")
def test_the_newest_numbers_do_what_their_names_say(tmp_path):
    """Unfiltered, in this process, on a file of its own: each number is the call we deny."""
    path = tmp_path / "f"
    path.write_text("x")
    path.chmod(0o644)
    name_of = ctypes.c_char_p(bytes(path))
    at_fdcwd = -100

    result = _syscall("fchmodat2", at_fdcwd, name_of, 0o600, 0)
    _skip_unless_present(result, "fchmodat2")
    assert result == 0 and path.stat().st_mode & 0o777 == 0o600

    fd = _syscall("open_tree_attr", at_fdcwd, name_of, 0, None, 0)  # as open_tree: an O_PATH fd
    _skip_unless_present(fd, "open_tree_attr")
    assert fd >= 0 and os.readlink(f"/proc/self/fd/{fd}") == str(path)
    os.close(fd)

    value = ctypes.create_string_buffer(b"heron", 5)
    xattr_args = ctypes.create_string_buffer(struct.pack("=QII", ctypes.addressof(value), 5, 0))
    result = _syscall("setxattrat", at_fdcwd, name_of, 0, b"user.heron", xattr_args, 16)
    _skip_unless_present(result, "setxattrat")
    assert result == 0 and os.getxattr(path, "user.heron") == b"heron"
    assert _syscall("removexattrat", at_fdcwd, name_of, 0, b"user.heron") == 0
    assert "user.heron" not in os.listxattr(path)

    nodump = 0x80  # FS_XFLAG_NODUMP; read back through FS_IOC_GETFLAGS as FS_NODUMP_FL
    file_attr = ctypes.create_string_buffer(struct.pack("=QIIII", nodump, 0, 0, 0, 0))
    result = _syscall("file_setattr", at_fdcwd, name_of, file_attr, 24, 0)
    _skip_unless_present(result, "file_setattr")
    assert result == 0
    flags = ctypes.c_long(0)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert ctypes.CDLL(None).ioctl(fd, ctypes.c_ulong(0x80086601), ctypes.byref(flags)) == 0
    finally:
        os.close(fd)
    assert flags.value & 0x40


# ---- In the kernel: real processes under each profile --------------------------------------

PROBE = r"""
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
buffer = ctypes.create_string_buffer(64)
results = {}
for label, nr, args in json.loads(sys.argv[1]):
    wide = [ctypes.c_long(ctypes.addressof(buffer) if a == "BUF" else a) for a in args]
    ctypes.set_errno(0)
    results[label] = ctypes.get_errno() if libc.syscall(ctypes.c_long(nr), *wide) < 0 else 0
print(json.dumps(results))
"""


def confined(profile: str, *command: str | Path) -> list[str]:
    return [sys.executable, "-I", "-S", str(SCRIPT), profile, "--", *map(str, command)]


def probe(profile: str | None, calls: list[tuple[str, str, list[int | str]]]) -> dict[str, int]:
    table = numbers(MACHINE)
    wire = json.dumps([(label, table[name], args) for label, name, args in calls])
    command = [sys.executable, "-I", "-S", "-c", PROBE, wire]
    run = subprocess.run(confined(profile, *command) if profile else command, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    results: dict[str, int] = json.loads(run.stdout)
    return results


# Arguments that make each unfiltered call fail some other way, or succeed harmlessly, so that
# EPERM can only come from the filter. (label, call, arguments, who denies: both, L, -, E)
ARGUMENT_PROBES: list[tuple[str, str, list[int | str], str]] = [
    *[(f"clone {n}", "clone", [flag | CLONE_THREAD], "both") for n, flag in CLONE_NEW.items()],
    ("clone NEWUSER in the ignored high word", "clone", [(0x10000000 << 32) | CLONE_THREAD], "-"),
    ("clone, a thread without its signal handlers", "clone", [CLONE_THREAD], "-"),
    ("clone3", "clone3", [0, 0], "E"),
    ("unshare nothing", "unshare", [0], "both"),
    ("TIOCSTI", "ioctl", [-1, TIOCSTI, 0], "both"),
    ("TIOCSTI behind high bits", "ioctl", [-1, (1 << 32) | TIOCSTI, 0], "both"),
    ("TIOCLINUX", "ioctl", [-1, TIOCLINUX, 0], "both"),
    ("TCGETS", "ioctl", [-1, TCGETS, 0], "-"),
    ("FS_IOC_SETFLAGS", "ioctl", [-1, FS_IOC_SETFLAGS, 0], "L"),
    ("FS_IOC_FSSETXATTR", "ioctl", [-1, FS_IOC_FSSETXATTR, 0], "L"),
    ("personality ADDR_NO_RANDOMIZE", "personality", [ADDR_NO_RANDOMIZE], "both"),
    ("personality PER_LINUX", "personality", [0], "-"),
    ("personality query", "personality", [0xFFFFFFFF], "-"),
    ("socket unix", "socket", [AF_UNIX, SOCK_STREAM, 0], "L"),
    ("socket udp", "socket", [AF_INET, SOCK_DGRAM, 0], "L"),
    ("connect", "connect", [-1, 0, 0], "L"),
    ("bind", "bind", [-1, 0, 0], "L"),
    ("socketpair stream", "socketpair", [AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, "BUF"], "-"),
    ("socketpair seqpacket", "socketpair", [AF_UNIX, SOCK_SEQPACKET, 0, "BUF"], "-"),
    ("socketpair datagram", "socketpair", [AF_UNIX, SOCK_DGRAM, 0, "BUF"], "L"),
    ("socketpair inet", "socketpair", [AF_INET, SOCK_STREAM, 0, "BUF"], "L"),
    ("utimensat now", "utimensat", [-1, 0, 0, 0], "L"),
    ("utimensat with times", "utimensat", [-1, 0, "BUF", 0], "L"),
    ("utimensat, times in the high word", "utimensat", [-1, 0, 1 << 32, 0], "L"),
    ("fchmodat", "fchmodat", [-1, 0, 0o777], "L"),
    ("fchown", "fchown", [-1, 0, 0], "L"),
    ("fsetxattr", "fsetxattr", [-1, 0, 0, 0, 0], "L"),
    ("truncate", "truncate", [0, 0], "L"),
    ("ptrace attach", "ptrace", [16, 0x3FFFFFFF, 0, 0], "both"),
    ("pidfd_getfd", "pidfd_getfd", [-1, 0, 0], "both"),
    ("setns", "setns", [-1, 0], "both"),
    ("io_uring_enter", "io_uring_enter", [-1, 0, 0, 0, 0, 0], "both"),
]


def expected(who: str, profile: str) -> int | None:
    """The errno the filter must give, or None: the kernel's own answer."""
    if who == "E":
        return errno.ENOSYS
    return errno.EPERM if who == "both" or (who == "L" and profile == "landlock-only") else None


@needs_seccomp
@each_profile
def test_the_kernel_denies_what_the_profile_lists_and_nothing_else(profile):
    calls = [(label, name, args) for label, name, args, _ in ARGUMENT_PROBES]
    # Every call the module names, with a first argument that fails it harmlessly unfiltered.
    calls += [(name, name, [-1, 0, 0, 0, 0, 0]) for name in numbers(MACHINE)]
    baseline, got = probe(None, calls), probe(profile, calls)
    for label, _, _, who in ARGUMENT_PROBES:
        assert baseline[label] != errno.EPERM, f"{label}: the baseline cannot tell"
        assert got[label] == (expected(who, profile) or baseline[label]), label
    for name in numbers(MACHINE):
        if name in DENIED[profile] or name == "clone":  # -1: every flag, namespaces included
            assert got[name] == errno.EPERM, name
        elif name == "socketpair" and profile == "landlock-only":
            assert got[name] == errno.EPERM
        elif name in {*OWN_PID, *OWN_PRIORITY} and profile == "landlock-only":
            assert got[name] == errno.EPERM, name  # pid -1 (or which -1) is not the caller
        elif name == "clone3":
            assert got[name] == errno.ENOSYS
        else:  # the filter let it through: the kernel's own answer
            assert got[name] == baseline[name], name


ORDINARY_WORK = r"""
import multiprocessing, os, socket, subprocess, sys, threading
done = []
thread = threading.Thread(target=done.append, args=["thread"])
thread.start(); thread.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
r, w = os.pipe(); os.write(w, b"pipe"); assert os.read(r, 4) == b"pipe"
a, b = socket.socketpair(); a.sendall(b"pair"); assert b.recv(4) == b"pair"
assert subprocess.run(["sh", "-c", "exit 3"]).returncode == 3  # vfork + exec
with multiprocessing.get_context("fork").Pool(2) as pool:
    assert pool.map(abs, [-1, -2]) == [1, 2]
with open("written", "w") as f:
    f.write("file")
assert open("written").read() == "file"
os.rename("written", "moved"); os.unlink("moved"); os.mkdir("dir"); os.rmdir("dir")
print("python ok", *done)
"""


@needs_seccomp
@each_profile
def test_ordinary_work_still_works(profile, tmp_path):
    script = f"ls / | wc -l >/dev/null && echo ok | cat && {sys.executable} -c '{ORDINARY_WORK}'"
    run = subprocess.run(
        confined(profile, "bash", "-c", script), cwd=tmp_path, capture_output=True, text=True
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "ok\npython ok thread\n", "")


@needs_seccomp
def test_the_launcher_passes_the_status_and_restores_sigpipe():
    assert subprocess.run(confined("namespaced", "sh", "-c", "exit 7")).returncode == 7
    run = subprocess.run(
        confined("landlock-only", "sh", "-c", "yes | head -1"), capture_output=True, text=True
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "y\n", "")


@pytest.mark.parametrize(
    "argv", [[], ["namespaced"], ["namespaced", "--"], ["bogus", "--", "true"], ["--", "true"]]
)
def test_the_launcher_rejects_a_bad_command_line(argv):
    assert seccomp.main(argv) == 2


@needs_seccomp
def test_the_launcher_never_runs_a_command_it_cannot_filter(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setattr(seccomp, "install", _refuse)
    assert seccomp.main(["namespaced", "--", "touch", str(marker)]) == seccomp.DENIED
    assert not marker.exists()
    missing = subprocess.run(confined("namespaced", tmp_path / "nothing"), capture_output=True)
    assert missing.returncode == seccomp.DENIED and b"No such file" in missing.stderr


def _refuse(profile: str) -> None:
    raise seccomp.SeccompError(errno.EINVAL, "the kernel refused the seccomp filter: no")


def in_child(code: str, profile: str | None = None) -> subprocess.CompletedProcess[str]:
    """`code` in a bare interpreter that can import the module as the zygote does."""
    prelude = f"import sys; sys.path.insert(0, {str(SCRIPT.parent)!r}); import seccomp\n"
    command = [sys.executable, "-I", "-S", "-c", prelude + textwrap.dedent(code)]
    return subprocess.run(
        confined(profile, *command) if profile else command, capture_output=True, text=True
    )


@needs_seccomp
def test_a_program_the_kernel_refuses_is_a_clear_error():
    run = in_child("""
        try:
            seccomp.install_program(b"\\0" * 8)  # no return: not a filter
        except seccomp.SeccompError as exc:
            print(exc.strerror)
    """)
    assert run.stdout == "the kernel refused the seccomp filter: Invalid argument\n"


@needs_seccomp
def test_a_filtered_command_cannot_lift_the_filter():
    run = in_child(
        """
        import ctypes
        seccomp.install_program(seccomp.assemble([(seccomp.RET, 0, 0, seccomp.RET_ALLOW)]))
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.unshare(0), ctypes.get_errno())
        """,
        "namespaced",
    )
    assert (run.returncode, run.stdout) == (0, f"-1 {errno.EPERM}\n"), run.stderr


@needs_seccomp
def test_threads_started_before_install_are_filtered_too():
    run = in_child("""
        import ctypes, os, threading
        libc = ctypes.CDLL(None, use_errno=True)
        go, done, seen = threading.Event(), threading.Event(), []
        def worker():
            go.wait()
            seen.append((libc.unshare(0), ctypes.get_errno()))
            done.set()
        threading.Thread(target=worker).start()
        seccomp.install("namespaced")
        go.set(); done.wait()
        print(seen)
    """)
    assert run.stdout == f"[(-1, {errno.EPERM})]\n", run.stderr


INT_0x80 = r"""
import ctypes, mmap, os
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes.fromhex("b814000000cd80c3"))  # mov eax, 20 (i386 getpid); int 0x80; ret
getpid = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print(getpid() == os.getpid())
"""
X32 = r"""
import ctypes
print(ctypes.CDLL(None).syscall(ctypes.c_long(0x40000000 | 39)))  # x32 getpid
"""


@needs_seccomp
@x86_64_only
@each_profile
@pytest.mark.parametrize("attack", [INT_0x80, X32], ids=["i386 int 0x80", "x32"])
def test_a_call_through_another_abi_kills_the_caller(profile, attack):
    baseline = subprocess.run([sys.executable, "-I", "-S", "-c", attack], capture_output=True)
    if baseline.returncode != 0:
        pytest.skip(f"this kernel cannot run it at all: {baseline.stderr[-200:]!r}")
    run = subprocess.run(confined(profile, sys.executable, "-I", "-S", "-c", attack))
    assert run.returncode == -signal.SIGSYS


@needs_seccomp
def test_without_namespaces_modes_and_times_stay_even_touch(tmp_path):
    key = tmp_path / "id_rsa"
    key.write_text("secret")
    key.chmod(0o600)
    os.utime(key, (1_000_000_000, 1_000_000_000))
    script = f"chmod 666 {key}; touch -d 2001-01-01 {key}; touch {key} && echo touched"
    run = subprocess.run(
        confined("landlock-only", "sh", "-c", script), capture_output=True, text=True
    )
    assert run.stdout == "" and run.stderr.count("Operation not permitted") == 3, run.stderr
    after = key.stat()
    assert after.st_mode & 0o777 == 0o600 and after.st_mtime == 1_000_000_000
    # With namespaces the filesystem is the mount namespace's job: the filter lets chmod be.
    subprocess.run(confined("namespaced", "chmod", "640", key), check=True)
    assert key.stat().st_mode & 0o777 == 0o640


LISTENERS = r"""
import socket, sys
stream, datagram = sys.argv[1:3]
results = {}
try:
    client = socket.socket(socket.AF_UNIX)
    client.connect(stream)
    client.sendall(b"docker")
    results["stream"] = "sent"
except OSError as exc:
    results["stream"] = exc.strerror
try:
    a, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"journal", datagram)
    results["datagram"] = "sent"
except OSError as exc:
    results["datagram"] = exc.strerror
print(results)
"""


@needs_seccomp
def test_without_namespaces_no_unix_socket_outside_is_reachable(tmp_path):
    """A Docker-like stream socket and a journald-like datagram socket: unfiltered, a command
    reaches both (a datagram socketpair needs no socket() and no connect()); under
    "landlock-only" neither."""
    stream_path, datagram_path = str(tmp_path / "docker.sock"), str(tmp_path / "journal")
    server = socket.socket(socket.AF_UNIX)
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with server, journal:
        journal.settimeout(30)
        server.bind(stream_path)
        server.listen()
        journal.bind(datagram_path)
        command = [sys.executable, "-I", "-S", "-c", LISTENERS, stream_path, datagram_path]
        baseline = subprocess.run(command, capture_output=True, text=True, check=True)
        assert baseline.stdout == "{'stream': 'sent', 'datagram': 'sent'}\n"
        assert journal.recv(16) == b"journal"
        run = subprocess.run(confined("landlock-only", *command), capture_output=True, text=True)
        assert run.stdout == (
            "{'stream': 'Operation not permitted', 'datagram': 'Operation not permitted'}\n"
        ), run.stderr


SHARED_MEMORY = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
address = libc.shmat(int(sys.argv[1]), None, 0)
if address == ctypes.c_void_p(-1).value:
    print("shmat:", ctypes.get_errno())
else:
    print(ctypes.string_at(address, 6).decode())
    ctypes.memmove(address, b"hacked", 6)
"""


@needs_seccomp
def test_without_namespaces_no_shared_memory_of_another_process():
    """Landlock leaves System V IPC open: unfiltered, a command attaches the segment this
    process made (mode 0600, same user), reads it and writes into it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    assert segment >= 0, os.strerror(ctypes.get_errno())
    try:
        address = libc.shmat(segment, None, 0)
        ctypes.memmove(address, b"secret", 6)
        command = [sys.executable, "-I", "-S", "-c", SHARED_MEMORY, str(segment)]
        baseline = subprocess.run(command, capture_output=True, text=True)
        assert baseline.stdout == "secret\n" and ctypes.string_at(address, 6) == b"hacked"
        ctypes.memmove(address, b"secret", 6)
        run = subprocess.run(confined("landlock-only", *command), capture_output=True, text=True)
        assert run.stdout == f"shmat: {errno.EPERM}\n", run.stderr
        assert ctypes.string_at(address, 6) == b"secret"
        libc.shmdt(ctypes.c_void_p(address))
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID


@needs_seccomp
def test_no_new_namespace_from_inside():
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-r", "true"]).returncode != 0:
        pytest.skip("no unprivileged user namespaces here to deny")
    for profile in PROFILES:
        run = subprocess.run(confined(profile, unshare, "-r", "true"), capture_output=True)
        assert run.returncode != 0 and b"Operation not permitted" in run.stderr


@needs_seccomp
def test_bwrap_takes_the_program_as_it_is(tmp_path):
    """`bwrap --seccomp FD` reads the same bytes `build()` gives: inside, a nested user
    namespace that bwrap alone allows is refused."""
    bwrap = shutil.which("bwrap") or "bwrap"
    sandbox = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all"]
    nested = [*sandbox, "unshare", "-r", "true"]
    if not shutil.which(bwrap) or subprocess.run(nested, capture_output=True).returncode:
        pytest.skip("no bubblewrap here that allows a nested user namespace to deny")
    program = tmp_path / "filter.bpf"
    program.write_bytes(seccomp.build("namespaced"))
    with program.open("rb") as f:
        run = subprocess.run(
            [*sandbox, "--seccomp", str(f.fileno()), "sh", "-c", "unshare -r true; echo $?"],
            pass_fds=[f.fileno()],
            capture_output=True,
            text=True,
        )
    assert run.stdout == "1\n" and "Operation not permitted" in run.stderr
