"""What a sandboxed command sees: the mount plan of the namespace paths, and Landlock's rules.

The namespace paths (bubblewrap, or Heron's own namespaces) build a new root from this plan,
applied in order (a later entry shadows an earlier one):

- the system read-only (`SYSTEM_READS`), symlinked top-level folders kept as symlinks;
- `/run`, `/var/run`, `$XDG_RUNTIME_DIR` empty private tmpfs (sockets of D-Bus, Docker, Wayland,
  systemd live there), `/tmp` the session's private temporary folder (so `/tmp/.X11-unix` and
  the ssh-agent's `/tmp/ssh-*` are gone), a fresh `/dev` (no terminal of the user's but the
  command's own) and `/proc` (only the sandbox's processes);
- of the home folder only the toolchain caches of `HOME_READS` and the folders on PATH,
  read-only;
- the Python running Heron and Heron's own package, read-only;
- the roots (the workspace) writable, bound from descriptors opened when the session started;
- inside the roots, read-only again: `.git` (and where a `.git` file, `commondir` or
  `core.hooksPath` lead), `.heron`, submodules' `.git`, Heron's config folder and
  installation when they lie there.

Paths are absolute and the same inside and outside, so a command's cwd and its arguments mean
what they meant to the model. Landlock (a second layer, same process) then allows reading
everything the plan shows and writing only the roots, `/tmp` and `/dev/shm`.

Without namespaces (Landlock alone, `landlock_rules`), Landlock's rules are the only wall: the
same reads, writes to the roots and the private TMPDIR, and no terminal device but `/dev/tty`.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.sandbox.gitmeta import places, real_targets

SYSTEM_READS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys",
    "/nix/store", "/snap", "/gnu/store",
)  # fmt: skip
# Under $HOME: what builds need, never credentials (~/.cargo/credentials.toml stays out).
HOME_READS = (
    ".cargo/bin", ".cargo/registry", ".cargo/git", ".rustup", ".npm", ".cache/pip",
    "go/pkg", ".pyenv", ".nvm", ".gitconfig", ".config/git/config", ".config/git/ignore",
    ".config/git/attributes",
)  # fmt: skip
# Where programs keep sockets and session state that must not be reached: made empty.
HIDDEN = ("/run", "/var/run", "/var/lock")
# Devices a command may open for writing without namespaces (Landlock alone). Not /dev/pts
# nor /dev/ptmx there: the user's other terminals are /dev/pts/N and Landlock cannot tell
# them from the command's own.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom")
MAX_HOME_ENTRIES = 2000  # a home folder's top entries made writable one by one
# Inside each root, read-only too: Heron's project settings, and what an editor or a shell runs
# from the project (Zed's and VS Code's tasks, formatters and language servers; JetBrains';
# direnv's `.envrc`, run at every `cd`).
EDITOR_SETTINGS = (".heron", ".zed", ".vscode", ".idea", ".envrc")

Op = list[str | int]  # ["ro", src, dst], ["rw-fd", fd, dst], ["tmpfs", dst], …


@dataclass(frozen=True)
class Root:
    """A workspace folder as it was when the session started: its real path, its identity,
    and a descriptor that keeps pointing at it whatever its path leads to later."""

    path: str  # the real path (symlinks resolved once)
    device: int
    inode: int
    fd: int  # O_PATH, kept open for the session


Identity = tuple[str, int, int]  # real path, device, inode


def identity(path: Path | str) -> Identity | None:
    """What a root is now: its real path and its inode (None if it is not a folder)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def home_reads(home: Path) -> list[str]:
    return [str(home / name) for name in HOME_READS]


def path_reads(home: Path, path_env: str) -> list[str]:
    """The folders on PATH, never the home folder itself (nor `/`), which would open all of
    it."""
    reads = []
    for folder in path_env.split(os.pathsep):
        path = Path(folder)
        if path.is_absolute() and path not in (home, *home.parents):
            reads.append(folder)
    return reads


def heron_reads() -> list[str]:
    """The Python running Heron (its environment and base installation) and Heron's package:
    the sandbox's zygote and launcher run from there."""
    package = Path(__file__).resolve().parent.parent
    found = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent)}
    found.add(str(package))
    return sorted(found)


def landlock_rules(
    roots: list[Root], tmpdir: str, home: Path, path_env: str
) -> dict[str, list[str | int]]:
    """Landlock alone: what a command may read, write and open as a device. The roots are
    given by their descriptors (whatever their paths lead to by the time the rules are made)."""
    reads: list[str | int] = [*SYSTEM_READS, "/proc", "/run/current-system"]
    reads += heron_reads() + path_reads(home, path_env) + home_reads(home)
    reads += git_outside(roots, home)
    writes: list[str | int] = [root.fd for root in roots]
    return {"read": reads, "write": [*writes, tmpdir], "device": list(DEVICES)}


def namespace_landlock_rules(roots: Iterable[str]) -> dict[str, list[str]]:
    """Landlock inside the namespaces: everything the plan shows may be read (the mounts
    decide what is there); writes only where the plan binds writable folders."""
    return {"read": ["/"], "write": [*roots, "/tmp", "/dev/shm"], "device": ["/dev"]}


def mount_plan(
    roots: list[Root],
    tmpdir: str,
    home: Path,
    path_env: str,
    protected_outside: Iterable[str] = (),
    runtime_dir: str | None = None,
) -> list[Op]:
    """The new root, in order. `protected_outside`: Heron's config folder and config file,
    made read-only where they lie inside a root."""
    plan: list[Op] = []
    for place in SYSTEM_READS:
        plan += _system(place)
    plan += [["tmpfs", "/run"], ["symlink", "/run", "/var/run"], ["tmpfs", "/var/lock"]]
    if os.path.isdir("/run/current-system"):  # NixOS: its programs live behind /run
        plan.append(["ro", "/run/current-system", "/run/current-system"])
    if runtime_dir and not any(_under(runtime_dir, hidden) for hidden in HIDDEN):
        plan.append(["tmpfs", runtime_dir])
    plan += [["dev", "/dev"], ["proc", "/proc"]]
    plan += [["rw", tmpdir, "/tmp"], ["symlink", "/tmp", "/var/tmp"]]
    for place in [*home_reads(home), *path_reads(home, path_env), *heron_reads()]:
        if os.path.exists(place) and not any(_under(place, s) for s in SYSTEM_READS):
            plan.append(["ro", place, place])
    for place in git_outside(roots, home):  # a worktree's repository: git must read it
        plan.append(["ro", place, place])
    for root in roots:
        plan.append(["rw-fd", root.fd, root.path])
    if any(_under(str(home), root.path) for root in roots):
        plan += home_in_workspace(home)
    for place in protected_paths(roots, home, protected_outside):
        plan.append(["ro", place, place])
    return plan


def home_in_workspace(home: Path) -> list[Op]:
    """A thread on the home folder (or a folder holding it): its files and folders stay
    writable, but not the home folder itself nor its dot-entries (shell startup files, git's
    and ssh's settings, editors' configs, ~/.local/bin on PATH, Heron's own store): what runs
    later outside the sandbox. New entries cannot be made at its top either (`.bash_aliases`
    that `.bashrc` would source)."""
    top = str(home)
    plan: list[Op] = [["ro", top, top]]
    try:
        names = sorted(os.listdir(top))
    except OSError:
        return plan
    for name in names[:MAX_HOME_ENTRIES]:
        path = os.path.join(top, name)
        if not name.startswith(".") and not os.path.islink(path):
            plan.append(["rw", path, path])
    return plan


def make_mountpoints(plan: list[Op], tmpdir: str) -> None:
    """Make, in the session's own temporary folder, the folders and files where the plan binds
    something below `/tmp` (a workspace or a PATH folder under the host's /tmp): that folder is
    the sandbox's /tmp, and Heron's namespaces never create anything on the host themselves.

    The folder is the commands': a symlink they left on the way is removed, never followed
    (Heron runs this unconfined)."""
    for op in plan:
        if op[0] not in ("ro", "rw", "ro-fd", "rw-fd"):
            continue
        target = str(op[2])
        if not target.startswith("/tmp/"):
            continue
        source = op[1]
        is_dir = os.path.isdir(source) if isinstance(source, str) else True
        try:
            _make_beneath(tmpdir, target[len("/tmp/") :].split("/"), is_dir)
        except OSError:
            continue  # the bind then fails and the zygote says so


def _make_beneath(top: str, parts: list[str], is_dir: bool) -> None:
    """Make `top/parts…` (a folder, or an empty file last) one component at a time, each
    opened without following links; a link in the way is replaced by a real folder."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for index, name in enumerate(parts):
            if name in ("", ".", ".."):
                raise OSError(f"not a plain path component: {name!r}")
            last = index == len(parts) - 1
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                os.unlink(name, dir_fd=fd)
                st = None
            if last and not is_dir:
                if st is None:
                    os.close(
                        os.open(name, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, 0o644, dir_fd=fd)
                    )
                return
            if st is None:
                os.mkdir(name, 0o755, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def git_outside(roots: list[Root], home: Path) -> list[str]:
    """Where the roots' repositories lie outside them (a worktree's main repository, verified
    to name the worktree back), to be readable: a command may read it, never write it."""
    found = [p for root in roots for p in places(root.path, str(home)).readable]
    return sorted(p for p in dict.fromkeys(found) if not any(_under(p, r.path) for r in roots))


def protected_paths(roots: list[Root], home: Path, outside: Iterable[str] = ()) -> list[str]:
    """What must stay read-only inside the writable roots: each root's `.git` and `.heron`,
    what git runs or reads from the repository (agent.sandbox.gitmeta), and Heron's own config,
    store and installation."""
    found: list[str] = []
    for root in roots:
        for name in EDITOR_SETTINGS:
            found += real_targets(os.path.join(root.path, name))
        found += places(root.path, str(home)).protect
    found += [p for place in [*outside, *heron_reads()] for p in real_targets(place)]
    inside = [p for p in dict.fromkeys(found) if any(_under(p, r.path) for r in roots)]
    return sorted(inside, key=len)


def _system(place: str) -> list[Op]:
    """A system folder as it is: a merged-/usr symlink (`/bin` → `usr/bin`) stays a symlink."""
    if os.path.islink(place):
        return [["symlink", os.readlink(place), place]]
    return [["ro", place, place]] if os.path.isdir(place) else []


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")
