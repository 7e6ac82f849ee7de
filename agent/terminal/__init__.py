"""Heron from a terminal: `heron exec` (one prompt turn), `heron sessions` (the stored ones),
`heron setup` (the config file) and `heron sandbox` (a command as auto mode runs it).

Imported only when one of these commands is given, never on the editor's ACP path.
"""

from __future__ import annotations

# The commands `heron --help` lists, and what each does.
COMMANDS = {
    "exec": "run one task from a terminal or a script, then exit: heron exec TASK",
    "sessions": "list the stored sessions, newest first",
    "setup": "choose the endpoint, API key and model; test them and save them",
    "sandbox": "run a command as auto mode would, to see what it may do: heron sandbox -- CMD",
}


def run_command(argv: list[str]) -> int:
    if argv[0] == "exec":
        from agent.terminal.exec import main as exec_main

        try:
            return exec_main(argv[1:])
        except KeyboardInterrupt:  # before the turn started (e.g. typing a prompt on stdin)
            return 130
    if argv[0] == "sessions":
        from agent.terminal.sessions import main as sessions_main

        try:
            return sessions_main(argv[1:])
        except KeyboardInterrupt:
            return 130
    if argv[0] == "sandbox":
        from agent.terminal.sandbox import main as sandbox_main

        return sandbox_main(argv[1:])
    from agent.terminal.setup import main as setup_main

    # `heron setup [flags]`, or the editor's `heron [flags] setup`: the flags are the same.
    return setup_main(
        [a for i, a in enumerate(argv) if not (a == "setup" and i in (0, len(argv) - 1))]
    )
