"""One session's sandbox: its pinned roots, the layers in force, its zygotes, its notice.

Writes: the session's roots (cwd and additional directories, pinned when the session
started: a root whose path now leads elsewhere is refused) and a private temporary folder
(`/tmp` inside the namespaces, `$TMPDIR` everywhere), removed when the session ends. Reads:
the system, the workspace, the Python running Heron, the folders on PATH and the toolchain
caches of the home folder; nothing else of it (agent.sandbox.plan). The layers: see
agent.sandbox.support.

Every local command of the session starts through a zygote (agent.sandbox.zygote): the
confined one in auto mode, an unconfined one otherwise, so that either way everything a
command leaves behind stays below its reaper and is stopped with it.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.notices import Note
from agent.sandbox import bwrap
from agent.sandbox.confine import encode
from agent.sandbox.plan import (
    Identity,
    Op,
    Root,
    heron_reads,
    identity,
    landlock_rules,
    make_mountpoints,
    mount_plan,
    namespace_landlock_rules,
)
from agent.sandbox.support import Layers, detect
from agent.sandbox.terminal import PROBE_COMMAND, PROBE_VARIABLE, write_launch
from agent.sandbox.watch import Fingerprint, changed_paths, fingerprint, new_repositories
from agent.sandbox.zygote import SERVER, ConfinedProcess, Zygote, ZygoteError

BLOCKED_HINT = (
    "\n\n[Heron] This command ran in the auto-mode sandbox: it may write only inside the "
    "workspace and $TMPDIR (not .git/ or .heron/), may not read the home folder outside the "
    'workspace, and has no network. The "{error}" above is most likely the sandbox blocking '
    'it. If the command really needs that, call bash again with "sandbox": false and say why '
    "in your message: the user will be asked to run it outside the sandbox."
)
GIT_HINT = (
    " Git cannot write its repository in the sandbox (.git/ is read-only there): run a git "
    'command that commits, checks out, fetches or stashes with "sandbox": false.'
)
DENIAL_WORDS = (
    "Permission denied", "Operation not permitted", "Read-only file system",
    "Network is unreachable", "Could not resolve host", "Temporary failure in name resolution",
    "EACCES", "EPERM", "EROFS",
)  # fmt: skip

# "cannot create /home/u/x: Permission denied", "touch: '/etc/x': Read-only file system"
BLOCKED_PATH = re.compile(
    r"(\S+?):? (?:Permission denied|Operation not permitted|Read-only file system)"
)
UNAVAILABLE = (
    "\n\n(The command sandbox is not available: {why}. Auto mode asks before each command "
    "here, as ask mode does.)\n\n"
)


_leftovers: set[str] = set()  # temporary directories of sessions still open


@atexit.register
def remove_leftovers() -> None:
    """Heron exits with sessions open: their temporary directories go too (`os._exit` skips
    atexit: agent.processes.shutdown calls this)."""
    for path in list(_leftovers):
        shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class Limits:
    """What a command auto mode runs unasked may use (0: no limit)."""

    processes: int = 4096
    memory_mb: int | None = None  # one process's data; None: half the machine's memory
    file_mb: int = 16384

    def rlimits(self, namespaced: bool) -> dict[str, int]:
        limits: dict[str, int] = {}
        if self.processes:
            # Without a user namespace the kernel counts every process of the user.
            extra = 0 if namespaced else _count_processes()
            limits["nproc"] = self.processes + extra
        memory = self.memory_mb if self.memory_mb is not None else _half_the_memory_mb()
        if memory:
            limits["data"] = memory * 1024 * 1024
        if self.file_mb:
            limits["fsize"] = self.file_mb * 1024 * 1024
        return limits


class Sandbox:
    """Where one session's commands run."""

    def __init__(
        self,
        roots: Callable[[], list[Path]],
        active: Callable[[], bool],
        pins: dict[str, Identity] | None = None,
        protected: Callable[[], list[Path]] = list,
        limits: Callable[[], Limits] = Limits,
        layers: Layers | None = None,
    ) -> None:
        self._roots = roots
        self._active = active
        self._pins = pins if pins is not None else {}  # root as given → identity at start
        self._protected = protected
        self._limits = limits
        self._tmpdir: str | None = None
        self._layers = layers  # None: this machine's best (agent.sandbox.support)
        self._zygote: Zygote | None = None
        self._zygote_key: Any = None
        self._open_roots: list[Root] = []
        self._unconfined: Zygote | None = None
        self._rlimits: dict[str, int] | None = None  # fixed at the first command
        # Whether the client's terminals run the sandbox as asked (None: not checked yet).
        self.terminal_checked: bool | None = None
        self._changes: list[str] = []  # watched paths commands changed, not yet taken

    # -- what confines, for this session ------------------------------------------------------

    def layers(self) -> Layers:
        """The layers in force for this session's sandboxed commands; the same answer for the
        whole session (the permission check and the run must agree)."""
        if self._layers is None:
            self._layers = self._vetted(detect())
        return self._layers

    def confining(self) -> bool:
        """Commands run confined now: the session is in auto mode and a sandbox confines."""
        return self._active() and self.layers().path is not None

    def _vetted(self, layers: Layers) -> Layers:
        """What the session's own folders allow of the machine's layers."""
        if layers.path is None:
            return layers
        roots = [str(root) for root in self._roots()]
        if layers.path == "bwrap" and _inside(bwrap.find() or "", roots):
            why = f"the bwrap found on PATH ({bwrap.find()}) lies inside the workspace"
            return Layers(None, layers.landlock_abi, False, why)
        if layers.path == "landlock":
            # Landlock cannot keep a folder inside a writable one read-only.
            own = [*heron_reads(), *self._protected_strs()]
            exposed = [p for p in own if _inside(os.path.realpath(p), roots)]
            home = os.path.realpath(Path.home())
            if _inside(home, roots):
                why = (
                    f"a workspace folder holds your home folder ({home}), and without "
                    "namespaces the sandbox cannot keep its settings (dotfiles) read-only"
                )
                return Layers(None, layers.landlock_abi, False, why)
            if exposed:
                why = (
                    f"Heron's own installation or configuration ({exposed[0]}) lies inside the "
                    "workspace, and without namespaces the sandbox cannot keep commands from "
                    "rewriting it"
                )
                return Layers(None, layers.landlock_abi, False, why)
        return layers

    # -- running commands ---------------------------------------------------------------------

    async def spawn(
        self, argv: list[str], env: dict[str, str], cwd: Path, confined: bool = True
    ) -> ConfinedProcess:
        """Start `argv` through the session's confined zygote (auto mode), or its unconfined
        one (a command outside the sandbox still gets a reaper)."""
        if not confined:
            if self._unconfined is None:
                self._unconfined = Zygote([*_python(), SERVER, encode({})])
            return await self._unconfined.spawn(argv, env, cwd)
        launch, fds, key = self._launch()
        if self._zygote is None or self._zygote_key != key:
            if self._zygote is not None:
                self._zygote.close()
            self._zygote = Zygote(launch, tuple(fds))
            self._zygote_key = key
        return await self._zygote.spawn(argv, env, cwd)

    def _launch(self) -> tuple[list[str], list[int], Any]:
        """How to start the confined zygote now: its argv, the descriptors it inherits, and
        what, when it changes, needs a new one."""
        layers = self.layers()
        if layers.path is None:
            raise ZygoteError(f"the sandbox is not available: {layers.missing}")
        roots = self._pinned_roots()
        confinement = self.confinement(roots)
        key = encode(confinement)
        server = [*_python(), SERVER]
        if layers.path == "bwrap":
            plan = confinement.pop("plan")
            argv, fds = bwrap.argv(plan, [*server, encode(confinement)])
            return argv, fds, key
        return [*server, encode(confinement)], [r.fd for r in roots], key

    def confinement(self, roots: list[Root]) -> dict[str, Any]:
        """The layers a zygote or a launcher applies (agent.sandbox.confine); for bubblewrap
        the plan is bwrap's to apply and is popped by the caller."""
        layers = self.layers()
        abi = layers.landlock_abi
        namespaced = layers.namespaced
        config: dict[str, Any] = {
            "abi": abi,
            "seccomp": "namespaced" if namespaced else "landlock-only",
            # bubblewrap drops them itself (`--cap-drop ALL`, bounding set included); root
            # keeps them with Landlock alone unless they are dropped.
            "capabilities": layers.path != "bwrap",
            "limits": self._rlimits_now(namespaced),
            "plan": self.plan(roots) if namespaced else None,
        }
        if namespaced:
            paths = [r.path for r in roots]
            config["landlock"] = namespace_landlock_rules(paths) if abi else None
        else:
            config["landlock"] = landlock_rules(
                roots, self.tmpdir, Path.home(), os.environ.get("PATH", "")
            )
        return config

    def terminal(self, command: str, bash: str) -> tuple[str, list[str], dict[str, str]]:
        """What the editor's terminal runs for `command` in the sandbox: `BASH -c COMMAND`
        (`bash`: its full path) and the environment that confines it (agent.sandbox.terminal)."""
        layers = self.layers()
        if layers.path is None:
            raise ZygoteError(f"the sandbox is not available: {layers.missing}")
        roots = self._pinned_roots()
        confinement = self.confinement(roots)
        plan = confinement.pop("plan")
        config: dict[str, Any] = {
            "path": layers.path,
            "roots": [[r.path, r.device, r.inode] for r in roots],
            "confinement": confinement,
        }
        fds = {r.fd: i for i, r in enumerate(roots)}
        if layers.path == "bwrap":
            marked = [_placeholder(op, fds, f"{{root{fds.get(op[1])}}}") for op in plan]
            config["bwrap"] = bwrap.argv(marked, [])[0]
        elif plan is not None:
            confinement["plan"] = [_placeholder(op, fds, None) for op in plan]
        rules = confinement.get("landlock")
        if rules:  # the roots' descriptors, by index, for the launcher to open its own
            rules["write"] = [{"root": fds[w]} if isinstance(w, int) else w for w in rules["write"]]
        entry = write_launch(f"session-{id(self):x}", config)
        env = {**self.env(), "BASH_ENV": entry}
        return bash, ["-c", command], env

    def terminal_probe(self, bash: str) -> tuple[str, list[str], dict[str, str]]:
        """The check that the client runs terminals with the environment Heron gives."""
        command, args, env = self.terminal(PROBE_COMMAND, bash)
        return command, args, {**env, PROBE_VARIABLE: "1"}

    def _rlimits_now(self, namespaced: bool) -> dict[str, int]:
        if self._rlimits is None:
            self._rlimits = self._limits().rlimits(namespaced)
        return self._rlimits

    def plan(self, roots: list[Root]) -> list[Op]:
        plan = mount_plan(
            roots,
            self.tmpdir,
            Path.home(),
            os.environ.get("PATH", ""),
            protected_outside=self._protected_strs(),
            runtime_dir=os.environ.get("XDG_RUNTIME_DIR"),
        )
        make_mountpoints(plan, self.tmpdir)
        return plan

    def _pinned_roots(self) -> list[Root]:
        """The roots as they were when the session started, each with a descriptor opened on
        it now. A root whose path leads elsewhere now (a nested root swapped for a symlink) is
        refused (ZygoteError), never followed."""
        current = self._roots()
        pins = [self._pin(root) for root in current]
        for given, pin in zip(current, pins, strict=True):
            if identity(given) != pin:
                raise _moved(given)
        if [r.path for r in self._open_roots] == [p[0] for p in pins] and all(
            map(_same, self._open_roots)
        ):
            return self._open_roots
        for root in self._open_roots:
            os.close(root.fd)
        self._open_roots = []
        for given, (real, device, inode) in zip(current, pins, strict=True):
            try:
                fd = os.open(real, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                raise _moved(given) from None
            opened = Root(real, device, inode, fd)
            if not _same(opened):  # swapped between the check and the open
                os.close(fd)
                raise _moved(given)
            self._open_roots.append(opened)
        return self._open_roots

    def _pin(self, root: Path) -> Identity:
        key = str(root)
        if key not in self._pins:
            found = identity(root)
            self._pins[key] = found or (os.path.realpath(root), -1, -1)
        return self._pins[key]

    def _protected_strs(self) -> list[str]:
        return [str(p) for p in self._protected()]

    def env(self) -> dict[str, str]:
        """What a sandboxed command's environment gets: its private temporary folder, which
        is `/tmp` inside the namespaces."""
        tmp = "/tmp" if self.layers().namespaced else self.tmpdir
        return {"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}

    @property
    def tmpdir(self) -> str:
        if self._tmpdir is None or not os.path.isdir(self._tmpdir):
            self._tmpdir = tempfile.mkdtemp(prefix="heron-sandbox-")
            _leftovers.add(self._tmpdir)
        return self._tmpdir

    # -- what changed, what the user is told ---------------------------------------------------

    def watch(self) -> Watched:
        """What git and Heron run later outside the sandbox, as it is before a command."""
        return Watched(fingerprint(self._roots()), time.time_ns())

    def changed(self, before: Watched) -> list[str]:
        """What the command changed of it ([] if nothing), repositories it made included."""
        roots = self._roots()
        changed = changed_paths(before.fingerprint, fingerprint(roots))
        changed += new_repositories(roots, before.started_ns)
        self._changes += changed
        return changed

    def take_changes(self) -> list[str]:
        """The watched paths sandboxed commands changed since the last call (the session's
        trust: git runs with the repository's programs disabled after a `.git/` change)."""
        changes, self._changes = self._changes, []
        return changes

    def notice(self) -> Note | None:
        """Why auto mode asks before commands here, when no sandbox confines them (told once
        per session: agent.notices)."""
        layers = self.layers()
        if layers.path is not None:
            return None
        title = "The command sandbox is not available: auto mode asks before commands"
        return Note("sandbox", title, UNAVAILABLE.format(why=layers.missing), "warning")

    def close(self) -> None:
        """The session ended: its zygotes, its descriptors and its temporary folder go."""
        for zygote in (self._zygote, self._unconfined):
            if zygote is not None:
                zygote.close()
        self._zygote = self._unconfined = None
        for root in self._open_roots:
            os.close(root.fd)
        self._open_roots = []
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            _leftovers.discard(self._tmpdir)
            self._tmpdir = None


def blocked_hint(output: str, exit_code: int | None) -> str:
    """The note a failed sandboxed command's result gets when a denial shows in its output."""
    if exit_code == 0:
        return ""
    error = next((word for word in DENIAL_WORDS if word in output), None)
    if not error:
        return ""
    git = GIT_HINT if "/.git/" in output or ".git/" in output or "index.lock" in output else ""
    return BLOCKED_HINT.format(error=error) + git


@dataclass(frozen=True)
class Watched:
    """The state before a sandboxed command, to compare after it."""

    fingerprint: Fingerprint
    started_ns: int


def blocked_for_user(output: str) -> str:
    """What the user reads in the tool call when the sandbox stopped part of a command: what
    was blocked (a path the output names), and that the model may ask to leave the sandbox."""
    places: list[str] = []
    for match in BLOCKED_PATH.finditer(output):
        place = match.group(1).strip("'\"`‘’")
        if place.startswith("/") and place not in places:
            places.append(place)
    home = str(Path.home())
    shown = [("~" + p[len(home) :]) if p.startswith(home + "/") else p for p in places[:3]]
    what = f" (at {', '.join(shown)})" if shown else ""
    return (
        f"⚠ The sandbox blocked this command{what}: in auto mode commands may write only the "
        "workspace and their temporary folder, not read the home folder, and have no network. "
        "The model may ask you to run it outside the sandbox."
    )


def _placeholder(op: Op, fds: dict[int, int], name: str | None) -> Op:
    """A root's entry with a stand-in for Heron's descriptor, which the launcher fills in with
    its own: "{rootN}" for bwrap, ["rw-root", N, path] for Heron's namespaces."""
    if op[0] != "rw-fd" or not isinstance(op[1], int) or op[1] not in fds:
        return op
    return ["rw-fd", name, op[2]] if name else ["rw-root", fds[op[1]], op[2]]


def _python() -> list[str]:
    """The interpreter that runs the bare scripts: isolated, no site (nothing a command could
    have written is read: not the environment, not the current folder, not site-packages)."""
    return [sys.executable, "-I", "-S"]


def _moved(root: Path) -> ZygoteError:
    return ZygoteError(
        f"the workspace folder {root} is not the folder it was when the session started (it "
        f"now leads to {os.path.realpath(root)}); the sandbox will not let commands write "
        "there. Start a new session to work in it"
    )


def _same(root: Root) -> bool:
    try:
        st = os.fstat(root.fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (root.device, root.inode)


def _inside(path: str, roots: list[str]) -> bool:
    return bool(path) and any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _count_processes() -> int:
    uid = os.getuid()
    count = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue
    return count


def _half_the_memory_mb() -> int:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 0
    return max(2048, pages // 2 // (1024 * 1024))
