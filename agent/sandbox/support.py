"""Which sandbox this machine can give auto mode, and, where none, what is missing.

The paths, best first:
- `bwrap`: the system's bubblewrap makes a user, mount, pid, network, IPC and UTS namespace;
  Landlock (where the kernel has it) and seccomp are applied inside.
- `userns`: Heron makes the same namespaces itself (agent.sandbox.namespaces), where the
  kernel lets an unprivileged user create them.
- `landlock`: no namespaces; Landlock alone confines the files, which is enough only from ABI
  6 (signals and abstract sockets scoped; TCP from ABI 4, truncate from ABI 3), with seccomp
  denying every new socket (Unix sockets with a path, UDP) and every metadata change (chmod,
  chown, times, xattrs), which Landlock does not cover.
- none: auto mode asks before commands, as ask mode does, and says why once per session.

`HERON_SANDBOX` picks one (`bwrap`, `userns`, `landlock`) or none (`off`); unset or `auto`, the
best that works. `HERON_LANDLOCK_ABI=N` makes Heron use no newer Landlock ABI than N, as on an
older kernel (the tests use it; it can only weaken the Landlock layer, and the truth of the
mode follows). Detection runs once per process (a bwrap start, a namespace probe: a few ms).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache

from agent.sandbox import bwrap, namespaces, seccomp
from agent.sandbox.landlock import abi_version

PATHS = ("bwrap", "userns", "landlock")
LANDLOCK_ALONE = 6  # the ABI from which Landlock alone (with seccomp) confines what is claimed
INSTALL_BWRAP = (
    "install bubblewrap (Debian/Ubuntu: `sudo apt install bubblewrap`; Fedora: "
    "`sudo dnf install bubblewrap`; Arch: `sudo pacman -S bubblewrap`)"
)


@dataclass(frozen=True)
class Layers:
    """What confines a sandboxed command here: `path` (None: nothing does, `missing` says
    why and what to do), the Landlock ABI in use (0: none) and whether seccomp filters."""

    path: str | None
    landlock_abi: int
    seccomp: bool
    missing: str = ""

    @property
    def namespaced(self) -> bool:
        return self.path in ("bwrap", "userns")

    def describe(self) -> str:
        """One line: the layers in force."""
        if self.path is None:
            return f"no sandbox: {self.missing}"
        parts = {
            "bwrap": ["namespaces (bubblewrap)"],
            "userns": ["namespaces (Heron's own)"],
            "landlock": [],
        }[self.path]
        if self.landlock_abi:
            parts.append(f"Landlock ABI {self.landlock_abi}")
        parts.append("seccomp")
        return " + ".join(parts)


def landlock_abi() -> int:
    """The Landlock ABI Heron uses: the kernel's, or less when `HERON_LANDLOCK_ABI` says."""
    abi = abi_version()
    cap = os.environ.get("HERON_LANDLOCK_ABI", "").strip()
    if cap.isdigit():
        abi = min(abi, int(cap))
    return abi


@cache
def detect() -> Layers:
    """The best path that works here, or none with the reason (cached: one probe a
    process)."""
    wanted = os.environ.get("HERON_SANDBOX", "auto").strip().lower() or "auto"
    abi = landlock_abi()
    if wanted == "off":
        return Layers(None, abi, False, "HERON_SANDBOX=off is set")
    if not sys.platform.startswith("linux"):
        return Layers(None, 0, False, "the command sandbox needs Linux")
    if not seccomp.supported():
        return Layers(None, abi, False, "seccomp is not available for this machine's processor")
    if wanted not in ("auto", *PATHS):
        return Layers(None, abi, False, f"HERON_SANDBOX={wanted} is not one of auto, off, "
                      f"{', '.join(PATHS)}")  # fmt: skip
    reasons: list[str] = []
    for path in PATHS if wanted == "auto" else (wanted,):
        problem = _problem(path, abi)
        if problem is None:
            return Layers(path, abi, True)
        reasons.append(problem)
    return Layers(None, abi, False, "; ".join(reasons) + _fix(abi))


def _problem(path: str, abi: int) -> str | None:
    if path == "bwrap":
        return bwrap.problem()
    if path == "userns":
        return namespaces.available()
    if abi < LANDLOCK_ALONE:
        kernel = f"Landlock ABI {abi}" if abi else "no Landlock"
        return f"without namespaces Landlock ABI {LANDLOCK_ALONE} is needed ({kernel} here)"
    return None


def _fix(abi: int) -> str:
    return f". To fix it, {INSTALL_BWRAP}, or allow unprivileged user namespaces"
