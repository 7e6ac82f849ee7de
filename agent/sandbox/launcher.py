"""The launcher: run one command confined, where no zygote can start it (the editor's terminal).

    python -I -S launcher.py CONFIG -- COMMAND [ARG...]
    python -I -S launcher.py CONFIG --probe
    python -I -S launcher.py --inside LAYERS (-- COMMAND [ARG...] | --probe)   (under bwrap)

CONFIG is a marshalled file Heron wrote for the session (agent.sandbox.terminal), outside
anything a command may write: the sandbox path, the roots with the identity they had when the
session started, the confinement (agent.sandbox.confine) and, for bubblewrap, its argument
list. The launcher first checks each root is still that folder (a root swapped for a symlink
is refused) and opens it, then:

- bubblewrap: execs bwrap with the roots' descriptors, which runs this launcher again inside
  (`--inside` and the layers as JSON), which confines itself (Landlock, capabilities,
  seccomp, limits);
- Heron's own namespaces, or Landlock alone: confines itself here.

Confined, it runs the command below itself as a child subreaper: when the command ends,
whatever it left behind is killed, and the launcher exits with the command's status (dying
of the same signal, so the terminal reports it). `--probe` confines and exits 0 without
running anything: Heron's check that the editor runs its terminals as asked. Exit status 126:
the command was not run (it could not be confined). Standard library only.
"""

from __future__ import annotations

import marshal
import os
import signal
import sys
from typing import Any

if __package__:
    from agent.sandbox import confine, reap
else:  # a bare script: `-I` leaves its folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import confine  # type: ignore[import-not-found,no-redef]
    import reap  # type: ignore[import-not-found,no-redef]
USAGE = "usage: launcher.py CONFIG (-- COMMAND [ARG...] | --probe)"


def main(argv: list[str]) -> int:
    inside = bool(argv) and argv[0] == "--inside"  # under bubblewrap: CONFIG is the layers
    args = argv[1:] if inside else argv
    if len(args) < 2 or args[1] not in ("--", "--probe") or (args[1] == "--" and len(args) < 3):
        print(USAGE, file=sys.stderr)
        return 2
    probe = args[1] == "--probe"
    command = args[2:]
    try:
        if inside:
            layers = confine.decode(args[0])
        else:
            with open(args[0], "rb") as f:
                config = marshal.load(f)
            fds = open_roots(config["roots"])
            if config["path"] == "bwrap":
                os.execv(config["bwrap"][0], bwrap_argv(config, fds, args[1:]))
            layers = with_fds(config["confinement"], fds)
        cwd = os.getcwd()
        confine.confine(layers)
        os.chdir(cwd)  # a new root (Heron's namespaces) leaves the process at its /
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        print(f"heron sandbox: the command was not run: {exc}", file=sys.stderr)
        return confine.DENIED
    return 0 if probe else run(command)


def open_roots(roots: list[list[object]]) -> list[int]:
    """A descriptor on each root, refused unless it is the folder the session started with."""
    fds = []
    for path, device, inode in roots:
        fd = os.open(str(path), os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (device, inode):
            raise OSError(f"{path} is not the folder it was when the session started")
        fds.append(fd)
    return fds


def bwrap_argv(config: dict[str, Any], fds: list[int], rest: list[str]) -> list[str]:
    """bwrap's arguments with the roots' descriptors in their places ("{root0}" …), then this
    launcher inside."""
    for fd in fds:
        os.set_inheritable(fd, True)
    template = config["bwrap"]
    assert isinstance(template, list)
    filled = []
    for arg in template:
        for i, fd in enumerate(fds):
            arg = arg.replace(f"{{root{i}}}", str(fd))
        filled.append(arg)
    layers = confine.encode(config["confinement"])
    python = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--inside", layers]
    return [*filled, *python, *rest]


def with_fds(layers: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    """The confinement with the roots' descriptors where Heron left their index: the plan's
    "rw-root" entries, Landlock's {"root": N}."""
    plan = layers.get("plan")
    if isinstance(plan, list):
        plan = [["rw-fd", fds[op[1]], op[2]] if op[0] == "rw-root" else op for op in plan]
        layers = {**layers, "plan": plan}
    rules = layers.get("landlock")
    if isinstance(rules, dict):
        writes = [fds[w["root"]] if isinstance(w, dict) else w for w in rules["write"]]
        layers = {**layers, "landlock": {**rules, "write": writes}}
    return layers


def run(command: list[str]) -> int:
    """Run `command` below this process, a child subreaper; kill what it leaves behind; end
    as it ended."""
    reap.become_subreaper()
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)  # what Python ignores, the command must not
    try:
        pid = os.posix_spawnp(command[0], command, dict(os.environ))
    except OSError as exc:
        print(f"heron sandbox: {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else confine.DENIED
    # The terminal's Ctrl-C reaches the command (same process group); the launcher waits.
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):  # the editor stops the terminal
        signal.signal(sig, _stop)
    status = 0
    while True:
        try:
            ended, raw = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if ended == pid:
            status = os.waitstatus_to_exitcode(raw)
            reap.kill_descendants()  # what the command left behind ends with it
    if status < 0:  # died of a signal: so does the launcher, for the terminal to see
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status


def _stop(signum: int, frame: object) -> None:
    reap.kill_descendants()
    os._exit(128 + signum)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
