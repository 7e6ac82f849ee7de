"""Whether a shell command discards work that neither git nor /undo can bring back: auto mode
asks before such a command even though the sandbox would run it (agent.permissions.policy), and
its title says so in every mode.

Recognised: `git checkout` of paths (`-- x`, `.`, an existing file, `-f`, `-p`, `--ours`, …),
`git restore` without `--staged` (or with `--worktree`), `git reset --hard`/`--merge`, `git
clean` without `-n`, `git stash drop`/`clear`/`pop`, `git branch -D`/`-M`/`-C`/`-f`, `git switch
--discard-changes`/`-f`/`-C`, `git push --force`/`--force-with-lease`/`--delete`/`--mirror`/
`--prune`/`+ref`/`:ref`, `git rm -f`, `git mv -f`, `--abort` of a merge, rebase, cherry-pick,
revert or am, `git reflog expire`/`delete`, `git gc --prune`, `git worktree remove -f`, `git
submodule deinit`/`update -f`, the plumbing that overwrites (`checkout-index -f`, `read-tree
-u`, `update-ref`, `prune`, `filter-branch`); a git subcommand that is not one of git's own (an
alias or an add-on may be any of these) "may" discard work. Also `rm -r`, `find -delete`, `rm`
run by `xargs`, `parallel` or `find -exec` (many files at once), `shred`, `rsync --delete`.

Wherever they stand: in a list, pipeline, subshell, function body or `$(…)`; behind `cd`, `git
-C`, `git -c`, quotes and escapes (`'rm' -\\rf`, `$'\\x72m'`), a program path (`/bin/rm`);
behind a program that runs its arguments (`env`, `xargs`, `timeout`, `sudo`, `nohup`, …); in a
string or here-doc a shell may run (`sh -c '…'`, `eval "…"`, `… | sh`, `bash <<EOF`); after `find
-exec`, `git submodule foreach`, `git rebase --exec`, `git bisect run`.

Not recognised: a program that deletes by its own code (a script, `python -c`, `make clean`) or
whose name the shell computes (`$cmd`, a glob, a brace expansion): this is a net for mistakes,
not a wall against a command written to get by it. Inside the sandbox such a command can still
change only the workspace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

DISCARDS = "discards work"
MAY_DISCARD = "may discard work"

UNKNOWN = "\x00"  # in a word: what the shell computes there (`$x`, `$(…)`, `` `…` ``)
_DEEPEST = 6  # strings inside strings inside …: deeper than this, assume the worst
_MOST_CHECKS = 64  # programs checked in one command; beyond, assume the worst
_MOST_DIRECTORIES = 16  # places the `cd`s of one command may lead; beyond, unknown

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_]+|[@*#?$!-]")
_EXPANDS = re.compile(r"[({A-Za-z0-9_@*#?$!-]")  # what after a `$` makes it an expansion
_PLAIN = re.compile(r"[^\\'\"$`\s;&|()<>]+")
_REDIRECTION = re.compile(r"&?[<>]+[&|-]?")
_FD = re.compile(r"[0-9]+|-")
_HEREDOC_WORD = re.compile(r"""(?:[^\s;&|<>()'"\\]|\\.|'[^']*'|"[^"]*")+""")
_ANSI_ESCAPE = re.compile(
    r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
_ANSI_NAMED = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
               "r": "\r", "t": "\t", "v": "\v"}  # fmt: skip
# Reserved words that may stand before a command; skipped to find the program.
_KEYWORDS = frozenset(
    ("if", "then", "else", "elif", "fi", "do", "done", "while", "until", "esac", "!", "{", "}")
)
# fmt: off
# Programs that run a command taken from their arguments (or stdin): every later word may be
# where that command starts, and every string or here-doc of the command may be a script.
_RUNNERS = frozenset((
    "eval", "exec", "source", ".", "sudo", "doas", "su", "runuser", "sg", "env", "xargs",
    "parallel", "nohup", "time", "timeout", "nice", "ionice", "chrt", "taskset", "prlimit",
    "command", "builtin", "sh", "bash", "zsh", "dash", "ksh", "mksh", "yash", "fish",
    "busybox", "watch", "script", "strace", "ltrace", "chroot", "setsid", "stdbuf", "unbuffer",
    "flock", "nsenter", "unshare", "firejail", "bwrap", "systemd-run", "fakeroot", "proot",
    "alias", "trap", "coproc", "function", "select", "for", "case",
))
# fmt: on
# Runners that hand their command many file names at once: `xargs rm` deletes a list.
_MANY = frozenset(("xargs", "parallel"))
_FIND_RUNS = frozenset(("-exec", "-execdir", "-ok", "-okdir"))
# git's own commands: an alias cannot shadow one of them, so any other name may be an alias
# (`git co .`, `-c alias.x='!rm -rf .'`, help.autocorrect) or an add-on (`git-foo` on PATH).
_GIT_COMMAND_NAMES = """
    add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr
    check-ignore check-mailmap check-ref-format checkout checkout-index cherry cherry-pick
    citool clean clone column commit commit-graph commit-tree config count-objects credential
    credential-cache credential-store describe diagnose diff diff-files diff-index diff-tree
    difftool fast-export fast-import fetch fetch-pack filter-branch fmt-merge-msg for-each-ref
    for-each-repo format-patch fsck fsck-objects gc get-tar-commit-id grep gui hash-object help
    hook http-backend index-pack init init-db instaweb interpret-trailers log ls-files
    ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base merge-file merge-index
    merge-tree mergetool mktag mktree multi-pack-index mv name-rev notes pack-objects
    pack-redundant pack-refs patch-id prune prune-packed pull push range-diff read-tree rebase
    receive-pack reflog refs remote repack replace replay request-pull rerere reset restore
    rev-list rev-parse revert rm send-pack shortlog show show-branch show-index show-ref
    sparse-checkout stage stash status stripspace submodule switch symbolic-ref tag
    unpack-file unpack-objects update-index update-ref update-server-info upload-archive
    upload-pack var verify-commit verify-pack verify-tag version whatchanged worktree
    write-tree
"""
_GIT_COMMANDS = frozenset(_GIT_COMMAND_NAMES.split())
# git's options before the subcommand that take the next word as their value.
_GIT_VALUED = frozenset(
    ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--attr-source")
)
_GLOB = frozenset("*?[")


def command_discards(command: str, cwd: Path | None = None) -> str | None:
    """`DISCARDS`, `MAY_DISCARD` or None for `command` run by bash in `cwd` (None: unknown,
    so `git checkout x` may name a file)."""
    try:
        return _Scan().command(command, [cwd] if cwd is not None else None, 0)
    except _TooMuch:
        return MAY_DISCARD


# ---------------------------------------------------------------------------------------------
# Reading a command as the shell would, leniently: nothing is refused, unknown parts are UNKNOWN


@dataclass
class _Lexed:
    commands: list[list[str]] = field(default_factory=list)  # each simple command's words
    strings: list[str] = field(default_factory=list)  # quoted words, here-docs: maybe scripts
    nested: list[str] = field(default_factory=list)  # `$(…)`, backticks, `<(…)`: commands


def _lex(text: str) -> _Lexed:
    out = _Lexed()
    words: list[str] = []
    word: list[str] = []
    in_word = False
    quoted = False  # some of the word was quoted: as a whole, it may be a script
    target = False  # the next word is a redirection's target, not an argument
    heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, expanded) this line
    i, n = 0, len(text)

    def end_word() -> None:
        nonlocal word, in_word, quoted, target
        if in_word:
            done = "".join(word)
            if target or quoted:
                out.strings.append(done)  # `sh -c 'rm -rf x'`, `bash <<< 'rm -rf x'`
            if not target:
                words.append(done)
            target = False
        word, in_word, quoted = [], False, False

    def end_command() -> None:
        nonlocal words
        end_word()
        if words:
            out.commands.append(words)
        words = []

    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 < n and text[i + 1] != "\n":
                word.append(text[i + 1])
                in_word = quoted = True
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            word.append(text[i + 1 : end])
            in_word = quoted = True
            i = end + 1
        elif text.startswith("$'", i):
            end = _ansi_end(text, i + 2)
            decoded = _ansi_decode(text[i + 2 : end])
            word.append(decoded)
            in_word = quoted = True
            i = end + 1
        elif c == '"' or text.startswith('$"', i):
            i = _expand_until(text, i + (1 if c == '"' else 2), '"', word, out)
            in_word = quoted = True
        elif c == "`" or (c == "$" and i + 1 < n and _EXPANDS.match(text, i + 1)):
            i = _expansion(text, i, word, out)
            in_word = True
        elif c in " \t":
            end_word()
            i += 1
        elif c == "#" and not in_word:
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "\n":
            end_command()
            i = _heredoc_bodies(text, i + 1, heredocs, out)
            heredocs = []
        elif c in "<>" or text.startswith("&>", i):
            if in_word and "".join(word).isdigit():
                word, in_word = [], False  # `2>`: the fd, not a word
            end_word()
            if text.startswith(("<(", ">("), i):
                i = _balanced(text, i + 2, out)
                words.append(UNKNOWN)  # the /dev/fd path it becomes
                continue
            op = _REDIRECTION.match(text, i)
            assert op is not None
            i = op.end()
            if op.group().endswith("&") and (fd := _FD.match(text, i)):
                i = fd.end()  # `2>&1`, `>&-`: no target word
            elif op.group() in ("<<", "<<-"):
                i = _heredoc_word(text, i, op.group() == "<<-", heredocs)
            else:
                target = True
        elif c in ";&|()":
            end_command()
            i += 1
        else:
            plain = _PLAIN.match(text, i)  # a run of ordinary characters at once
            end = plain.end() if plain else i + 1
            word.append(text[i:end])
            in_word = True
            i = end
    end_command()
    _heredoc_bodies(text, n, heredocs, out)
    return out


def _expansion(text: str, i: int, word: list[str], out: _Lexed) -> int:
    """`$name`, `${…}`, `$(…)`, `$((…))` or `` `…` `` at `i`: UNKNOWN in the word; commands
    inside go to `out.nested`. Returns where it ends."""
    word.append(UNKNOWN)
    if text[i] == "`":
        end = i + 1
        while end < len(text) and text[end] != "`":
            end += 2 if text[end] == "\\" else 1
        out.nested.append(text[i + 1 : end].replace("\\`", "`"))
        return end + 1
    if text.startswith("$(", i):
        return _balanced(text, i + 2, out)
    if text.startswith("${", i):
        end = text.find("}", i)
        end = len(text) if end < 0 else end
        out.nested.append(text[i + 2 : end])  # `${x:-$(rm -rf y)}`: what it may run
        return end + 1
    name = _NAME_CHARS.match(text, i + 1)
    return name.end() if name else i + 1


def _balanced(text: str, i: int, out: _Lexed) -> int:
    """The command from `i` to its closing parenthesis (quotes skipped) goes to `out.nested`;
    returns the index after that parenthesis."""
    depth, j, n = 1, i, len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            end = text.find("'", j + 1)
            j = n if end < 0 else end + 1
            continue
        if c == '"':
            j = _expand_until(text, j + 1, '"', [], _Lexed())
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                break
        j += 1
    out.nested.append(text[i:j])
    return j + 1


def _expand_until(text: str, i: int, close: str, word: list[str], out: _Lexed) -> int:
    """A double-quoted string (or an expanded here-doc) from `i`: its text into `word`, its
    expansions as UNKNOWN. Returns the index after `close` (the end when there is none)."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == close:
            return i + 1
        if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                word.append(text[i + 1])
            i += 2
        elif c == "`" or (c == "$" and i + 1 < n and _EXPANDS.match(text, i + 1)):
            i = _expansion(text, i, word, out)
        else:
            word.append(c)
            i += 1
    return n


def _ansi_end(text: str, i: int) -> int:
    while i < len(text) and text[i] != "'":
        i += 2 if text[i] == "\\" else 1
    return min(i, len(text))


def _ansi_decode(body: str) -> str:
    """`$'\\x72m'` is `rm`, as bash decodes it."""

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code[0] in "xuU":
            return chr(min(int(code[1:], 16), 0x10FFFF))
        if code[0] in "01234567":
            return chr(int(code, 8) & 0xFF)
        if code[0] == "c":
            return chr(ord(code[1]) & 0x1F)
        return _ANSI_NAMED.get(code, code)

    return _ANSI_ESCAPE.sub(one, body)


def _heredoc_word(text: str, i: int, strip: bool, heredocs: list[tuple[str, bool, bool]]) -> int:
    """The delimiter word of `<<`/`<<-`: quoted anywhere, the body is not expanded."""
    while i < len(text) and text[i] in " \t":
        i += 1
    m = _HEREDOC_WORD.match(text, i)
    raw = m.group() if m else ""
    delimiter = re.sub(r"""\\(.)|['"]""", r"\1", raw)
    heredocs.append((delimiter, strip, not any(q in raw for q in "'\"\\")))
    return i + len(raw)


def _heredoc_bodies(text: str, i: int, heredocs: list[tuple[str, bool, bool]], out: _Lexed) -> int:
    """The bodies of this line's here-docs, from `i`, are strings (a shell may read them); an
    unquoted one's `$(…)` runs as it is read. Returns where the next line starts."""
    for delimiter, strip, expanded in heredocs:
        lines: list[str] = []
        while i < len(text):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            line = text[i:end]
            i = end + 1
            if (line.lstrip("\t") if strip else line) == delimiter:
                break
            lines.append(line)
        body = "\n".join(lines)
        if expanded:
            _expand_until(body, 0, "", [], out)  # only its substitutions matter here
        out.strings.append(body)
    return min(i, len(text))


# ---------------------------------------------------------------------------------------------
# What each command does

Verdict = str | None


def _worst(verdicts: Iterable[Verdict]) -> Verdict:
    found = None
    for verdict in verdicts:
        if verdict == DISCARDS:
            return DISCARDS
        found = found or verdict
    return found


class _TooMuch(Exception):
    """More programs to check than one command may cost: assume the worst."""


class _Scan:
    """One command's scan; it counts the programs checked, so no command costs without bound."""

    def __init__(self) -> None:
        self.checks = 0

    def command(self, text: str, cwds: list[Path] | None, depth: int) -> Verdict:
        if depth > _DEEPEST:
            return MAY_DISCARD
        lexed = _lex(text)
        found = _worst(self.command(sub, None, depth + 1) for sub in lexed.nested)
        commands = [words for words in map(_command_words, lexed.commands) if words]
        # A runner anywhere (`… | sh`, `sh -c '…'`, `xargs`): any word may start a command,
        # and any string may be a script.
        runner = any(_program(words[0]) in _RUNNERS for words in commands)
        for words in commands:
            if _program(words[0]) in ("cd", "pushd", "popd"):
                cwds = _moved(cwds, words)
                continue
            if runner:
                found = _worst((found, self.anywhere(words, cwds, depth)))
            else:
                found = _worst((found, self.one(words, cwds, depth, many=False)))
            if found == DISCARDS:
                return found
        if runner:
            # `alias x='rm -rf'`, `-c core.pager='…'`: the value of an assignment too
            scripts = [_ASSIGNMENT.sub("", s) for s in lexed.strings]
            found = _worst((found, *(self.command(s, None, depth + 1) for s in scripts)))
        return found

    def anywhere(
        self, words: list[str], cwds: list[Path] | None, depth: int, many: bool = False
    ) -> Verdict:
        """A command may start at any word (`timeout 5 git clean -fd`, `xargs -0 rm`)."""
        found: Verdict = None
        for start, word in enumerate(words):
            many = many or _program(word) in _MANY
            if _program(word) in _CHECKS:
                found = _worst((found, self.one(words[start:], cwds, depth, many)))
                if found == DISCARDS:
                    return found
        return found

    def one(self, words: list[str], cwds: list[Path] | None, depth: int, many: bool) -> Verdict:
        """A simple command whose program is `words[0]`."""
        check = _CHECKS.get(_program(words[0]))
        if check is None:
            return None
        self.checks += 1
        if self.checks > _MOST_CHECKS:
            raise _TooMuch
        return check(self, words[1:], cwds, depth, many)


def _command_words(words: list[str]) -> list[str]:
    """The words from the program on: reserved words and `NAME=value` before it skipped."""
    i = 0
    while i < len(words) and (words[i] in _KEYWORDS or _ASSIGNMENT.match(words[i])):
        i += 1
    return words[i:]


def _program(word: str) -> str:
    """`/usr/bin/rm` and `RM` (on a case-insensitive disk) are `rm`."""
    return word.rsplit("/", 1)[-1].lower()


def _moved(cwds: list[Path] | None, words: list[str]) -> list[Path] | None:
    """Where the shell may be after `cd X` (or before it: `cd` may fail)."""
    if cwds is None or words[0] == "popd" or len(words) != 2 or words[1].startswith("-"):
        return None
    if UNKNOWN in words[1] or words[1].startswith("~"):
        return None
    moved = list(dict.fromkeys([*cwds, *(Path(os.path.normpath(c / words[1])) for c in cwds)]))
    return moved if len(moved) <= _MOST_DIRECTORIES else None


# ------------------------------------------------------------------------- options and operands


def _has(args: list[str], letters: str = "", longs: tuple[str, ...] = ()) -> bool:
    """An option among `args` (before `--`): one of `letters` in a `-abc` cluster, or one of
    `longs` as written, with `=value`, or abbreviated (`--har`: git and getopt accept it)."""
    for arg in args:
        if arg == "--":
            return False
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if len(name) > 2 and any(long.startswith(name) for long in longs):
                return True
        elif arg.startswith("-") and any(letter in arg[1:] for letter in letters):
            return True
    return False


def _operands(args: list[str], valued: str = "", valued_longs: tuple[str, ...] = ()) -> list[str]:
    """The words that are not options, the values of `valued` options left out."""
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            return operands + args[i:]
        if arg.startswith("--"):
            i += 1 if arg in valued_longs else 0
        elif arg.startswith("-") and len(arg) > 1:
            i += 1 if arg[-1] in valued and not set(arg[1:-1]) & set(valued) else 0
        else:
            operands.append(arg)
    return operands


# ------------------------------------------------------------------------------------ programs

Check = Callable[[_Scan, list[str], list[Path] | None, int, bool], Verdict]
GitRule = Callable[[_Scan, list[str], list[Path] | None, int], Verdict]


def _rm(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int, many: bool) -> Verdict:
    return DISCARDS if many or _has(args, "rR", ("--recursive",)) else None


def _find(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int, many: bool) -> Verdict:
    if "-delete" in args:
        return DISCARDS
    found: Verdict = None
    for i, arg in enumerate(args):
        if arg in _FIND_RUNS:  # `-exec rm {} +`: the command up to `;` or `+`, on many files
            runs = args[i + 1 :]
            end = next((j for j, w in enumerate(runs) if w in (";", "+")), len(runs))
            found = _worst((found, scan.anywhere(runs[:end], None, depth + 1, many=True)))
            if any(_program(w) in _RUNNERS for w in runs[:end]):  # `-exec sh -c '…' {} +`
                found = _worst((found, *(scan.command(w, None, depth + 1) for w in runs[:end])))
    return found


def _always(
    scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int, many: bool
) -> Verdict:
    return DISCARDS


def _rsync(
    scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int, many: bool
) -> Verdict:
    if any(a.startswith(("--del", "--remove-source")) for a in args):
        return DISCARDS  # `--delete-after`, `--del`, `--remove-source-files`, …
    return None


def _git(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int, many: bool) -> Verdict:
    found: Verdict = None
    i = 0
    while i < len(args) and args[i].startswith("-"):
        option, eq, glued = args[i].partition("=")
        value = glued if eq else (args[i + 1] if i + 1 < len(args) else "")
        if option == "-C":
            moved = cwds and UNKNOWN not in value and not value.startswith("~")
            cwds = [Path(os.path.normpath(c / value)) for c in cwds] if moved and cwds else None
        elif option in ("--git-dir", "--work-tree"):
            cwds = None
        elif option == "-c":  # `-c core.pager='rm -rf .'`, `-c alias.x='!…'`: run by sh
            script = value.partition("=")[2].lstrip("!")
            found = _worst((found, scan.command(script, None, depth + 1)))
        elif option == "--config-env":
            found = _worst((found, MAY_DISCARD))  # a setting taken from the environment
        i += 1 if eq or option not in _GIT_VALUED else 2
    if i >= len(args):
        return found
    subcommand, rest = args[i], args[i + 1 :]
    if UNKNOWN in subcommand:
        return found  # a computed name: not recognised (see the module's docstring)
    if subcommand not in _GIT_COMMANDS:
        return _worst((found, MAY_DISCARD))  # an alias or an add-on may be anything
    rule = _GIT_RULES.get(subcommand)
    return _worst((found, rule(scan, rest, cwds, depth))) if rule else found


def _git_checkout(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    """Switching branches keeps local changes (git refuses otherwise); checking out paths
    overwrites them. `git checkout x` is a path when `x` exists (or that cannot be told)."""
    if "--" in args or _has(
        args,
        "fpmB",
        ("--force", "--patch", "--ours", "--theirs", "--merge", "--conflict",
         "--pathspec-from-file", "--no-overlay", "--overlay"),
    ):  # fmt: skip
        return DISCARDS
    operands = _operands(args, "", ("--orphan",))
    if _has(args, "b", ("--orphan",)):  # `-b new [start]`: the start is a commit
        return DISCARDS if len(operands) > 2 else None
    if len(operands) > 1:
        return DISCARDS  # `git checkout main a.txt`
    if not operands or operands[0] == "-":
        return None
    return _maybe_path(operands[0], cwds)


def _maybe_path(word: str, cwds: list[Path] | None) -> Verdict:
    if word in (".", "..") or word.startswith(":") or _GLOB & set(word):
        return DISCARDS  # the folder, pathspec magic, a glob: paths
    if UNKNOWN in word or cwds is None:
        return MAY_DISCARD
    return DISCARDS if any(os.path.lexists(c / word) for c in cwds) else None


def _git_restore(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    staged_only = _has(args, "S", ("--staged",)) and not _has(args, "W", ("--worktree",))
    return None if staged_only else DISCARDS


def _git_clean(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    return None if _has(args, "n", ("--dry-run",)) else DISCARDS


def _git_options(letters: str, longs: tuple[str, ...]) -> GitRule:
    """Discards work when one of these options is given."""

    def rule(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
        return DISCARDS if _has(args, letters, longs) else None

    return rule


def _git_subcommands(*discarding: str, runs: str = "") -> GitRule:
    """`git stash drop`: the first operand says what happens; after `runs`, the words are a
    shell command (`git submodule foreach …`, `git bisect run …`)."""

    def rule(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
        operands = [a for a in args if not a.startswith("-")]
        if not operands:
            return None
        if operands[0] in discarding:
            return DISCARDS
        if operands[0] == runs:
            return scan.command(" ".join(args[args.index(runs) + 1 :]), None, depth + 1)
        return None

    return rule


def _git_push(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    longs = ("--force", "--force-with-lease", "--force-if-includes", "--delete", "--mirror",
             "--prune")  # fmt: skip
    if _has(args, "fd", longs):
        return DISCARDS
    valued = ("--repo", "--receive-pack", "--exec", "--push-option")
    refspecs = _operands(args, "o", valued)[1:]
    return DISCARDS if any(r.startswith(("+", ":")) for r in refspecs) else None


def _git_rm(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    forced = _has(args, "f", ("--force",)) and not _has(args, "", ("--cached",))
    return DISCARDS if forced else None


def _git_worktree(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    removes = [a for a in args if not a.startswith("-")][:1] == ["remove"]
    return DISCARDS if removes and _has(args, "f", ("--force",)) else None


def _git_rebase(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    if _has(args, "", ("--abort",)):
        return DISCARDS
    commands = []  # `-x CMD`, `-xCMD`, `--exec CMD`, `--exec=CMD`: run by sh after each pick
    for i, arg in enumerate(args):
        if arg in ("-x", "--exec"):
            commands.append(args[i + 1] if i + 1 < len(args) else "")
        elif arg.startswith("--exec="):
            commands.append(arg.partition("=")[2])
        elif arg.startswith("-x"):
            commands.append(arg[2:])
    return _worst(scan.command(command, None, depth + 1) for command in commands)


def _git_submodule(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    operands = [a for a in args if not a.startswith("-")]
    if operands[:1] == ["update"] and _has(args, "f", ("--force",)):
        return DISCARDS
    return _git_subcommands("deinit", runs="foreach")(scan, args, cwds, depth)


def _git_always(scan: _Scan, args: list[str], cwds: list[Path] | None, depth: int) -> Verdict:
    return DISCARDS


_ABORT = _git_options("", ("--abort",))
_GIT_RULES: dict[str, GitRule] = {
    "checkout": _git_checkout,
    "restore": _git_restore,
    "switch": _git_options("fC", ("--force", "--discard-changes", "--force-create")),
    "reset": _git_options("", ("--hard", "--merge")),
    "clean": _git_clean,
    "stash": _git_subcommands("drop", "clear", "pop"),
    "branch": _git_options("DMCf", ("--force",)),
    "push": _git_push,
    "rm": _git_rm,
    "mv": _git_options("f", ("--force",)),
    "checkout-index": _git_options("f", ("--force",)),
    "read-tree": _git_options("u", ("--reset",)),
    "update-ref": _git_always,
    "prune": _git_always,
    "filter-branch": _git_always,
    "reflog": _git_subcommands("expire", "delete", "drop"),
    "gc": _git_options("", ("--prune",)),
    "worktree": _git_worktree,
    "submodule": _git_submodule,
    "bisect": _git_subcommands(runs="run"),
    "rebase": _git_rebase,
    "merge": _ABORT,
    "cherry-pick": _ABORT,
    "revert": _ABORT,
    "am": _ABORT,
}

_CHECKS: dict[str, Check] = {
    "rm": _rm,
    "git": _git,
    "find": _find,
    "shred": _always,
    "rsync": _rsync,
}
