"""Heron's own namespaces (agent/sandbox/namespaces.py), the sandbox's path when bubblewrap is
absent: what a command inside can and cannot reach.

Each test runs the real bare script as a child process, `python -I -S namespaces.py PLAN --
python -c CODE`, the code reporting as JSON what it could do. This machine (and CI) runs as
root: root inside is mapped to root outside and holds every capability in its own user
namespace, so "read-only" must mean EROFS, which no capability overrides. One test runs the
same as an unprivileged user.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent.sandbox import namespaces

SCRIPT = Path(namespaces.__file__).resolve()
PYTHON = os.path.realpath(sys.executable)  # the interpreter itself, not the venv's link
TIMEOUT = 120  # a hang guard only: a loaded machine may take seconds per sandbox
NOBODY, GROUP = 65534, 4242  # a group id other than the user id: the two maps differ

needs_namespaces = pytest.mark.skipif(
    namespaces.available() is not None, reason=f"no namespaces: {namespaces.available()}"
)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts on the host side need root")

PRELUDE = """
import ctypes, errno, json, os, sys
def attempt(action, *args):
    try:
        action(*args)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"
def effective_capabilities():
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
"""


def system_plan(python: str = PYTHON) -> list[list[Any]]:
    """What `python -I -S` needs, a /dev, a /proc and a private /tmp: nothing of the host's
    home, /run, /var or /etc."""
    plan: list[list[Any]] = [["ro", "/usr", "/usr"]]
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        host = Path("/", name)
        if host.is_symlink():
            plan.append(["symlink", os.readlink(host), f"/{name}"])
        elif host.is_dir():
            plan.append(["ro", str(host), f"/{name}"])
    prefix = str(Path(python).resolve().parents[1])
    if not prefix.startswith("/usr/"):
        plan.append(["ro", prefix, prefix])
    return [*plan, ["dev", "/dev"], ["proc", "/proc"], ["tmpfs", "/tmp"]]


def sandbox(
    plan: Sequence[Sequence[Any]],
    code: str,
    *args: str,
    options: Sequence[str] = (),
    pass_fds: Sequence[int] = (),
    python: str = PYTHON,
    prefix: Sequence[str] = (),
    script: Path = SCRIPT,
) -> subprocess.CompletedProcess[str]:
    command = [
        *prefix,
        python,
        "-I",
        "-S",
        str(script),
        *options,
        json.dumps(plan),
        "--",
        python,
        "-I",
        "-S",
        "-c",
        PRELUDE + code,
        *args,
    ]
    return subprocess.run(
        command, capture_output=True, text=True, pass_fds=pass_fds, timeout=TIMEOUT
    )


def report(run: subprocess.CompletedProcess[str]) -> Any:
    assert run.returncode == 0, f"status {run.returncode}\n{run.stderr}"
    return json.loads(run.stdout.splitlines()[-1])


CHANGES = """
f, d = "/ro/f", "/ro/d"
def write():
    with open(f, "w") as handle:
        handle.write("changed")
print(json.dumps({
    "write": attempt(write),
    "append": attempt(os.open, f, os.O_WRONLY | os.O_APPEND),
    "truncate": attempt(os.truncate, f, 0),
    "chmod": attempt(os.chmod, f, 0o666),
    "chown": attempt(os.chown, f, os.getuid(), os.getgid()),
    "touch -d": attempt(os.utime, f, (0, 0)),
    "setxattr": attempt(os.setxattr, f, "user.heron", b"1"),
    "rename": attempt(os.rename, f, d + "/moved"),
    "unlink": attempt(os.unlink, f),
    "create": attempt(os.open, d + "/new", os.O_WRONLY | os.O_CREAT),
    "mkdir": attempt(os.mkdir, d + "/new"),
    "rmdir": attempt(os.rmdir, d),
    "symlink": attempt(os.symlink, "f", d + "/link"),
    "mknod fifo": attempt(os.mkfifo, d + "/fifo"),
    "read": open(f).read(),
    "uid": os.getuid(),
    "capabilities": effective_capabilities(),
}))
"""


def read_only_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "ro"
    (tree / "d").mkdir(parents=True)
    (tree / "f").write_text("original")
    return tree


@needs_namespaces
@pytest.mark.parametrize(
    "options",
    [[], ["--keep-caps"], ["--legacy-mounts"]],
    ids=["capabilities dropped", "every capability kept", "without mount_setattr"],
)
def test_a_read_only_bind_refuses_every_change_even_to_root(
    tmp_path: Path, options: list[str]
) -> None:
    tree = read_only_tree(tmp_path)
    result = report(sandbox([*system_plan(), ["ro", str(tree), "/ro"]], CHANGES, options=options))
    assert result.pop("read") == "original"
    assert result.pop("uid") == os.getuid()  # the caller's own id inside
    capabilities = result.pop("capabilities")
    assert (capabilities != 0) == ("--keep-caps" in options)
    assert result == dict.fromkeys(result, "EROFS")
    assert (tree / "f").read_text() == "original" and os.listdir(tree / "d") == []


@needs_namespaces
def test_a_read_write_bind_takes_writes_and_a_later_entry_shadows_an_earlier_one(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "sub").mkdir(parents=True)
    plan = [*system_plan(), ["rw", str(workspace), "/w"], ["ro", str(workspace / "sub"), "/w/sub"]]
    code = """
def write(path):
    with open(path, "w") as handle:
        handle.write("written inside")
print(json.dumps([attempt(write, "/w/new"), attempt(write, "/w/sub/new")]))
"""
    assert report(sandbox(plan, code)) == ["ok", "EROFS"]
    assert (workspace / "new").read_text() == "written inside"
    assert not (workspace / "sub" / "new").exists()


@needs_namespaces
def test_what_the_plan_does_not_name_is_not_there(tmp_path: Path) -> None:
    home = Path.home()
    plan = system_plan()
    # What the plan binds under the home folder (the interpreter, in a pyenv): only its path.
    allowed = {Path(e[1]).relative_to(home).parts[0] for e in plan if _under(e, home)}
    hidden = ("/run", "/var", "/etc", "/srv", "/root", str(tmp_path))
    code = f"""
print(json.dumps({{
    "tmp": os.listdir("/tmp"),
    "exists": {{p: os.path.lexists(p) for p in {hidden!r} if not p.startswith({str(home)!r})}},
    "home": sorted(os.listdir({str(home)!r})) if os.path.isdir({str(home)!r}) else None,
}}))
"""
    # Something of the host's in its /tmp, whatever else is there.
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="heron-ns-"):
        result = report(sandbox(plan, code))
    assert result["tmp"] == []  # the plan's own tmpfs
    assert result["exists"] and result["exists"] == dict.fromkeys(result["exists"], False)
    assert result["home"] is None or set(result["home"]) <= allowed


def _under(entry: Sequence[Any], folder: Path) -> bool:
    return entry[0] in ("ro", "rw") and Path(entry[1]).is_relative_to(folder)


@needs_namespaces
def test_there_is_no_network_but_loopback_works_inside() -> None:
    abstract = f"\0heron-test-{uuid.uuid4().hex}"  # abstract Unix sockets live in a netns too
    with (
        socket.create_server(("127.0.0.1", 0)) as host_server,
        socket.socket(socket.AF_UNIX) as host_unix,
    ):
        host_server.setblocking(False)
        port = host_server.getsockname()[1]
        host_unix.bind(abstract)
        host_unix.listen()
        code = f"""
import socket
def connect(address):
    socket.create_connection(address, timeout=30).close()
def connect_unix(address):
    socket.socket(socket.AF_UNIX).connect(address)
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
connection, _ = server.accept()
client.sendall(b"ping")
print(json.dumps({{
    "host's loopback": attempt(connect, ("127.0.0.1", {port})),
    "outside": attempt(connect, ("192.0.2.1", 80)),
    "host's abstract socket": attempt(connect_unix, {abstract!r}),
    "loopback inside": connection.recv(4).decode(),
    "interfaces": [name for _, name in socket.if_nameindex()],
}}))
"""
        result = report(sandbox(system_plan(), code))
        with pytest.raises(BlockingIOError):
            host_server.accept()  # nothing came through
    assert result == {
        "host's loopback": "ECONNREFUSED",
        "outside": "ENETUNREACH",
        "host's abstract socket": "ECONNREFUSED",
        "loopback inside": "ping",
        "interfaces": ["lo"],
    }


@needs_namespaces
def test_no_process_outside_can_be_signalled_or_seen() -> None:
    code = f"""
print(json.dumps({{
    "kill the test": attempt(os.kill, {os.getpid()}, 0),
    "kill the test's parent": attempt(os.kill, {os.getppid()}, 0),
    "pids": sorted(int(n) for n in os.listdir("/proc") if n.isdigit()),
    "me": os.getpid(),
    "parent": os.getppid(),
}}))
"""
    result = report(sandbox(system_plan(), code))
    assert result["kill the test"] == result["kill the test's parent"] == "ESRCH"
    # pid 1 (the namespaces script, reaping orphans) and this command: nothing else.
    assert result["pids"] == [1, result["me"]] and result["parent"] == 1


@pytest.fixture
def host_terminal() -> Iterator[str]:
    """A pseudo-terminal of the host's, as the user's other terminals are."""
    leader, follower = os.openpty()
    try:
        yield os.ttyname(follower)
    finally:
        os.close(leader)
        os.close(follower)


@needs_namespaces
def test_dev_holds_the_usual_devices_and_no_terminal_of_the_host(host_terminal: str) -> None:
    code = f"""
pts = sorted(os.listdir("/dev/pts"))
host_terminal = os.path.exists({host_terminal!r})
leader, follower = os.openpty()
with open("/dev/null", "w") as null:
    null.write("discarded")
print(json.dumps({{
    "dev": sorted(os.listdir("/dev")),
    "pts": pts,
    "host terminal": host_terminal,
    "new terminal": os.ttyname(follower),
    "ptmx": os.readlink("/dev/ptmx"),
    "shm": attempt(lambda: open("/dev/shm/x", "w").close()),
    "zero": open("/dev/zero", "rb").read(4).hex(),
}}))
"""
    result = report(sandbox(system_plan(), code))
    devices = [n for n in namespaces.DEVICES if os.path.exists(f"/dev/{n}")]
    links = ["fd", "ptmx", "stderr", "stdin", "stdout"]
    assert result.pop("dev") == sorted([*devices, *links, "pts", "shm"])
    assert result == {
        "pts": ["ptmx"],
        "host terminal": False,
        "new terminal": "/dev/pts/0",
        "ptmx": "pts/ptmx",
        "shm": "ok",
        "zero": "00000000",
    }
    assert host_terminal.startswith("/dev/pts/")


@needs_namespaces
@pytest.mark.parametrize("options", [[], ["--keep-caps"]], ids=["dropped", "kept"])
def test_the_read_only_binds_cannot_be_undone_from_inside(
    tmp_path: Path, options: list[str]
) -> None:
    """Dropped capabilities: no mount call at all. Kept: the nested user namespace owns no
    mount namespace. A new user+mount namespace of its own: its copy of the mounts is locked."""
    tree = read_only_tree(tmp_path)
    code = """
import subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
NAMES = {"nosuid": 2, "nodev": 4, "noexec": 8, "noatime": 1024, "nodiratime": 2048,
         "relatime": 1 << 21}
def call(function, *args):
    return "ok" if function(*args) == 0 else errno.errorcode[ctypes.get_errno()]
def rw_flags():
    # "mount -o remount,rw": every flag the mount has but read-only
    for line in open("/proc/self/mountinfo"):
        fields = line.split()
        if fields[4] == "/ro":
            return sum(NAMES.get(o, 0) for o in fields[5].split(",")) | MS_REMOUNT | MS_BIND
def undo():
    return {
        "umount": call(libc.umount2, b"/ro", 2),
        "remount rw": call(libc.mount, None, b"/ro", None, rw_flags(), None),
        "umount /tmp": call(libc.umount2, b"/tmp", 2),
        "mount over": call(libc.mount, b"none", b"/ro", b"tmpfs", 0, None),
    }
result = {"here": undo(), "capabilities": effective_capabilities()}
result["write"] = attempt(lambda: open("/ro/f", "w").close())
result["mount(8)"] = subprocess.run(["mount", "-o", "remount,rw", "/ro"],
                                    capture_output=True).returncode
result["umount(8)"] = subprocess.run(["umount", "/ro"], capture_output=True).returncode
result["unshare"] = call(libc.unshare, 0x10000000 | 0x00020000)
if result["unshare"] == "ok":
    result["own namespace"] = undo()
    result["own namespace"].pop("mount over")  # allowed there: it hides, never reveals
print(json.dumps(result))
"""
    result = report(sandbox([*system_plan(), ["ro", str(tree), "/ro"]], code, options=options))
    assert result["here"] == dict.fromkeys(result["here"], "EPERM")
    assert (result["capabilities"] != 0) == bool(options)
    assert result["mount(8)"] != 0 and result["umount(8)"] != 0
    assert result["unshare"] == "ok"  # seccomp (the lead's layer) is what forbids it
    assert result["own namespace"] == {
        "umount": "EINVAL",  # a locked mount
        "remount rw": "EPERM",  # locked read-only
        "umount /tmp": "EINVAL",
    }
    assert result["write"] == "EROFS"


@needs_namespaces
def test_a_pinned_root_is_bound_even_after_its_path_became_a_symlink(tmp_path: Path) -> None:
    root, decoy = tmp_path / "root", tmp_path / "decoy"
    root.mkdir()
    decoy.mkdir()
    (root / "marker").write_text("pinned")
    (decoy / "secret").write_text("decoy")
    pinned = os.open(root, os.O_PATH)
    try:
        root.rename(tmp_path / "root.moved")
        root.symlink_to(decoy)
        code = f"""
with open("/w/new", "w") as handle:
    handle.write("through the pin")
print(json.dumps({{"listing": sorted(os.listdir("/w")), "fd": attempt(os.fstat, {pinned})}}))
"""
        plan = [*system_plan(), ["rw-fd", pinned, "/w"]]
        result = report(sandbox(plan, code, pass_fds=[pinned]))
    finally:
        os.close(pinned)
    assert result == {"listing": ["marker", "new"], "fd": "EBADF"}  # closed before the command
    assert (tmp_path / "root.moved" / "new").read_text() == "through the pin"
    assert sorted(os.listdir(decoy)) == ["secret"]


@needs_namespaces
def test_a_pinned_root_replaced_by_another_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    pinned = os.open(root, os.O_PATH)
    try:
        root.rmdir()
        root.mkdir()  # the same path, another folder
        run = sandbox([*system_plan(), ["rw-fd", pinned, "/w"]], "print('ran')", pass_fds=[pinned])
    finally:
        os.close(pinned)
    assert run.returncode == namespaces.DENIED and "ran" not in run.stdout
    assert "is gone or was replaced" in run.stderr


@needs_namespaces
def test_destinations_resolve_inside_the_new_root_and_nothing_is_made_on_the_host(
    tmp_path: Path,
) -> None:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / "up").symlink_to("../" * 20)
    (workspace / "abs").symlink_to(elsewhere)
    plan = [
        *system_plan(),
        ["rw", str(workspace), "/w"],
        ["tmpfs", "/w/up/scratch"],  # /scratch in the new root
        ["dir", "/w/abs/made"],  # under the sandbox's own /tmp
    ]
    code = f"""
print(json.dumps([os.path.ismount("/scratch"), os.path.isdir({str(elsewhere / "made")!r})]))
"""
    assert report(sandbox(plan, code)) == [True, True]
    assert not (elsewhere / "made").exists() and not Path("/scratch").exists()
    # A folder the plan would have to make on the host: refused, not made.
    run = sandbox([*system_plan(), ["rw", str(workspace), "/w"], ["dir", "/w/new"]], "print(1)")
    assert run.returncode == namespaces.DENIED, run.stderr
    assert "folder of the host" in run.stderr and not (workspace / "new").exists()


@needs_namespaces
def test_the_host_s_proc_brought_along_by_a_bind_is_named_and_its_devices_are_dead() -> None:
    code = """
print(json.dumps({"null": attempt(os.open, "/dev/null", os.O_WRONLY),
                  "proc": os.path.isdir("/proc/1")}))
"""
    run = sandbox([["ro", "/", "/"]], code)
    assert report(run) == {"null": "EACCES", "proc": True}  # nodev: no host device opens
    assert "the host's /proc is visible at /proc" in run.stderr
    run = sandbox([["ro", "/", "/"], ["proc", "/proc"], ["dev", "/dev"]], code)
    assert report(run) == {"null": "ok", "proc": True} and "visible" not in run.stderr


@needs_namespaces
def test_a_symlink_entry_is_the_link_itself_never_what_it_points_to() -> None:
    repeated = [["symlink", "missing", "/a"], ["symlink", "missing", "/a"]]
    code = "print(json.dumps([os.readlink('/a'), os.path.lexists('/missing')]))"
    assert report(sandbox([*system_plan(), *repeated], code)) == ["missing", False]
    run = sandbox([*system_plan(), *repeated, ["symlink", "other", "/a"]], "print(1)")
    assert run.returncode == namespaces.DENIED and "/a exists already" in run.stderr


@needs_namespaces
def test_a_missing_source_is_skipped(tmp_path: Path) -> None:
    plan = [*system_plan(), ["ro", str(tmp_path / "missing"), "/m"], ["dir", "/here"]]
    code = "print(json.dumps([os.path.exists('/m'), os.path.isdir('/here')]))"
    assert report(sandbox(plan, code)) == [False, True]


@needs_namespaces
def test_a_folder_descriptor_passed_on_to_commands_is_refused(tmp_path: Path) -> None:
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # through it: openat(fd, "..")
    try:
        run = sandbox(system_plan(), "print('ran')", pass_fds=[folder])
    finally:
        os.close(folder)
    assert run.returncode == namespaces.DENIED and "ran" not in run.stdout
    assert f"descriptor {folder} is a folder outside the sandbox" in run.stderr


@needs_namespaces
@as_root
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs util-linux unshare")
@pytest.mark.parametrize("options", [[], ["--legacy-mounts"]], ids=["mount_setattr", "remounts"])
def test_read_only_reaches_submounts_and_keeps_the_host_s_locked_flags(
    tmp_path: Path, options: list[str]
) -> None:
    """A host mount inside the source (made in a private mount namespace of the test's) with
    flags a user namespace may not clear: remounting without them would fail (EPERM)."""
    tree = tmp_path / "src"
    tree.mkdir()
    mounts = (
        f"mount -t tmpfs -o noexec,nosuid,nodev,noatime heron-a {tree} && mkdir {tree}/sub"
        f" && mount -t tmpfs -o strictatime heron-b {tree}/sub && echo x > {tree}/sub/f && exec"
    )
    code = """
def options(point):
    for line in open("/proc/self/mountinfo"):
        if line.split()[4] == point:
            return sorted(line.split()[5].split(","))
print(json.dumps({
    "top": attempt(os.open, "/ro/new", os.O_WRONLY | os.O_CREAT),
    "submount": attempt(os.open, "/ro/sub/f", os.O_WRONLY),
    "/ro": options("/ro"),
    "/ro/sub": options("/ro/sub"),
}))
"""
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", mounts + ' "$@"', "sh"]
    plan = [*system_plan(), ["ro", str(tree), "/ro"]]
    result = report(sandbox(plan, code, options=options, prefix=command))
    assert result == {
        "top": "EROFS",
        "submount": "EROFS",
        "/ro": ["noatime", "nodev", "noexec", "nosuid", "ro"],
        "/ro/sub": ["nodev", "nosuid", "ro"],  # strictatime: no atime option shown
    }


@needs_namespaces
@as_root
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs util-linux unshare")
def test_where_the_kernel_refuses_a_new_proc_it_stays_empty_and_the_user_is_told() -> None:
    """As in a Docker container, a file of /proc masked by a bind (in a private mount namespace
    of the test's): the kernel refuses a new procfs (mount_too_revealing). The host's /proc is
    not bound instead."""
    mask = 'mount --bind /dev/null /proc/version && exec "$@"'
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", mask, "sh"]
    code = "print(json.dumps([os.listdir('/proc'), os.getuid()]))"
    run = sandbox(system_plan(), code, prefix=command)
    assert report(run) == [[], os.getuid()]
    assert "/proc stays empty: the kernel refused a new procfs" in run.stderr


@needs_namespaces
@as_root
@pytest.mark.skipif(
    not shutil.which("setpriv") or not os.access("/usr/bin/python3", os.X_OK),
    reason="needs setpriv and a system Python",
)
def test_an_unprivileged_user_gets_the_same_sandbox() -> None:
    """The path users have: no capability on the host. devpts needs uid 0 mapped (the first
    user namespace maps the caller to 0; the nested one maps it back)."""
    with tempfile.TemporaryDirectory(prefix="heron-ns-") as folder:
        base = Path(folder)
        base.chmod(0o755)
        script = base / "namespaces.py"
        shutil.copy(SCRIPT, script)  # where the user can read it
        tree = read_only_tree(base)
        workspace = base / "ws"
        workspace.mkdir()
        for path in (tree, tree / "d", tree / "f", workspace):  # only the mount says no
            os.chown(path, NOBODY, GROUP)
        python = "/usr/bin/python3"
        plan = [*system_plan(python), ["ro", str(tree), "/ro"], ["rw", str(workspace), "/w"]]
        code = (
            CHANGES.replace("print(json.dumps({", "changes = {").replace("}))", "}")
            + """
open("/w/new", "w").close()
leader, follower = os.openpty()
print(json.dumps({"changes": changes, "terminal": os.ttyname(follower), "gid": os.getgid(),
                  "pids": [n for n in os.listdir("/proc") if n.isdigit()]}))
"""
        )
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={GROUP}", "--clear-groups"]
        result = report(sandbox(plan, code, python=python, prefix=prefix, script=script))
        made = (workspace / "new").stat()
    changes = result["changes"]
    assert changes.pop("read") == "original" and changes.pop("uid") == NOBODY
    assert changes.pop("capabilities") == 0
    assert changes == dict.fromkeys(changes, "EROFS")
    assert (made.st_uid, made.st_gid, result["gid"]) == (NOBODY, GROUP, GROUP)
    assert result["terminal"] == "/dev/pts/0" and len(result["pids"]) == 2


@needs_namespaces
def test_the_status_is_passed_on_and_killing_the_monitor_kills_everything_inside() -> None:
    assert sandbox(system_plan(), "sys.exit(7)").returncode == 7
    killed = sandbox(system_plan(), "os.kill(os.getpid(), 9)")
    assert killed.returncode == 128 + signal.SIGKILL
    tag = f"heron-ns-{uuid.uuid4().hex}"
    code = """
import subprocess, time
# Only the sleepers' command lines hold TAG-sleeps (the monitor's and pid 1's hold TAG).
sleeper = [sys.executable, "-I", "-S", "-c", "import time; time.sleep(10**6)",
           sys.argv[1] + "-sleeps"]
subprocess.Popen(sleeper, start_new_session=True)
if os.fork() == 0:  # an orphan, reparented to pid 1
    os.setsid()
    subprocess.Popen(sleeper)
    os._exit(0)
print("ready", flush=True)
time.sleep(10**6)
"""
    command = [PYTHON, "-I", "-S", str(SCRIPT), json.dumps(system_plan()), "--"]
    monitor = subprocess.Popen(
        [*command, PYTHON, "-I", "-S", "-c", PRELUDE + code, tag],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert monitor.stdout is not None and monitor.stdout.readline() == "ready\n"
        _wait_until(lambda: len(_tagged(f"{tag}-sleeps")) == 2)
        monitor.kill()
        assert monitor.wait(timeout=TIMEOUT) == -signal.SIGKILL
        _wait_until(lambda: not _tagged(tag))
    finally:
        monitor.kill()
        monitor.wait(timeout=TIMEOUT)
        for pid in _tagged(tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _tagged(tag: str) -> list[int]:
    """Live processes whose command line holds `tag`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if tag.encode() in (entry / "cmdline").read_bytes():
                state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
                if state not in (b"Z", b"X"):
                    found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _wait_until(condition: Any) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# --- available(): what a user is told when namespaces are refused ---------------------------


@needs_namespaces
@as_root
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs util-linux unshare")
def test_a_real_refusal_is_explained() -> None:
    """user.max_user_namespaces=0, set in a throwaway user namespace (the limit is per
    namespace: the host's is never touched)."""
    limit = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    run = subprocess.run(
        ["unshare", "-Ur", "sh", "-c", limit, "sh", PYTHON, "-I", "-S", str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert run.returncode == 1
    assert "user.max_user_namespaces=0" in run.stdout and "install bubblewrap" in run.stdout


@needs_namespaces
def test_the_check_says_so_where_namespaces_work() -> None:
    check = [PYTHON, "-I", "-S", str(SCRIPT), "--check"]
    run = subprocess.run(check, capture_output=True, text=True, timeout=TIMEOUT)
    assert (run.returncode, run.stdout) == (0, "namespaces: available\n")


def test_available_tries_for_real_and_remembers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespaces, "_availability", [])
    tried = []
    monkeypatch.setattr(namespaces, "_check_in_child", lambda: tried.append(1) or "no")
    assert namespaces.available() == namespaces.available() == "no" and tried == [1]


class FailingLibc:
    """The C library with unshare(2) failing as a kernel or policy makes it fail."""

    def __init__(self, number: int) -> None:
        self.number = number

    def unshare(self, flags: int) -> int:
        ctypes.set_errno(self.number)
        return -1


@pytest.mark.parametrize(
    ("number", "settings", "words"),
    [
        (errno.ENOSPC, {"user/max_user_namespaces": "0"}, "user.max_user_namespaces=0"),
        (errno.EPERM, {"kernel/unprivileged_userns_clone": "0"}, "unprivileged_userns_clone=0"),
        (errno.EPERM, {"kernel/apparmor_restrict_unprivileged_userns": "1"}, "AppArmor"),
        (errno.EPERM, {}, "seccomp"),
        (errno.EINVAL, {}, "CONFIG_USER_NS"),
        (errno.ENOSPC, {"user/max_user_namespaces": "15"}, "limit of user namespaces is reached"),
    ],
)
def test_a_refused_unshare_says_what_to_change(
    monkeypatch: pytest.MonkeyPatch, number: int, settings: dict[str, str], words: str
) -> None:
    monkeypatch.setattr(namespaces, "_libc", FailingLibc(number))
    monkeypatch.setattr(namespaces, "_sysctl", settings.get)
    assert words in (namespaces.probe() or "")


def test_apparmor_refusing_the_mounts_is_named() -> None:
    settings = {"kernel/apparmor_restrict_unprivileged_userns": "1"}
    assert "AppArmor" in namespaces.refusal("mount", errno.EPERM, settings.get)
    assert "SELinux" in namespaces.refusal("mount", errno.EPERM, {}.get)


def test_enter_refuses_before_unsharing_when_the_kernel_says_no(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(namespaces, "_libc", FailingLibc(errno.ENOSPC))
    monkeypatch.setattr(namespaces, "_sysctl", {"user/max_user_namespaces": "0"}.get)
    monkeypatch.setattr(namespaces, "_threads", lambda: 1)  # pytest's own may run
    with pytest.raises(namespaces.NamespaceError) as refused:
        namespaces.enter([["tmpfs", "/tmp"]])
    assert refused.value.errno == errno.ENOSPC
    assert "user.max_user_namespaces=0" in str(refused.value.strerror)


# --- The plan and the mount table, on their own ------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        ["ro", "/a"],
        ["ro", "relative", "/a"],
        ["ro", "/a", "relative"],
        ["rw-fd", "/a", "/a"],
        ["ro-fd", -1, "/a"],
        ["ro-fd", True, "/a"],
        ["tmpfs", "/a\0b"],
        ["bind", "/a", "/a"],
        "ro /a /a",
        [],
    ],
)
def test_a_malformed_plan_entry_is_refused_before_anything_happens(entry: Any) -> None:
    with pytest.raises(namespaces.PlanError):
        namespaces.parse_plan([entry])


def test_the_command_line_refuses_a_bad_plan_or_usage() -> None:
    assert namespaces.main(["[", "--", "true"]) == namespaces.DENIED  # not JSON
    assert namespaces.main(['{"ro": 1}', "--", "true"]) == namespaces.DENIED
    assert namespaces.main(["[]"]) == 2 and namespaces.main([]) == 2


MOUNTINFO = b"""\
1 0 8:1 / / rw,relatime - ext4 /dev/sda1 rw
20 1 0:30 / /tmp/root rw,nosuid,nodev - tmpfs tmpfs rw
21 20 8:1 /src /tmp/root/a\\040b ro,nosuid,noexec,noatime - ext4 /dev/sda1 rw
22 21 0:31 / /tmp/root/a\\040b/sub rw,nodiratime,relatime - tmpfs t rw
23 21 0:32 / /tmp/root/a\\040b/deep/er rw,relatime - tmpfs t rw
24 21 0:33 / /tmp/root/a\\040b/deep rw,relatime - tmpfs t rw
25 22 0:34 / /tmp/root/a\\040b/sub rw,relatime shared:7 master:2 - tmpfs t rw
"""


def test_the_mount_table_is_read_as_the_kernel_shows_it() -> None:
    mounts = namespaces.parse_mountinfo(MOUNTINFO)
    assert (mounts[2].point, mounts[2].fstype, mounts[2].device) == ("/tmp/root/a b", "ext4", 2049)
    assert mounts[2].flags == (
        namespaces.MS_RDONLY | namespaces.MS_NOSUID | namespaces.MS_NOEXEC | namespaces.MS_NOATIME
    )
    assert mounts[1].flags & namespaces.MS_STRICTATIME  # neither relatime nor noatime
    assert mounts[6].fstype == "tmpfs"  # after the optional fields
    visible = namespaces.visible_mounts(mounts, "/tmp/root/a b")
    # 22 is covered by 25 on the same point; 23 by 24, mounted later on a folder above it.
    assert sorted((m.point, m.id) for m in visible) == [
        ("/tmp/root/a b", 21),
        ("/tmp/root/a b/deep", 24),
        ("/tmp/root/a b/sub", 25),
    ]
