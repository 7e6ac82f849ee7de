"""Auto mode in the editor's terminal: the editor runs `bash -c COMMAND`, and the command
still runs confined.

Clients label a terminal with its `command` and `args`, so those hold the user's command and
nothing else; the sandbox travels in the environment, where no client shows it: `BASH_ENV`
names a script Heron wrote, which bash reads before the command and which replaces bash with
Heron's launcher (agent.sandbox.launcher) running the same command confined. Heron's files
(that script, the launcher's configuration) lie in a folder of its own, readable only by the
user and out of every sandbox's reach, removed when Heron exits.

A client that ignored `env` would run the command unconfined, so before the first one of a
session Heron checks that this client honours it: a terminal that runs `exit 3`, which the
script turns into the launcher's `--probe` (confine, exit 0). Only a 0 proves it.
"""

from __future__ import annotations

import atexit
import contextlib
import marshal
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

LAUNCHER = str(Path(__file__).with_name("launcher.py").resolve())
PROBE_COMMAND = "exit 3"  # what runs when the client dropped the environment
PROBE_VARIABLE = "HERON_SANDBOX_PROBE"

ENTRY = """\
# Written by Heron: bash reads this (BASH_ENV) before the command of an editor's terminal in
# auto mode, and runs the command in the sandbox instead of here.
unset BASH_ENV
if [ -n "${{{probe}-}}" ]; then
  unset {probe}
  exec {launcher} --probe
fi
exec {launcher} -- "$BASH" -c "$BASH_EXECUTION_STRING"
exit 126
"""

_folder: str | None = None


def _private_folder() -> str:
    """Heron's own folder for these files (0700), made on first use, gone at exit: in the
    user's runtime folder where there is one (empty in every sandbox), else the system's
    temporary folder (never the session's, which commands write)."""
    global _folder
    if _folder is None or not os.path.isdir(_folder):
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        base = runtime if runtime and os.path.isdir(runtime) else None
        _folder = tempfile.mkdtemp(prefix="heron-run-", dir=base)
        atexit.register(shutil.rmtree, _folder, True)
    return _folder


def remove_files() -> None:
    """At exit (agent.processes.shutdown: `os._exit` skips atexit)."""
    if _folder is not None:
        shutil.rmtree(_folder, ignore_errors=True)


def write_launch(name: str, config: dict[str, Any]) -> str:
    """Write the launcher's configuration and the BASH_ENV script for one session (atomically:
    a terminal starting meanwhile reads the old pair or the new one); returns the script."""
    folder = _private_folder()
    config_path = os.path.join(folder, f"{name}.launch")
    entry_path = os.path.join(folder, f"{name}.sh")
    launcher = shlex.join([sys.executable, "-I", "-S", LAUNCHER, config_path])
    entry = ENTRY.format(launcher=launcher, probe=PROBE_VARIABLE)
    _write(config_path, marshal.dumps(config))
    _write(entry_path, entry.encode())
    return entry_path


def _write(path: str, data: bytes) -> None:
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
