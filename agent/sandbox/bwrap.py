"""The system's bubblewrap: found, checked once, and handed a mount plan (agent.sandbox.plan).

bubblewrap is what Flatpak, Codex and Claude Code build their Linux sandboxes on, packaged by
every distribution (with the AppArmor profile Ubuntu 24.04 needs for user namespaces), so it is
preferred to Heron's own namespaces whenever it is installed and works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache

from agent.sandbox.plan import Op

CHECK_TIMEOUT = 10.0
# Every namespace but the cgroup one (which would only hide the cgroup tree).
UNSHARE = ("--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts")


@cache
def find() -> str | None:
    """bwrap on PATH (resolved), or None."""
    found = shutil.which("bwrap")
    return os.path.realpath(found) if found else None


@cache
def problem() -> str | None:
    """None when bwrap can make the namespaces here; else why not, in its own words."""
    program = find()
    if program is None:
        return "bubblewrap (bwrap) is not installed"
    argv = [program, *UNSHARE, "--die-with-parent", "--ro-bind", "/", "/", "--", "/bin/true"]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=CHECK_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap could not create the namespaces ({said[-1] if said else done.returncode})"
    return None


@cache
def _has_bind_fd() -> bool:
    """`--bind-fd` came with bubblewrap 0.8.0 (older ones bind by path)."""
    program = find()
    if program is None:
        return False
    try:
        usage = subprocess.run(
            [program, "--help"], capture_output=True, timeout=CHECK_TIMEOUT, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return b"--bind-fd" in usage


def argv(plan: list[Op], command: list[str]) -> tuple[list[str], list[int]]:
    """bwrap's arguments for `plan` then `command`, and the descriptors it must inherit."""
    program = find()
    assert program is not None
    args = [program, *UNSHARE, "--die-with-parent", "--cap-drop", "ALL"]
    fds: list[int] = []
    for op in plan:
        kind = op[0]
        if kind in ("ro", "rw"):
            args += ["--ro-bind-try" if kind == "ro" else "--bind-try", str(op[1]), str(op[2])]
        elif kind in ("ro-fd", "rw-fd"):
            fd = op[1]  # a descriptor, or a placeholder the launcher fills in ("{root0}")
            if isinstance(fd, int):
                fds.append(fd)
            if _has_bind_fd():
                args += ["--ro-bind-fd" if kind == "ro-fd" else "--bind-fd", str(fd), str(op[2])]
            else:  # the descriptor's magic link: what it points at, not what the path is now
                args += ["--ro-bind" if kind == "ro-fd" else "--bind", f"/proc/self/fd/{fd}"]
                args.append(str(op[2]))
        elif kind == "tmpfs":
            args += ["--tmpfs", str(op[1])]
        elif kind == "dev":
            args += ["--dev", str(op[1]), "--tmpfs", f"{op[1]}/shm"]
        elif kind == "proc":
            args += ["--proc", str(op[1])]
        elif kind == "dir":
            args += ["--dir", str(op[1])]
        elif kind == "symlink":
            args += ["--symlink", str(op[1]), str(op[2])]
        else:
            raise ValueError(f"unknown mount plan entry {op!r}")
    # The root bwrap built the rest on is a tmpfs: nothing may be written there.
    args += ["--remount-ro", "/", "--", *command]
    return args, fds
