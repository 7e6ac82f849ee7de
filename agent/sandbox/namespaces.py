"""Heron's own namespaces, for when bubblewrap is absent: a user, mount, network, pid, IPC and
UTS namespace around the calling process, with a new root built from a mount plan.

    python -I -S namespaces.py [--keep-caps] [--legacy-mounts] PLAN -- COMMAND [ARG...]
    python -I -S namespaces.py --check

runs COMMAND inside (PLAN: the JSON list below), or says whether namespaces can be made here.

The plan is the list the bwrap path translates to arguments, applied in order onto an empty
root (a later entry shadows an earlier one):
    ["ro", SRC, DST] / ["rw", SRC, DST]         bind SRC (recursively) read-only / read-write;
                                                skipped when SRC is missing
    ["ro-fd", FD, DST] / ["rw-fd", FD, DST]     the same from an open O_PATH descriptor: exactly
                                                what it refers to, wherever its path now leads
    ["tmpfs", DST]                              an empty private tmpfs, mode 0755
    ["dev", DST]                                null, zero, full, random, urandom, tty from the
                                                host; a new devpts (no other terminal); a private
                                                shm; fd, stdin, stdout, stderr links
    ["proc", DST]                               a procfs of the new pid namespace
    ["dir", DST] / ["symlink", TARGET, DST]
DST is resolved inside the new root (a symlink there never leads out); missing folders on the
way are made only in the sandbox's own tmpfs mounts, never on the host. Every bind is nosuid and
nodev; the root itself ends read-only, so only "rw" binds and tmpfs mounts take writes.

`enter(plan)` makes the namespaces and forks: the parent stays outside as a small monitor that
exits with the child's status, the child returns from `enter` as pid 1 of the new pid namespace
(it must reap the orphans reparented to it; when it exits the kernel kills everything inside)
and dies with the monitor (PR_SET_PDEATHSIG). The child ends in a second, nested user
namespace that owns no mount, network or pid namespace: even with every capability it has
there, it can neither unmount nor remount anything. `drop_capabilities()` then takes those
capabilities away too. Standard library only: it runs as a bare script, like the launcher.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # not `signal`: its enums slow the start
import _socket  # not `socket`, for the same reason
import ctypes
import errno
import fcntl
import os
import stat
import struct
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: it slows the start
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import NoReturn

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1 << 10, 1 << 11, 1 << 12
MS_REC, MS_SILENT, MS_UNBINDABLE, MS_PRIVATE = 1 << 14, 1 << 15, 1 << 17, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
MNT_DETACH = 2
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
AT_EMPTY_PATH, AT_RECURSIVE = 0x1000, 0x8000
SYS_MOUNT_SETATTR = 442  # the same on every architecture
SYS_PIVOT_ROOT = {"x86_64": 155, "i686": 217, "aarch64": 41, "armv7l": 218, "riscv64": 41,
                  "ppc64le": 203, "s390x": 217, "loongarch64": 41}  # fmt: skip

PR_SET_PDEATHSIG, PR_CAPBSET_READ, PR_CAPBSET_DROP = 1, 23, 24
PR_GET_SECUREBITS, PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 27, 28, 47, 4
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1 << 0, 1 << 1
SECBIT_NO_SETUID_FIXUP, SECBIT_NO_SETUID_FIXUP_LOCKED = 1 << 2, 1 << 3
SECBIT_KEEP_CAPS_LOCKED = 1 << 5
SECBIT_NO_CAP_AMBIENT_RAISE, SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 6, 1 << 7
SECUREBITS = (
    SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED
    | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
)  # fmt: skip
CAPABILITY_VERSION_3 = 0x20080522

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ = struct.Struct("16sh22x")  # struct ifreq: the name, then ifr_flags in the union

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")  # read-only even in our own procfs
# Where the new root's tmpfs is mounted while it is built (in the private mount namespace: the
# host's folder is only covered there, never written).
BASES = ("tmp", "mnt", "dev", "run", "var", "opt", "srv", "home")
MAX_SYMLINKS = 40  # as the kernel's path walk
DENIED = 126  # the CLI's status when it cannot build the sandbox (the shell's "cannot execute")

O_PATH = os.O_PATH | os.O_CLOEXEC
O_PATH_NOFOLLOW = O_PATH | os.O_NOFOLLOW


class NamespaceError(OSError):
    """The kernel refused a step; `strerror` says which, in words. After an error from `enter`
    the process is half inside new namespaces: it must exit."""


class PlanError(ValueError):
    """An entry of the mount plan is malformed."""


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_libc: ctypes.CDLL | None = None
_use_mount_setattr: bool | None = None  # None: not tried yet (the kernel has it from 5.12)
_availability: list[str | None] = []  # available()'s answer, once known


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    return _libc


def _check(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise NamespaceError(number, f"{what}: {os.strerror(number)}")
    return result


def _syscall(number: int, *args: object) -> int:
    # Variadic: every integer passed as a full long, as the kernel reads it.
    wide = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result: int = _lib().syscall(ctypes.c_long(number), *wide)
    return result


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str = "", where: str = ""
) -> None:
    """mount(2); `where` names the target in the error (the plan's path, not /proc/self/fd/N)."""

    def encode(text: str | None) -> bytes | None:
        return os.fsencode(text) if text else None

    result = _lib().mount(encode(source), encode(target), encode(fstype), flags, encode(data))
    kind = "remount" if flags & MS_REMOUNT else "bind" if flags & MS_BIND else fstype
    _check(result, f"cannot {'' if flags & MS_REMOUNT else 'mount '}{kind} {where or target}")


def _fd_path(fd: int) -> str:
    """A path that mount(2) follows to exactly what `fd` refers to (the /proc magic link)."""
    return f"/proc/self/fd/{fd}"


def _prctl(option: int, arg: int = 0) -> int:
    return _check(_lib().prctl(option, arg, 0, 0, 0), f"prctl({option})")


# --- Can namespaces be made here? --------------------------------------------------------------


def available() -> str | None:
    """None when this process may create the user, mount, network and pid namespaces `enter`
    needs (tried for real, once, in a child process); else why not, in words a user can act on."""
    if not _availability:
        _availability.append(_check_in_child())
    return _availability[0]


def _check_in_child() -> str | None:
    if not sys.platform.startswith("linux"):
        return "namespaces exist only on Linux"
    if not sys.executable:
        return "cannot find the Python interpreter to try namespaces with"
    # A spawned interpreter rather than a fork: the caller may run threads.
    out, into = os.pipe2(os.O_CLOEXEC)
    try:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-S", os.path.abspath(__file__), "--check"],
            {},
            file_actions=[
                (os.POSIX_SPAWN_DUP2, into, 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
        )
    except OSError as exc:
        os.close(out)
        return f"cannot start Python to try namespaces: {exc.strerror}"
    finally:
        os.close(into)
    answer = b""
    with open(out, "rb") as reader:
        while chunk := reader.read(4096):
            answer += chunk
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    reason = answer.decode(errors="replace").strip()
    return reason or f"the namespace check failed (status {os.waitstatus_to_exitcode(status)})"


def probe() -> str | None:
    """`available()`'s test, run in this process, which it leaves inside new namespaces: only for
    a process that exits next (`--check`)."""
    uid, gid = os.getuid(), os.getgid()
    try:
        _check(_lib().unshare(NAMESPACES), "unshare")
    except OSError as exc:
        return refusal("unshare", exc.errno or 0)
    try:
        _write_maps("/proc/self", uid=f"0 {uid} 1", gid=f"0 {gid} 1")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        base = _base_folder(os.open("/", O_PATH))
        _mount("tmpfs", f"/{base}", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    except OSError as exc:
        return refusal("mount", exc.errno or 0)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if os.getpid() == 1 else 1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return "a new pid namespace cannot be made here"
    return None


def _sysctl(name: str) -> str | None:
    try:
        with open(f"/proc/sys/{name}", "rb") as file:
            return file.read().decode().strip()
    except OSError:
        return None


def refusal(step: str, number: int, sysctl: Callable[[str], str | None] | None = None) -> str:
    """Why namespaces cannot be made, in words a user can act on: `step` ("unshare" or "mount")
    failed with `number`; `sysctl` reads a kernel setting (None when it does not exist)."""
    sysctl = sysctl or _sysctl
    bubblewrap = "or install bubblewrap"
    if sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1" and (
        step != "unshare" or number in (errno.EPERM, errno.EACCES)
    ):
        return (
            "AppArmor restricts unprivileged user namespaces"
            " (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10 and later):"
            f" {bubblewrap} (its AppArmor profile allows them), or run"
            " `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
        )
    if step == "unshare":
        if sysctl("kernel/unprivileged_userns_clone") == "0":
            return (
                "user namespaces are disabled for unprivileged users"
                " (kernel.unprivileged_userns_clone=0): run"
                f" `sudo sysctl -w kernel.unprivileged_userns_clone=1`, {bubblewrap}"
            )
        limit = sysctl("user/max_user_namespaces")
        if number == errno.ENOSPC or limit == "0":
            if limit == "0":
                return (
                    "user namespaces are disabled (user.max_user_namespaces=0): run"
                    f" `sudo sysctl -w user.max_user_namespaces=10000`, {bubblewrap}"
                )
            return f"the limit of user namespaces is reached (user.max_user_namespaces={limit})"
        if number == errno.EINVAL:
            return "this kernel has no user namespaces (built without CONFIG_USER_NS)"
        if number == errno.EPERM:
            return (
                "this process may not create namespaces: a container's seccomp policy"
                " (Docker's default refuses them) or a chroot; run Heron outside the container"
            )
        return f"cannot create namespaces: {os.strerror(number)}"
    return (
        f"mounting inside a user namespace is refused ({os.strerror(number)}): a security module"
        f" (SELinux, AppArmor) or the container forbids it; {bubblewrap}"
    )


# --- Entering -----------------------------------------------------------------------------------

Entry = tuple[str, object, str]  # kind, source (path, fd, link target or None), destination
BINDS = {"ro": True, "rw": False, "ro-fd": True, "rw-fd": False}  # kind: read-only
SHAPES: dict[object, tuple[type, ...]] = {
    "ro": (str, str), "rw": (str, str), "ro-fd": (int, str), "rw-fd": (int, str),
    "tmpfs": (str,), "dev": (str,), "proc": (str,), "dir": (str,), "symlink": (str, str),
}  # fmt: skip


def parse_plan(plan: Iterable[Sequence[object]]) -> list[Entry]:
    """The plan's entries as (kind, source, destination); PlanError when one is malformed."""
    entries: list[Entry] = []
    for entry in plan:
        if not isinstance(entry, list | tuple) or not entry:
            raise PlanError(f"not a plan entry: {entry!r}")
        kind, *args = entry
        shape = SHAPES.get(kind)
        if shape is None or len(args) != len(shape):
            raise PlanError(f"unknown plan entry: {list(entry)!r}")
        for arg, kind_of in zip(args, shape, strict=True):
            if not isinstance(arg, kind_of) or isinstance(arg, bool):
                raise PlanError(f"plan entry {list(entry)!r}: {arg!r} is not a {kind_of.__name__}")
            if isinstance(arg, str) and ("\0" in arg or not arg):
                raise PlanError(f"plan entry {list(entry)!r}: empty path or NUL byte")
        destination = args[-1]
        assert isinstance(destination, str)
        if not destination.startswith("/"):
            raise PlanError(f"plan entry {list(entry)!r}: the destination must be absolute")
        source = args[0] if len(args) == 2 else None
        if kind in ("ro", "rw") and not str(source).startswith("/"):
            raise PlanError(f"plan entry {list(entry)!r}: the source must be absolute")
        if isinstance(source, int) and source < 0:
            raise PlanError(f"plan entry {list(entry)!r}: not a descriptor")
        entries.append((str(kind), source, destination))
    return entries


def enter(plan: Iterable[Sequence[object]]) -> list[str]:
    """Move this (single-threaded) process into new namespaces with the plan's root.

    Returns, in the child (pid 1 inside), what could not be done as asked (e.g. no procfs), for
    the user to read; the parent never returns: it waits for the child and exits with its
    status. The child's working directory is the new root's /. The plan's descriptors are closed
    in the child; any other descriptor of a host folder left open without close-on-exec is
    refused (through it a command would walk out of the new root)."""
    entries = parse_plan(plan)
    if not sys.platform.startswith("linux"):
        raise NamespaceError(errno.ENOSYS, "namespaces exist only on Linux")
    if _threads() != 1:  # unshare(CLONE_NEWUSER) would fail with EINVAL
        raise NamespaceError(errno.EINVAL, "cannot create namespaces: this process runs threads")
    uid, gid = os.getuid(), os.getgid()
    try:
        _check(_lib().unshare(NAMESPACES), "unshare")
    except OSError as exc:
        raise NamespaceError(exc.errno, refusal("unshare", exc.errno or 0)) from None
    try:
        # Root inside this first user namespace: devpts needs uid and gid 0 mapped. The child
        # moves on to a nested one with the caller's own ids once the root is built.
        _write_maps("/proc/self", uid=f"0 {uid} 1", gid=f"0 {gid} 1")
    except OSError as exc:
        raise NamespaceError(exc.errno, refusal("mount", exc.errno or 0)) from None
    lifeline, held = os.pipe2(os.O_CLOEXEC)  # ends when the monitor does
    children = _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the monitor must see its exit
    pid = os.fork()
    if pid:
        _monitor(pid, held)
    _signal.signal(_signal.SIGCHLD, children)
    os.close(held)
    _prctl(PR_SET_PDEATHSIG, _signal.SIGKILL)
    os.set_blocking(lifeline, False)
    try:
        if os.read(lifeline, 1) == b"":  # the monitor died before PDEATHSIG was set
            os._exit(DENIED)
    except BlockingIOError:
        pass
    finally:
        os.close(lifeline)
    return _Builder(entries).build(uid, gid)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _write_maps(proc_self: str | int, uid: str, gid: str) -> None:
    """Write a user namespace's maps ("INSIDE OUTSIDE 1"): `proc_self` is /proc/self's path
    (setgroups is denied first, as an unprivileged gid_map needs) or a descriptor of it (a
    nested namespace, which inherits "deny")."""
    folder = proc_self if isinstance(proc_self, int) else None
    prefix = "" if folder is not None else f"{proc_self}/"
    writes = [("gid_map", gid), ("uid_map", uid)]
    for name, text in [("setgroups", "deny")] * (folder is None) + writes:
        fd = os.open(prefix + name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=folder)
        try:
            os.write(fd, f"{text}\n".encode())
        except OSError as exc:
            raise NamespaceError(exc.errno, f"cannot write {name}: {exc.strerror}") from None
        finally:
            os.close(fd)


def _monitor(child: int, held: int) -> NoReturn:
    """The parent's whole life after the fork: wait for the child, exit as it did. Killed, it
    takes the sandbox with it (the child's PR_SET_PDEATHSIG, then the pid namespace's end)."""
    for sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT):
        _signal.signal(sig, _signal.SIG_DFL)
    os.closerange(3, held)  # hold nothing of the caller's but its stdio
    os.closerange(held + 1, 1 << 20)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        _signal.signal(sig, _signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


def _base_folder(root: int) -> str:
    for name in BASES:
        try:
            if stat.S_ISDIR(os.stat(name, dir_fd=root, follow_symlinks=False).st_mode):
                return name
        except OSError:
            continue
    raise NamespaceError(errno.ENOENT, "no folder to build the new root on (/tmp, /mnt, …)")


class _Builder:
    """Builds the new root in the child (pid 1 of the new pid namespace, so that its procfs can
    be mounted), then pivots into it. Every path inside the new root is walked one component
    at a time from an O_PATH descriptor, symlinks resolved against the new root."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.notes: list[str] = []
        self.own: set[int] = set()  # st_dev of the tmpfs mounts made here: the only writable ones
        self.procs: set[int] = set()  # st_dev of the procfs mounts made here
        self.host_root = -1
        self.base = ""

    def build(self, uid: int, gid: int) -> list[str]:
        proc_self = os.open("/proc/self", O_PATH | os.O_DIRECTORY)  # the host's procfs, still
        self.host_root = os.open("/", O_PATH | os.O_DIRECTORY)
        try:
            try:
                _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing of ours reaches the host
            except OSError as exc:  # the first use of the new capabilities
                raise NamespaceError(exc.errno, refusal("mount", exc.errno or 0)) from None
            sources = [self._source(kind, source) for kind, source, _ in self.entries]
            devices = self._devices() if any(e[0] == "dev" for e in self.entries) else {}
            skeleton = self._new_root()
            for (kind, source, destination), fd in zip(self.entries, sources, strict=True):
                if kind in BINDS:
                    if fd is not None:
                        self._bind(fd, destination, read_only=BINDS[kind])
                elif kind == "tmpfs":
                    os.close(self._tmpfs(destination, 0o755))
                elif kind == "dev":
                    self._dev(destination, devices)
                elif kind == "proc":
                    self._proc(destination)
                elif kind == "dir":
                    os.close(self._target(destination, "dir"))
                else:
                    self._symlink(str(source), destination)
            for fd in [*(fd for fd in sources if fd is not None), *devices.values()]:
                os.close(fd)
            self._note_host_procs()
            # The skeleton (folders made for mount points, "dir" entries) ends read-only.
            read_only = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
            _mount(None, _fd_path(skeleton), None, read_only, where="/")
            os.close(skeleton)
            self._pivot()
            _loopback_up()
            _check(_lib().unshare(CLONE_NEWUSER), "unshare the nested user namespace")
            _write_maps(proc_self, uid=f"{uid} 0 1", gid=f"{gid} 0 1")  # the caller's own ids
            for kind, source, _ in self.entries:
                if kind.endswith("-fd") and isinstance(source, int):
                    try:  # noqa: SIM105 (contextlib would slow the start)
                        os.close(source)
                    except OSError:
                        pass  # listed twice
            _refuse_open_folders(proc_self)
        finally:
            os.close(proc_self)
            os.close(self.host_root)
        return self.notes

    # Sources: opened before anything is mounted, in the new mount namespace (a bind from a
    # descriptor of the old one is refused: EINVAL).

    def _source(self, kind: str, source: object) -> int | None:
        if kind in ("ro", "rw"):
            try:
                return os.open(str(source), O_PATH)
            except (FileNotFoundError, NotADirectoryError):
                return None  # "skipped if SRC is missing"
            except OSError as exc:
                raise NamespaceError(exc.errno, f"cannot open {source}: {exc.strerror}") from None
        if kind in ("ro-fd", "rw-fd") and isinstance(source, int):
            return _reopen(source)
        return None

    def _devices(self) -> dict[str, int]:
        found = {}
        for name in DEVICES:
            try:
                found[name] = os.open(f"/dev/{name}", O_PATH)
            except OSError:
                self.notes.append(f"/dev/{name} is missing on this system")
        return found

    # Destinations.

    def _root(self) -> int:
        """The top of the new root: looked up by name, so a mount on "/" is crossed into."""
        return os.open(self.base, O_PATH | os.O_DIRECTORY, dir_fd=self.host_root)

    def _locate(self, destination: str, last: str | None) -> tuple[int, str] | None:
        """The folder holding `destination` (a descriptor) and its name there, symlinks resolved
        inside the new root; None for the root itself. Missing folders on the way are made, and
        a missing last component made as `last` ("dir", "file"; None: left missing)."""
        todo = _components(destination)
        stack, names = [self._root()], [""]
        links = 0
        try:
            while todo:
                name = todo.pop()
                if name == "..":
                    if len(stack) > 1:
                        os.close(stack.pop())
                        names.pop()
                    continue
                here = stack[-1]
                try:
                    fd = os.open(name, O_PATH_NOFOLLOW, dir_fd=here)
                except FileNotFoundError:
                    kind = "dir" if todo else last
                    if kind is None:
                        return os.dup(here), name
                    self._create(here, name, kind, destination)
                    fd = os.open(name, O_PATH_NOFOLLOW, dir_fd=here)
                mode = os.fstat(fd).st_mode
                if stat.S_ISLNK(mode):
                    os.close(fd)
                    links += 1
                    if links > MAX_SYMLINKS:
                        raise NamespaceError(errno.ELOOP, f"{destination}: too many symlinks")
                    target = os.readlink(name, dir_fd=here)
                    if target.startswith("/"):  # from the new root, never the host's
                        while len(stack) > 1:
                            os.close(stack.pop())
                            names.pop()
                    todo.extend(_components(target))
                    continue
                if todo and not stat.S_ISDIR(mode):
                    os.close(fd)
                    raise NamespaceError(errno.ENOTDIR, f"{destination}: {name} is not a folder")
                stack.append(fd)
                names.append(name)
            if len(stack) == 1:
                return None
            return os.dup(stack[-2]), names[-1]
        finally:
            for fd in stack:
                os.close(fd)

    def _create(self, folder: int, name: str, kind: str, destination: str, link: str = "") -> None:
        """Make `name` ("dir", "file" or "symlink" to `link`) in `folder`, which must be one of
        the sandbox's own tmpfs mounts."""
        if os.fstat(folder).st_dev not in self.own:
            raise NamespaceError(
                errno.EROFS,
                f"{destination}: cannot make {name!r}: it would be made in a folder of the host"
                " (only the sandbox's tmpfs parts are changed): add a tmpfs or dir entry first",
            )
        if kind == "dir":
            os.mkdir(name, 0o755, dir_fd=folder)
        elif kind == "symlink":
            os.symlink(link, name, dir_fd=folder)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(name, flags, 0o444, dir_fd=folder))

    def _target(self, destination: str, last: str) -> int:
        """A descriptor of the destination (made if missing), at the top of its mounts."""
        where = self._locate(destination, last)
        if where is None:
            return self._root()
        folder, name = where
        try:
            fd = os.open(name, O_PATH_NOFOLLOW, dir_fd=folder)
        finally:
            os.close(folder)
        if last == "dir" and not stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise NamespaceError(errno.ENOTDIR, f"{destination} is not a folder")
        return fd

    # Entries.

    def _bind(self, source: int, destination: str, *, read_only: bool) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(source).st_mode) else "file"
        target = self._target(destination, kind)
        try:
            # Recursive: a plain bind would uncover what the host has mounted over.
            _mount(_fd_path(source), _fd_path(target), None, MS_BIND | MS_REC, where=destination)
        finally:
            os.close(target)
        bound = self._target(destination, kind)
        try:
            extra = MOUNT_ATTR_RDONLY if read_only else 0
            _restrict(bound, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | extra)
        finally:
            os.close(bound)

    def _new_root(self) -> int:
        """Mount the new root's tmpfs over a folder of the host's (covered only in this mount
        namespace) and return its descriptor."""
        self.base = _base_folder(self.host_root)
        base = os.open(self.base, O_PATH | os.O_DIRECTORY, dir_fd=self.host_root)
        try:
            _mount("tmpfs", _fd_path(base), "tmpfs", MS_NOSUID | MS_NODEV, "mode=755", "/")
        finally:
            os.close(base)
        skeleton = self._root()
        # It sits inside the host's tree: a recursive bind of "/" would copy it (and all built
        # on it) into itself. Unbindable, it is left out of every copy.
        _mount(None, _fd_path(skeleton), None, MS_UNBINDABLE, where="/")
        self.own.add(os.fstat(skeleton).st_dev)
        return skeleton

    def _tmpfs(self, destination: str, mode: int) -> int:
        target = self._target(destination, "dir")
        try:
            flags, options = MS_NOSUID | MS_NODEV, f"mode={mode:o}"
            _mount("tmpfs", _fd_path(target), "tmpfs", flags, options, where=destination)
        finally:
            os.close(target)
        top = self._target(destination, "dir")
        self.own.add(os.fstat(top).st_dev)
        return top

    def _dev(self, destination: str, devices: dict[str, int]) -> None:
        dev = self._tmpfs(destination, 0o755)
        try:
            for name, source in devices.items():
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                os.close(os.open(name, flags, 0o444, dir_fd=dev))
                node = os.open(name, O_PATH_NOFOLLOW, dir_fd=dev)
                try:
                    where = f"{destination.rstrip('/')}/{name}"
                    _mount(_fd_path(source), _fd_path(node), None, MS_BIND, where=where)
                finally:
                    os.close(node)
            for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                                 ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                                 ("ptmx", "pts/ptmx")):  # fmt: skip
                os.symlink(target, name, dir_fd=dev)
            for name in ("pts", "shm"):
                os.mkdir(name, 0o755, dir_fd=dev)
            pts = os.open("pts", O_PATH_NOFOLLOW, dir_fd=dev)
            try:  # a new instance: no terminal of the host's in it
                options = "newinstance,ptmxmode=0666,mode=620"
                flags, where = MS_NOSUID | MS_NOEXEC, destination.rstrip("/") + "/pts"
                _mount("devpts", _fd_path(pts), "devpts", flags, options, where=where)
            finally:
                os.close(pts)
        finally:
            os.close(dev)
        os.close(self._tmpfs(destination.rstrip("/") + "/shm", 0o1777))

    def _proc(self, destination: str) -> None:
        target = self._target(destination, "dir")
        try:
            flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
            _mount("proc", _fd_path(target), "proc", flags, where=destination)
        except NamespaceError as exc:
            # A container that hides parts of its own /proc makes the kernel refuse a new one
            # (mount_too_revealing). The host's /proc is never bound instead: it would show, and
            # let commands reach, every process of the user's outside the sandbox.
            self.notes.append(
                f"{destination} stays empty: the kernel refused a new procfs"
                f" ({os.strerror(exc.errno or 0)});"
                " commands that read /proc (ps, /dev/fd, /proc/self) will fail"
            )
            return
        finally:
            os.close(target)
        proc = self._target(destination, "dir")
        self.procs.add(os.fstat(proc).st_dev)
        try:
            for name in PROC_COVERED:  # as bubblewrap: never writable, even where allowed
                try:
                    fd = os.open(name, O_PATH_NOFOLLOW, dir_fd=proc)
                except FileNotFoundError:
                    continue
                try:
                    where = f"{destination.rstrip('/')}/{name}"
                    _mount(_fd_path(fd), _fd_path(fd), None, MS_BIND | MS_REC, where=where)
                finally:
                    os.close(fd)
                fd = os.open(name, O_PATH_NOFOLLOW, dir_fd=proc)
                try:
                    _restrict(fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
                finally:
                    os.close(fd)
        finally:
            os.close(proc)

    def _note_host_procs(self) -> None:
        """A bind that brought the host's /proc along (["ro", "/", "/"] and no "proc" entry on
        /proc) shows every process of the host's, their command lines and environments (Heron's
        API keys) included: say so."""
        root = self._root()
        try:
            top = os.readlink(_fd_path(root))
        finally:
            os.close(root)
        for mount in visible_mounts(_read_mountinfo(), top):
            if mount.fstype == "proc" and mount.device not in self.procs:
                inside = "/" + mount.point[len(top) :].lstrip("/")
                self.notes.append(
                    f"the host's /proc is visible at {inside}: commands can read every process"
                    f' of the host\'s there; add a "proc" entry for {inside}'
                )

    def _symlink(self, target: str, destination: str) -> None:
        """The link itself at `destination` (one there already is never followed): made, or
        kept when it is the same link."""
        names = _components(destination)
        if not names or names[0] == "..":
            raise NamespaceError(errno.EEXIST, f"{destination}: cannot be a symlink")
        folder = self._target("/" + "/".join(reversed(names[1:])), "dir")
        try:
            try:
                same = os.readlink(names[0], dir_fd=folder) == target
            except FileNotFoundError:
                self._create(folder, names[0], "symlink", destination, target)
                return
            except OSError:
                same = False  # not a symlink
            if not same:
                raise NamespaceError(errno.EEXIST, f"{destination} exists already")
        finally:
            os.close(folder)

    def _pivot(self) -> None:
        machine = os.uname().machine
        number = SYS_PIVOT_ROOT.get(machine)
        if number is None:
            raise NamespaceError(errno.ENOSYS, f"pivot_root: unknown architecture {machine}")
        new_root = self._root()
        old_root = os.open("/", O_PATH | os.O_DIRECTORY)
        try:
            os.fchdir(new_root)
            # The old root lands on top of the new one, then is detached: no folder needed.
            _check(_syscall(number, b".", b"."), "pivot_root")
            os.fchdir(old_root)
            _check(_lib().umount2(b".", MNT_DETACH), "detach the old root")
            os.chdir("/")
        finally:
            os.close(new_root)
            os.close(old_root)


def _components(path: str) -> list[str]:
    """The path's names in reverse (the next one last), without empty and "." ones."""
    return [name for name in reversed(path.split("/")) if name not in ("", ".")]


def _reopen(pinned: int) -> int:
    """The folder a descriptor of the old mount namespace refers to, opened in the new one (a
    bind from the old one's descriptor is refused). Found by its current path and checked to be
    the same inode: a root moved since it was pinned is followed; one replaced is refused."""
    try:
        want = os.fstat(pinned)
    except OSError as exc:
        raise NamespaceError(exc.errno, f"descriptor {pinned}: {exc.strerror}") from None
    path = ""
    for _ in range(3):  # the path may change under us: try again, then refuse
        path = os.readlink(_fd_path(pinned))
        if not path.startswith("/") or path.endswith(" (deleted)"):
            break
        try:
            fd = os.open(path, O_PATH_NOFOLLOW)
        except OSError:
            continue
        found = os.fstat(fd)
        if (found.st_dev, found.st_ino) == (want.st_dev, want.st_ino):
            return fd
        os.close(fd)
    raise NamespaceError(errno.ESTALE, f"the pinned root {path} is gone or was replaced")


def _restrict(fd: int, flags: int) -> None:
    """Add MOUNT_ATTR_* flags to the mount at `fd` and to every mount below it. Flags are only
    ever added: the host's own (nosuid, nodev, noexec, atime), locked in a user namespace,
    stay, so the kernel does not answer EPERM."""
    global _use_mount_setattr
    if _use_mount_setattr is not False:
        attr = MountAttr(attr_set=flags)
        result = _syscall(
            SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(attr),
            ctypes.sizeof(attr),
        )  # fmt: skip
        if result == 0:
            _use_mount_setattr = True
            return
        number = ctypes.get_errno()
        if _use_mount_setattr or number not in (errno.ENOSYS, errno.EPERM):
            raise NamespaceError(number, f"mount_setattr: {os.strerror(number)}")
        _use_mount_setattr = False  # before 5.12 (or a seccomp policy that does not know it)
    _restrict_by_mountinfo(fd, flags)


def _restrict_by_mountinfo(fd: int, flags: int) -> None:
    """`_restrict` for kernels without mount_setattr: remount each visible mount of the tree
    with the flags it has (read from /proc/self/mountinfo) plus the new ones, then check."""
    wanted = (
        (MS_RDONLY if flags & MOUNT_ATTR_RDONLY else 0)
        | (MS_NOSUID if flags & MOUNT_ATTR_NOSUID else 0)
        | (MS_NODEV if flags & MOUNT_ATTR_NODEV else 0)
    )
    top = os.readlink(_fd_path(fd))
    unreachable = set()
    for mount in visible_mounts(_read_mountinfo(), top):
        if mount.flags | wanted != mount.flags:
            flags = MS_REMOUNT | MS_BIND | MS_SILENT | mount.flags | wanted
            try:
                _mount(None, mount.point, None, flags)
            except NamespaceError as exc:
                if exc.errno != errno.EACCES or mount.point == top:
                    raise
                unreachable.add(mount.point)  # a folder the caller cannot enter: nor can commands
    for mount in visible_mounts(_read_mountinfo(), top):
        if mount.flags & wanted != wanted and mount.point not in unreachable:
            raise NamespaceError(errno.EPERM, f"{mount.point}: its mount flags did not change")


class Mount:
    """A line of /proc/self/mountinfo."""

    __slots__ = ("device", "flags", "fstype", "id", "parent", "point")

    def __init__(self, line: bytes) -> None:
        fields = line.split(b" ")
        self.id, self.parent = int(fields[0]), int(fields[1])
        major, minor = fields[2].split(b":")
        self.device = os.makedev(int(major), int(minor))
        self.point = _unescape(fields[4])
        self.flags = 0  # MS_*
        for option in fields[5].split(b","):
            self.flags |= MOUNT_OPTIONS.get(option, 0)
        if not self.flags & (MS_NOATIME | MS_RELATIME):
            self.flags |= MS_STRICTATIME  # a remount without an atime flag makes it relatime
        self.fstype = fields[fields.index(b"-", 6) + 1].decode(errors="replace")


MOUNT_OPTIONS = {b"ro": MS_RDONLY, b"nosuid": MS_NOSUID, b"nodev": MS_NODEV,
                 b"noexec": MS_NOEXEC, b"noatime": MS_NOATIME, b"nodiratime": MS_NODIRATIME,
                 b"relatime": MS_RELATIME}  # fmt: skip


def _read_mountinfo() -> list[Mount]:
    with open("/proc/self/mountinfo", "rb") as file:
        return parse_mountinfo(file.read())


def parse_mountinfo(text: bytes) -> list[Mount]:
    return [Mount(line) for line in text.splitlines() if line]


def _unescape(field: bytes) -> str:
    """A mountinfo path: space, tab, newline and backslash come as octal escapes."""
    out, i = bytearray(), 0
    while i < len(field):
        if field[i : i + 1] == b"\\" and field[i + 1 : i + 4].isdigit():
            out.append(int(field[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return os.fsdecode(bytes(out))


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def visible_mounts(mounts: list[Mount], top: str) -> list[Mount]:
    """The mounts a path walk can reach at and below `top`, from the last mount made there:
    mounts covered by another one on the same point or by a sibling on a folder above them
    are left out (remounting their path would reach the one on top)."""
    roots = [m for m in mounts if m.point == top]
    if not roots:
        raise NamespaceError(errno.EINVAL, f"{top} is not in /proc/self/mountinfo")
    by_id = {m.id: m for m in mounts}
    kids: dict[int, list[Mount]] = {}
    covered = set()
    for mount in mounts:
        parent = by_id.get(mount.parent)
        if parent is None or mount is parent or not _under(mount.point, top):
            continue
        if parent.point == mount.point:
            covered.add(parent.id)
        siblings = kids.setdefault(parent.id, [])
        if any(_under(mount.point, sibling.point) for sibling in siblings):
            continue  # a sibling mounted on a folder above hides it
        siblings[:] = [s for s in siblings if not _under(s.point, mount.point)] + [mount]
    found = []
    todo = [roots[-1]]
    while todo:
        mount = todo.pop()
        if mount.id not in covered:
            found.append(mount)
        todo.extend(kids.get(mount.id, []))
    return found


def _loopback_up() -> None:
    """`lo` up in the new network namespace: local servers work, nothing leads out."""
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = bytearray(IFREQ.pack(b"lo", 0))
        fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request)
        flags = IFREQ.unpack(request)[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, IFREQ.pack(b"lo", flags | IFF_UP))
    except OSError as exc:
        raise NamespaceError(exc.errno, f"cannot bring up lo: {exc.strerror}") from None
    finally:
        sock.close()


def _refuse_open_folders(proc_self: int) -> None:
    """A descriptor of a host folder passed on to commands would lead out of the new root
    (openat(fd, "..")): refuse one that is not close-on-exec."""
    listing = os.open("fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=proc_self)
    try:
        numbers = [int(name) for name in os.listdir(listing)]
    finally:
        os.close(listing)
    for fd in numbers:
        try:
            inherited = not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
            folder = stat.S_ISDIR(os.fstat(fd).st_mode)
        except OSError:
            continue  # the listing's own descriptor, closed since
        if inherited and folder:
            raise NamespaceError(
                errno.EBADF,
                f"descriptor {fd} is a folder outside the sandbox and would pass to every"
                " command: close it or open it close-on-exec before entering",
            )


# --- Capabilities -------------------------------------------------------------------------------


def drop_capabilities() -> None:
    """Give up every capability, for good: the bounding, ambient, inheritable, permitted and
    effective sets emptied, and securebits locked so that no exec (not even of a uid-0 or
    file-capability program) brings one back. A process in a user namespace has all of them
    there; the mounts made after unsharing are not locked, so whoever keeps CAP_SYS_ADMIN in
    the namespace owning them could unmount a read-only bind."""
    lib = _lib()
    _prctl(PR_SET_SECUREBITS, SECUREBITS)  # needs CAP_SETPCAP: first
    cap = 0
    while lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if ctypes.get_errno() != errno.EINVAL or cap == 0:  # EINVAL: past the last capability
        _check(-1, f"drop capability {cap} from the bounding set")
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = CapHeader(version=CAPABILITY_VERSION_3, pid=0)
    data = (CapData * 2)()
    _check(lib.capset(ctypes.byref(header), data), "capset")
    # Checked, not trusted: a kernel or policy that silently kept one must not pass.
    _check(lib.capget(ctypes.byref(header), data), "capget")
    kept = any(d.effective or d.permitted or d.inheritable for d in data)
    if kept or any(lib.prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1 for c in range(cap)):
        raise NamespaceError(errno.EPERM, "capabilities remain after dropping them")
    if _prctl(PR_GET_SECUREBITS) & SECUREBITS != SECUREBITS:
        raise NamespaceError(errno.EPERM, "securebits did not lock")


# --- The command line -----------------------------------------------------------------------------

USAGE = (
    "usage: namespaces.py [--keep-caps] [--legacy-mounts] PLAN -- COMMAND [ARG...]\n"
    "       namespaces.py --check"
)


def main(argv: list[str]) -> int:
    """Enter the plan's sandbox and run the command there as pid 1's only child; pid 1 reaps
    every orphan and exits with the command's status (128 + N: killed by signal N)."""
    global _use_mount_setattr
    if argv == ["--check"]:
        reason = probe()
        print(reason or "namespaces: available")
        return 1 if reason else 0
    options = set()
    while argv and argv[0] in ("--keep-caps", "--legacy-mounts"):
        options.add(argv.pop(0))
    if len(argv) < 3 or argv[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    if "--legacy-mounts" in options:
        _use_mount_setattr = False  # as on kernels before 5.12: remount by /proc/self/mountinfo
    import json  # only the command line reads JSON: the zygote does not pay for it

    try:
        plan = json.loads(argv[0])
        if not isinstance(plan, list):
            raise PlanError("the plan is a JSON list of entries")
        notes = enter(plan)
        for note in notes:
            print(f"heron sandbox: {note}", file=sys.stderr)
        if "--keep-caps" not in options:
            drop_capabilities()
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"heron sandbox: {reason}", file=sys.stderr)
        return DENIED
    command = argv[2:]
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):  # what Python ignores, back to the defaults
        _signal.signal(sig, _signal.SIG_DFL)
    try:
        # A session of its own: no controlling terminal, so no TIOCSTI into the user's.
        child = os.posix_spawnp(command[0], command, os.environ, setsid=True)
    except OSError as exc:
        print(f"heron sandbox: {command[0]}: {exc.strerror}", file=sys.stderr)
        return DENIED
    while True:  # pid 1: every orphan inside is ours to reap
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
