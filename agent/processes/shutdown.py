"""How Heron ends, whatever ends it: every command's processes are stopped first.

- SIGTERM, SIGINT (Ctrl-C) and SIGHUP: stop the commands, exit at once with 128 + the signal's
  number, quietly (no traceback; the editor or the terminal asked for it).
- A crash (an exception out of the server): stop the commands, print the traceback, exit 1.
- A normal end (stdin closed): the same cleanup, then the caller's exit code.

The exit itself is `os._exit`: the stdin reader thread may be blocked in readline(), and
interpreter finalization would then abort with "Fatal Python error".

Installed before the editor's `initialize` is answered, so this module imports next to nothing:
`agent.processes.tree` is loaded when there is something to stop.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False  # `typing` itself is not imported before the first answer
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

EXIT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def install_exit_handlers() -> None:
    """Call first thing in the main thread, before anything can start a command."""
    for sig in EXIT_SIGNALS:
        signal.signal(sig, _on_exit_signal)


def _on_exit_signal(signum: int, frame: FrameType | None) -> None:
    for sig in EXIT_SIGNALS:  # a second signal must not interrupt the cleanup
        signal.signal(sig, signal.SIG_IGN)
    try:
        _stop_everything()
    finally:
        _flush(logs=False)  # the interrupted code may hold a logging lock
        os._exit(128 + signum)


def run_then_exit(serve: Callable[[], int]) -> None:
    """Run `serve()`; whatever happens, stop the commands and exit with its code (1 on a
    crash). Never returns."""
    code = 1
    try:
        code = serve()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            _stop_everything()
        finally:
            _flush()
            os._exit(code)


def _stop_everything() -> None:
    from agent.processes.tree import stop_everything

    stop_everything()
    # Sessions still open at exit leave their sandbox TMPDIRs, and the editor's terminal its
    # launcher files (each module loaded only if it made some).
    sandbox = sys.modules.get("agent.sandbox.rules")
    if sandbox is not None:
        sandbox.remove_leftovers()
    terminal = sys.modules.get("agent.sandbox.terminal")
    if terminal is not None:
        terminal.remove_files()


def _flush(logs: bool = True) -> None:
    if logs:
        import logging

        logging.shutdown()
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
