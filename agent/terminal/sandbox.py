"""`heron sandbox -- COMMAND`: run a command as auto mode would, to see what it may do.

The current folder (and each `--dir`) is the workspace; the command runs through the same
launcher the editor's terminal runs in auto mode (agent.sandbox.terminal), with the layers
this machine offers. Where none confines, it says why and runs nothing.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from agent.files.workspace import program_outside
from agent.sandbox.rules import Sandbox


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heron sandbox",
        description="Run COMMAND in auto mode's sandbox, as a session in the current folder "
        "would: it may write only the workspace (not .git/ or .heron/) and /tmp (private), read "
        "the system and the workspace but not the home folder, and has no network. Prints the "
        "layers in force (or why there are none) on stderr.",
    )
    parser.add_argument(
        "--dir",
        action="append",
        default=[],
        metavar="DIR",
        help="another workspace folder (writable), like an editor's additional directory",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        build_parser().print_usage(sys.stderr)
        return 2
    roots = [Path.cwd(), *(Path(d).resolve() for d in args.dir)]
    sandbox = Sandbox(roots=lambda: roots, active=lambda: True)
    layers = sandbox.layers()
    if layers.path is None:
        print(f"heron sandbox: nothing runs: {layers.missing}", file=sys.stderr)
        return 126
    print(f"heron sandbox: {layers.describe()}", file=sys.stderr)
    try:
        bash = program_outside("bash", roots)
        if bash is None:
            print("heron sandbox: bash is needed to run the command", file=sys.stderr)
            return 127
        program, shell_args, env = sandbox.terminal(shlex.join(command), bash)
        return subprocess.call([program, *shell_args], env={**os.environ, **env})
    except KeyboardInterrupt:
        return 130
    finally:
        sandbox.close()
