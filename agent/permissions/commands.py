"""What "always allow" remembers for a shell command, so that it covers exactly what was approved.

A command is split into simple commands (joined by `;`, `&&`, `||`, `|`, `&` or newlines), each
of which needs its own remembered key. A simple command gets a key only when the matcher
understands all of it; anything else has no key, so it always asks:

- output redirection (`>`, `>>`, `>|`, `&>`, `2>file`, `<>`), here-docs and here-strings;
  only fd duplication (`2>&1`, `>&2`) and `< file` from a relative path inside the cwd pass;
- `NAME=value` prefixes (`GIT_CONFIG_*`, `LD_PRELOAD`, …) and bare assignments;
- expansions: `$…`, backticks, `$(…)`, `<(…)`, globs, braces, `~`, comments, `!`, subshells;
- programs that run their arguments as a command (`env`, `xargs`, `exec`, `sudo`, `sh -c`, …),
  shell keywords, and program paths (`/bin/rm`, `./script`).

Keys, for the commands that get one:
- `bash:<program> <subcommand>` (any arguments) for tools with subcommands (git, npm, cargo, …),
  except where the subcommand runs arbitrary code (`npm run`, `npm exec`, `cargo run`, …) or an
  option known to write files or run programs is present (`git diff --output`, `git -c`): exact;
- `bash:<program>` (any arguments) for a short list of read-only programs, unless one of their
  writing/executing options is present (`find -delete`/`-exec`, `sort -o`): exact;
- `bash-exact:<argument list>` for everything else: only that exact command again.
"""

from __future__ import annotations

import re
import shlex

ANY_ARGS = "bash"  # key family: the program (and subcommand) with any arguments
EXACT = "bash-exact"  # key family: exactly this argument list

_NAME = re.compile(r"^[a-z][a-z0-9_.+-]*$")
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9_-]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_FD = re.compile(r"^[0-9]*$")
# Unquoted characters whose meaning the matcher does not model: expansions, globs, braces,
# subshells, history, comments. Any of them (unquoted) and the command always asks.
_UNQUOTED_SPECIAL = frozenset("$`*?[]{}()!#~")

# Programs that run another command taken from their arguments, and shell keywords.
# fmt: off
_RUNS_ITS_ARGUMENTS = frozenset((
    "eval", "exec", "source", ".", "sudo", "doas", "su", "env", "xargs", "nohup", "time",
    "timeout", "nice", "ionice", "command", "builtin", "sh", "bash", "zsh", "dash", "ksh", "fish",
    "busybox", "watch", "script", "strace", "chroot", "setsid", "stdbuf", "unbuffer", "parallel",
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "function", "select", "coproc", "[[", "]]", "alias", "trap", "export", "declare", "local",
    "typeset", "readonly", "set", "shopt", "enable", "hash", "npx", "pnpx", "bunx", "uvx",
))
# fmt: on

# Tools with subcommands: "always" covers the subcommand with any arguments...
_SUBCOMMAND_TOOLS = frozenset(
    ("git", "npm", "pnpm", "yarn", "cargo", "go", "pip", "pip3", "uv", "poetry", "docker")
)
# ...except subcommands that run code named by their arguments, and options before the
# subcommand (`git -c`, `git --config-env`, `git -C dir`): those are remembered exactly.
_RUNS_CODE = {
    "npm": {"run", "run-script", "exec", "x", "explore", "rebuild"},
    "pnpm": {"run", "exec", "dlx", "x"},
    "yarn": {"run", "exec", "dlx", "node"},
    "cargo": {"run", "install", "script"},
    "go": {"run", "generate", "tool"},
    "uv": {"run", "tool"},
    "poetry": {"run"},
    "docker": {"run", "exec", "compose", "build", "buildx", "container", "start"},
    "git": {"submodule", "filter-branch", "bisect", "difftool", "mergetool", "daemon", "shell"},
}
# Options (as a prefix of a word) that make a subcommand write files or run a program.
_SUBCOMMAND_DANGEROUS = {
    "git": (
        "--output", "-o", "--exec", "-x", "--upload-pack", "-u", "--receive-pack",
        "--open-files-in-pager", "-O", "--ext-diff", "--textconv", "--config-env", "-c",
        "--template", "--separate-git-dir", "--git-dir", "--work-tree", "--exec-path",
    ),
    "cargo": ("--config", "-Z"),
    "npm": ("--script-shell", "--userconfig", "--globalconfig", "--prefix"),
}  # fmt: skip

# Read-only programs: "always" covers any arguments, unless one of these options is present:
# (single letters forbidden in a `-abc` cluster, long options forbidden as a prefix).
_READ_ONLY: dict[str, tuple[str, tuple[str, ...]]] = {
    "ls": ("", ()),
    "cat": ("", ()),
    "head": ("", ()),
    "tail": ("", ()),
    "wc": ("", ()),
    "grep": ("", ()),
    "pwd": ("", ()),
    "echo": ("", ()),
    "stat": ("", ()),
    "du": ("", ()),
    "diff": ("", ()),
    "which": ("", ()),
    "sort": ("o", ("--output", "--compress-program")),
    # find's actions take one dash: matched as whole-word prefixes by _find_is_read_only.
    "find": ("", ()),
}
_FIND_ACTIONS = ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls")


def command_keys(command: str) -> list[str]:
    """The keys that must all be remembered for `command` to run unasked; [] when it never may."""
    segments = None if "\x00" in command else _parse(command)
    if not segments:
        return []
    keys: list[str] = []
    for words in segments:
        key = _segment_key(words)
        if key is None:
            return []
        keys.append(key)
    return list(dict.fromkeys(keys))


def describe_key(key: str) -> str:
    """A key in an option label: `` `git status` (any arguments)`` or ``exactly `ls -l` ``."""
    family, _, detail = key.partition(":")
    if family == ANY_ARGS:
        return f"`{detail}` (any arguments)"
    return f"exactly `{detail}`"


# ---------------------------------------------------------------------------------------------
# Parsing: words of each simple command, or None for anything not fully understood


def _parse(command: str) -> list[list[str]] | None:
    segments: list[list[str]] = []
    words: list[str] = []
    word: list[str] = []
    in_word = False  # a word has begun (possibly empty: '')
    quoted = False  # some of the current word was quoted or escaped
    pending_input = False  # the next word is the file of a `<` redirection
    i, n = 0, len(command)

    def end_word() -> bool:
        nonlocal word, in_word, quoted, pending_input
        if in_word:
            text = "".join(word)
            if pending_input:
                if not _plain_relative(text):
                    return False
                pending_input = False
            else:
                words.append(text)
        word, in_word, quoted = [], False, False
        return True

    def end_segment() -> bool:
        nonlocal words
        if not end_word() or pending_input:
            return False
        if not words:
            return False  # an empty command (`;;`, leading `|`): not something we model
        segments.append(words)
        words = []
        return True

    while i < n:
        c = command[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            if command[i + 1] != "\n":  # backslash-newline is a line continuation: removed
                word.append(command[i + 1])
                in_word = quoted = True
            i += 2
            continue
        if c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                return None
            word.append(command[i + 1 : end])
            in_word = quoted = True
            i = end + 1
            continue
        if c == '"':
            i += 1
            while True:
                if i >= n:
                    return None
                d = command[i]
                if d == '"':
                    break
                if d in "$`!":
                    return None  # expansion inside double quotes
                if d == "\\" and i + 1 < n and command[i + 1] in '"\\\n':
                    if command[i + 1] != "\n":
                        word.append(command[i + 1])
                    i += 2
                    continue
                word.append(d)
                i += 1
            in_word = quoted = True
            i += 1
            continue
        if c in " \t":
            if not end_word():
                return None
            i += 1
            continue
        if c in "\n;":
            if command.startswith(";;", i) or command.startswith(";&", i):
                return None  # case syntax
            if not end_segment():
                if c == "\n" and not words and not in_word and not pending_input:
                    i += 1  # blank line
                    continue
                return None
            i += 1
            continue
        if c == "|" or (c == "&" and not command.startswith("&>", i)):
            if not end_segment():
                return None
            i += 2 if command[i + 1 : i + 2] in ("|", "&") and command[i : i + 2] != "&|" else 1
            continue
        if c in "<>" or command.startswith("&>", i):
            # A redirection; digits just before it (unquoted, same word) name the fd.
            if in_word and (quoted or not _FD.match("".join(word))):
                return None  # `a>b` glued to a word: not modelled
            word, in_word, quoted = [], False, False
            if command.startswith("<(", i) or command.startswith(">(", i):
                return None  # process substitution
            m = re.match(r"[<>]&(?:[0-9]+|-)(?![^\s;&|<>])", command[i:])
            if m:  # fd duplication or closing: `2>&1`, `>&2`, `<&0`, `>&-`
                i += m.end()
                continue
            if c == "<" and command[i + 1 : i + 2] not in ("<", ">", "&"):
                if pending_input:
                    return None
                pending_input = True
                i += 1
                continue
            return None  # output to a file, here-doc, here-string, `<>`, `>&file`
        if c in _UNQUOTED_SPECIAL and (c != "#" or not in_word):
            return None
        # `NAME=value` before the program (or alone): the environment changes what runs.
        if c == "=" and not words and not quoted and _ASSIGNMENT.match("".join(word) + "="):
            return None
        word.append(c)
        in_word = True
        i += 1
    if not end_word() or pending_input:
        return None
    if words:
        segments.append(words)
    return segments


def _plain_relative(path: str) -> bool:
    """An input file the matcher can vouch for: relative and not climbing out of the cwd."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts[:-1]


# ---------------------------------------------------------------------------------------------
# Keys


def _segment_key(words: list[str]) -> str | None:
    program = words[0]
    if program in _RUNS_ITS_ARGUMENTS or not _NAME.match(program):
        return None  # `env`, `xargs`, `sh -c`, `/bin/rm`, `./script`, `FOO=1`: always ask
    args = words[1:]
    if program in _SUBCOMMAND_TOOLS:
        return _subcommand_key(program, args)
    rule = _READ_ONLY.get(program)
    if rule is not None and _read_only_args(program, rule, args):
        return f"{ANY_ARGS}:{program}"
    return _exact(words)


def _subcommand_key(program: str, args: list[str]) -> str:
    words = [program, *args]
    if not args or not _SUBCOMMAND.match(args[0]):
        return _exact(words)  # options before the subcommand (`git -c x=y status`)
    subcommand = args[0]
    if subcommand in _RUNS_CODE.get(program, ()):
        return _exact(words)
    dangerous = _SUBCOMMAND_DANGEROUS.get(program, ())
    for arg in args[1:]:
        if arg == "--":
            break
        if any(_is_option(arg, d) for d in dangerous):
            return _exact(words)
    return f"{ANY_ARGS}:{program} {subcommand}"


def _is_option(arg: str, option: str) -> bool:
    """Whether `arg` can be `option`: `-o`, `-ofile` or `-xo` for a short one; for a long one,
    `--output`, `--output=x` or any abbreviation (`--out=x`: getopt and git accept those)."""
    if option.startswith("--"):
        name = arg.split("=", 1)[0]
        return arg.startswith("--") and len(name) > 2 and option.startswith(name)
    return arg.startswith("-") and not arg.startswith("--") and option[1] in arg[1:]


def _read_only_args(program: str, rule: tuple[str, tuple[str, ...]], args: list[str]) -> bool:
    if program == "find":
        return not any(arg.startswith(_FIND_ACTIONS) for arg in args)
    letters, long_options = rule
    options = (*long_options, *(f"-{letter}" for letter in letters))
    for arg in args:
        if arg == "--":
            break
        if any(_is_option(arg, option) for option in options):
            return False
    return True


def _exact(words: list[str]) -> str:
    return f"{EXACT}:{shlex.join(words)}"
