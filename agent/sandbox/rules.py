"""What one session's sandboxed commands may touch, and the launcher command line that says it.

Writes: the session's roots (cwd and additional directories) and a private temporary directory,
made on first use, exported as TMPDIR and removed when the session ends. Reads: those, the
system (`SYSTEM_READS`), the Python running Heron, the folders on PATH that are not the home
folder itself, and the toolchain caches in `HOME_READS`; nothing else of the home folder.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from agent.sandbox.landlock import abi_version
from agent.sandbox.watch import Fingerprint, changed_note, changed_paths, fingerprint
from agent.sandbox.zygote import ConfinedProcess, Zygote

LAUNCHER = str(Path(__file__).with_name("landlock.py").resolve())

SYSTEM_READS = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
    "/proc", "/sys", "/nix", "/snap", "/run/current-system",
)  # fmt: skip
# Not all of /dev: a raw disk is readable where the user may read it (root: everywhere).
# Under $HOME: what builds need, never credentials (~/.cargo/credentials.toml stays out).
HOME_READS = (
    ".cargo/bin", ".cargo/registry", ".cargo/git", ".rustup", ".npm", ".cache/pip",
    "go/pkg", ".pyenv", ".nvm", ".gitconfig", ".config/git/config", ".config/git/ignore",
    ".config/git/attributes",
)  # fmt: skip
DEVICES = (
    "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom", "/dev/ptmx",
    "/dev/pts",
)  # fmt: skip

BLOCKED_HINT = (
    "\n\n[Heron] This command ran in the auto-mode sandbox: it may write only inside the "
    "workspace and $TMPDIR, may not read the home folder outside the workspace, and has no "
    'network. The "{error}" above is most likely the sandbox blocking it. If the command '
    'really needs that, call bash again with "sandbox": false and say why in your message: '
    "the user will be asked to run it outside the sandbox."
)
DENIAL_WORDS = ("Permission denied", "Operation not permitted", "EACCES", "EPERM")

UNAVAILABLE = (
    "\n\n(Auto mode: the command sandbox is not available here ({why}), so commands ask "
    "before they run, as in ask mode.)\n\n"
)
NETWORK_OPEN = (
    "\n\n(Auto mode: this kernel's Landlock (ABI {abi}) cannot confine the network: sandboxed "
    "commands run without asking and may reach it; file access is confined.)\n\n"
)


_leftovers: set[str] = set()  # temporary directories of sessions still open


@atexit.register
def remove_leftovers() -> None:
    """Heron exits with sessions open: their temporary directories go too (`os._exit` skips
    atexit: agent.processes.shutdown calls this)."""
    for path in list(_leftovers):
        shutil.rmtree(path, ignore_errors=True)


def available() -> bool:
    return abi_version() >= 1 and os.environ.get("HERON_SANDBOX") != "off"


class Sandbox:
    """One session's sandbox: its rules, its temporary directory, its once-said notice."""

    def __init__(self, roots: Callable[[], list[Path]], active: Callable[[], bool]) -> None:
        self._roots = roots
        self._active = active
        self._tmpdir: str | None = None
        self._told = False
        self._zygote: Zygote | None = None
        self._changes: list[str] = []  # watched paths commands changed, not yet taken

    def confining(self) -> bool:
        """Commands run confined now: the session is in auto mode and Landlock is there."""
        return self._active() and available()

    @property
    def tmpdir(self) -> str:
        if self._tmpdir is None or not os.path.isdir(self._tmpdir):
            self._tmpdir = tempfile.mkdtemp(prefix="heron-sandbox-")
            _leftovers.add(self._tmpdir)
        return self._tmpdir

    def launcher(self, command: list[str]) -> list[str]:
        """The argv that runs `command` confined (through `landlock.py` as a bare script)."""
        return [sys.executable, "-I", "-S", LAUNCHER, *self.rules(), "--", *command]

    def rules(self) -> list[str]:
        """The launcher's and the zygote's arguments: `--write DIR … --read DIR … --device …`."""
        rules: list[str] = []
        for flag, paths in (("--write", self.writes()), ("--read", self.reads())):
            for path in paths:
                rules += [flag, path]
        for path in DEVICES:
            rules += ["--device", path]
        return rules

    async def spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> ConfinedProcess:
        """Start `argv` confined through the session's zygote (started on first use, and
        again when the rules change: a new root, a new TMPDIR)."""
        rules = self.rules()
        if self._zygote is None or self._zygote.rules != rules:
            if self._zygote is not None:
                self._zygote.close()
            self._zygote = Zygote(rules)
        return await self._zygote.spawn(argv, env, cwd)

    def env(self) -> dict[str, str]:
        tmp = self.tmpdir
        return {"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp}

    def writes(self) -> list[str]:
        return [str(root) for root in self._roots()] + [self.tmpdir]

    def reads(self) -> list[str]:
        home = Path.home()
        reads = list(SYSTEM_READS)
        reads += {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent)}
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            path = Path(folder)
            # The home folder itself (or `/`) on PATH must not open all of it.
            if path.is_absolute() and path not in (home, *home.parents):
                reads.append(folder)
        reads += [str(home / name) for name in HOME_READS]
        return reads

    def watch(self) -> Fingerprint:
        """The state of `.git/` config and hooks and `.heron/`, before a command."""
        return fingerprint(self._roots())

    def changed(self, before: Fingerprint) -> str:
        """What the command changed there, for the model and the user ("" if nothing); the
        paths are kept for `take_changes`."""
        after = fingerprint(self._roots())
        self._changes += changed_paths(before, after)
        return changed_note(before, after)

    def take_changes(self) -> list[str]:
        """The watched paths sandboxed commands changed since the last call (the session's
        trust: git runs with the repository's programs disabled after a `.git/` change)."""
        changes, self._changes = self._changes, []
        return changes

    def notice(self) -> str | None:
        """Once per session: why auto mode asks for commands, or that the network is open."""
        if self._told:
            return None
        self._told = True
        abi = abi_version()
        if not available():
            why = "Landlock is turned off" if abi else "no Landlock in this kernel"
            return UNAVAILABLE.format(why=why)
        if abi < 4:
            return NETWORK_OPEN.format(abi=abi)
        return None

    def close(self) -> None:
        """The session ended: its zygote and its temporary directory go."""
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            _leftovers.discard(self._tmpdir)
            self._tmpdir = None


def blocked_hint(output: str, exit_code: int | None) -> str:
    """The note a failed sandboxed command's result gets when a denial shows in its output."""
    if exit_code == 0:
        return ""
    error = next((word for word in DENIAL_WORDS if word in output), None)
    return BLOCKED_HINT.format(error=error) if error else ""
