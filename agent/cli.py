"""`heron`: flags, environment and TOML → settings; then speak ACP on stdin/stdout.

Start-up is tuned for the editor's first questions. Nothing comes before the answer to a plain
`initialize` but what it needs (this module, `json` and `agent.acp.handshake`): flags given on
the command line are parsed first (a usage error or `--help` must end Heron before it reads
anything), but with none there is nothing to parse, and the settings are read after the
answer. The full server then takes over the same stdin buffer. When the first line is not there
yet, the server's imports start in a background thread meanwhile. The model client (openai) is
imported later still, in the background once a session exists.
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # `typing` itself is not imported before the first answer
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from agent.config import Settings


def build_parser() -> argparse.ArgumentParser:
    import argparse
    import textwrap

    from agent import __version__
    from agent.config import add_flags
    from agent.terminal import COMMANDS

    commands = "\n".join(f"  {name:<10}{what}" for name, what in COMMANDS.items())
    environment = textwrap.fill(
        "Environment: OPENAI_API_KEY, OPENAI_BASE_URL, HERON_MODEL, HERON_MODE, "
        "HERON_MAX_TOKENS, HERON_CONFIG, HERON_LOG_LEVEL, HERON_LOG_FILE, HERON_DATA_DIR, "
        "HERON_CONTEXT_WINDOW, HERON_PASS_ENV, HERON_TOOL_CALLS, HERON_SANDBOX (off: no command "
        "sandbox; bwrap, userns, landlock: that path only). Flags beat environment beat the "
        "config file (default ~/.config/heron/config.toml).",
        width=79,
    )
    parser = argparse.ArgumentParser(
        prog="heron",
        usage="heron [FLAGS]\n       heron COMMAND [...]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Heron, a coding agent for the Agent Client Protocol. With no command it speaks ACP "
            "(JSON-RPC 2.0, one message per line) on stdin/stdout, as editors expect.",
            width=79,
        )
        + f"\n\ncommands (each has --help):\n{commands}",
        epilog=environment,
    )
    parser.add_argument("--version", action="version", version=f"heron {__version__}")
    add_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Terminal commands. `setup` may also come last: an editor's terminal auth appends it to
    # the command line Heron is configured with (`heron --model x setup`).
    if argv:
        from agent.terminal import COMMANDS, run_command

        if argv[0] in COMMANDS or argv[-1] == "setup":
            return run_command(argv)
    # Flags are parsed now, before anything is read: `--help`, `--version` and usage errors
    # end Heron here. No flags (how editors start it) leaves nothing that could fail, and
    # the flag parser is not even imported.
    flags: dict[str, Any] = {}
    config: str | None = None
    if argv:
        parser = build_parser()
        if argv == ["help"]:
            parser.print_help()
            return 0
        args, rest = parser.parse_known_args(argv)
        if rest:
            parser.error(_not_understood(rest))
        flags = {k: v for k, v in vars(args).items() if k != "config"}
        config = args.config

    def load() -> Settings:
        import os

        from agent.config import ConfigError, broken_settings, load_settings

        try:
            return load_settings(flags, config or os.environ.get("HERON_CONFIG"))
        except ConfigError as exc:
            # Keep serving: the editor gets its answers and the first prompt explains this.
            print(f"heron: {exc}", file=sys.stderr)
            return broken_settings(str(exc))

    return serve_stdio(load, load)


def _not_understood(rest: list[str]) -> str:
    """What a usage error says of arguments no flag took: a mistyped command is named, with
    the nearest one."""
    import difflib

    from agent.terminal import COMMANDS

    word = next((arg for arg in rest if not arg.startswith("-")), None)
    if word is None:
        return f"unrecognized arguments: {' '.join(rest)}"
    near = difflib.get_close_matches(word, [*COMMANDS, "help"], n=1, cutoff=0.5)
    hint = f"; did you mean `heron {near[0]}`?" if near else ""
    return f"unknown command {word!r}{hint} (commands: {', '.join(COMMANDS)})"


def serve_stdio(load: Callable[[], Settings], reload: Callable[[], Settings] | None = None) -> int:
    """Answer a first `initialize` at once, then read the settings (`load()`) and serve."""
    from agent.processes.shutdown import install_exit_handlers

    install_exit_handlers()  # a signal from here on stops every command's processes first
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    # Nothing but protocol may reach stdout: from here on a stray print() lands on stderr.
    sys.stdout = sys.stderr

    warm = None
    if not _readable(stdin):
        # The editor has not spoken yet: use the wait to import the server. (When the line is
        # already there, a second thread would only delay the answer, fighting for the GIL.)
        import threading

        warm = threading.Thread(target=_import_server, name="heron-warm-up", daemon=True)
        warm.start()

    first = stdin.readline()
    pending: list[bytes] = []
    initialize_params: dict[str, Any] | None = None
    message = _parse(first)
    if message is not None and _is_plain_initialize(message):
        from agent.acp.handshake import initialize_result, offers_terminal_auth

        result = initialize_result(offers_terminal_auth(message["params"]))
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        stdout.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
        stdout.flush()
        initialize_params = message["params"]
    elif first:
        pending.append(first)

    settings = load()
    if warm is not None:
        warm.join()
    from agent.app.server import run_server
    from agent.processes.shutdown import run_then_exit

    # Never returns: leaves without finalizing, as the stdin reader thread may still be
    # blocked in readline() (an editor that stopped reading but never closed our stdin).
    run_then_exit(
        lambda: run_server(
            settings, stdin, stdout, pending, initialize_params, at_eof=not first, reload=reload
        )
    )
    return 1  # not reached


def _readable(stdin: Any) -> bool:
    """Whether a line (or EOF) is waiting on stdin; False when that cannot be told."""
    try:
        import select

        ready, _, _ = select.select([stdin], [], [], 0)
    except (OSError, ValueError):  # not a selectable file (closed, or not a pipe on Windows)
        return False
    return bool(ready)


def _import_server() -> None:
    import agent.app.server  # noqa: F401  (warms the module cache for the main thread)


def _parse(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _is_plain_initialize(message: Any) -> bool:
    from agent.acp.handshake import is_plain_initialize

    return is_plain_initialize(message)
