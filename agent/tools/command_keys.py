"""What "always allow" remembers for a shell command, so that it covers exactly what was approved.

A command is split into simple commands (joined by `;`, `&&`, `||`, `|`, `&` or newlines), each
of which needs its own remembered key. A simple command gets a key only when the matcher
understands all of it; anything else has no key, so it always asks:

- output redirection (`>`, `>>`, `>|`, `&>`, `2>file`, `<>`), here-docs and here-strings;
  only fd duplication (`2>&1`, `>&2`) and `< file` from a relative path inside the cwd pass;
- `NAME=value` prefixes (`GIT_CONFIG_*`, `LD_PRELOAD`, …) and bare assignments;
- expansions: `$…`, backticks, `$(…)`, `<(…)`, globs, braces, `~`, comments, `!`, subshells;
- programs that run their arguments as a command (`env`, `xargs`, `exec`, `sudo`, `sh -c`, …),
  shell keywords, program paths (`/bin/rm`, `./script`), and a `cd` whose target is unknown.

Keys, for the commands that get one:
- `bash:<program> <subcommand>` for tools with subcommands (git, npm, cargo, …): the subcommand
  with options from its list of known-safe ones (`git status -s`); any other option (one that
  may write files or run programs: `git diff --output`, `go test -exec`, `cargo
  --target-dir`, an abbreviation like `--out`) makes the key exact. Some subcommands key on
  their own subcommand too (`uv pip list` is not `uv pip install`), or only on a read
  (`git config --get`, `git restore --staged`). Subcommands that run code named by their
  arguments (`npm run`, `cargo run`), discard work (`git checkout`, `git clean`, `git stash
  drop`, `git push +ref`) or write configuration (`git config x y`, `npm config set`, `go env
  -w`) are exact;
- `bash:<program>` for a short list of read-only programs, unless one of their writing or
  executing options is present (`find -delete`/`-exec`, `sort -o`): exact;
- `bash-exact:<argument list>` for everything else: only that exact command again.

With the workspace known (`cwd`, `roots`), a keyed command with an argument (or an option's
value) that leads outside the workspace, as written or through a symlink, is exact too: "always
allow `cat`" given for `cat README.md` does not cover `cat /home/me/.ssh/id_rsa`.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.files.workspace import inside, under

ANY_ARGS = "bash"  # key family: the program (and subcommand) with known-safe arguments
EXACT = "bash-exact"  # key family: exactly this argument list

_NAME = re.compile(r"^[a-z][a-z0-9_.+-]*$")
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9_-]*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_FD = re.compile(r"^[0-9]*$")
# Unquoted characters whose meaning the matcher does not model: expansions, globs, braces,
# subshells, history, comments. Any of them (unquoted) and the command always asks.
_UNQUOTED_SPECIAL = frozenset("$`*?[]{}()!#~")
# Words longer than these are not checked for where they lead: the command is exact. An option
# word (`-fFILE`) is checked from each of its letters on, so it gets a smaller bound.
_LONGEST_CHECKED_WORD = 4096
_LONGEST_CHECKED_OPTION = 256

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
_CHANGES_DIRECTORY = frozenset(("cd", "pushd", "popd"))
_MOST_DIRECTORIES = 16  # where the `cd`s of one command may lead: beyond, it always asks

# Tools with subcommands: "always" covers the subcommand with its known-safe options...
_SUBCOMMAND_TOOLS = frozenset(
    ("git", "npm", "pnpm", "yarn", "cargo", "go", "pip", "pip3", "uv", "poetry", "docker")
)
# ...except subcommands that run code named by their arguments, or that throw work away
# (uncommitted changes, stashes, branches, commits on a remote, containers): always exact.
_ALWAYS_EXACT = {
    "npm": {"run", "run-script", "exec", "x", "explore", "rebuild"},
    "pnpm": {"run", "exec", "dlx", "x"},
    "yarn": {"run", "exec", "dlx", "node"},
    "cargo": {"run", "install", "script"},
    "go": {"run", "generate", "tool"},
    "uv": {"run", "tool"},
    "poetry": {"run"},
    "docker": {"run", "exec", "compose", "build", "buildx", "container", "start", "rm", "rmi"},
    "git": {
        "submodule",
        "filter-branch",
        "filter-repo",
        "bisect",
        "difftool",
        "mergetool",
        "daemon",
        "shell",
        "checkout",
        "checkout-index",
        "clone",
        "clean",
        "read-tree",
        "prune",
        "update-ref",
        "sparse-checkout",
        "replace",
        "notes",
    },
}
# Subcommands whose next word is a subcommand of its own, keyed separately (`uv pip list` is not
# `uv pip install`); one not listed in _RULES is exact (`git stash drop`, `npm config set`).
_NESTED = {
    "git": {"stash", "remote", "config", "worktree", "reflog"},
    "npm": {"config", "cache"},
    "pnpm": {"config"},
    "yarn": {"config"},
    "pip": {"config", "cache"},
    "pip3": {"config", "cache"},
    "cargo": {"config"},
    "go": {"mod"},
    "uv": {"pip", "python", "cache"},
    "poetry": {"config", "env", "cache"},
    "docker": {"volume", "network", "image", "system", "context"},
}


@dataclass(frozen=True)
class _Rule:
    """The arguments a keyed subcommand may have. An option is known-safe when it is listed:
    `flags` take no value, `valued` take one (glued or the next word), `glued` an optional one
    (`--color=always`, `-uno`). Anything else, abbreviations included, makes the key exact."""

    flags: frozenset[str]
    valued: frozenset[str]
    glued: frozenset[str]
    positionals: bool  # non-option arguments (paths, refs, package names) are allowed
    requires: dict[str, str]  # one of these options must be present; it names the key
    numeric: bool  # `-5` (git log)
    # What the non-option arguments name, where a place elsewhere makes the key exact:
    # "remote" (the first: a remote, not a URL, `host:path` or path), "packages" (a package,
    # not a URL or VCS source), "npm" (the same, and not a `user/repo` shorthand).
    sources: str


def _rule(
    spec: str = "",
    *,
    positionals: bool = True,
    requires: dict[str, str] | None = None,
    numeric: bool = False,
    sources: str = "",
) -> _Rule:
    """`"-s --short -n= --color?"`: a flag, a flag, an option with a value, an optional one."""
    words = spec.split()
    return _Rule(
        flags=frozenset(w for w in words if w[-1] not in "=?"),
        valued=frozenset(w[:-1] for w in words if w.endswith("=")),
        glued=frozenset(w[:-1] for w in words if w.endswith("?")),
        positionals=positionals,
        requires=requires or {},
        numeric=numeric,
        sources=sources,
    )


_QUIET = "-q --quiet -v --verbose"
_GIT_DIFF = (
    "--cached --staged --stat? --shortstat --numstat --dirstat? --name-only --name-status "
    "--summary -p --patch -u -U= --unified= -s --no-patch --raw -z --color? --no-color "
    "--word-diff? --color-words? -w --ignore-all-space -b --ignore-space-change "
    "--ignore-blank-lines --check -R -M? --find-renames? --no-renames --no-index --exit-code "
    "--quiet --minimal --patience --histogram --diff-filter= --relative? --abbrev? --full-index "
    "--no-ext-diff --no-textconv --merge-base"
)
_GIT_LOG = (
    f"{_GIT_DIFF} --oneline --graph --all --decorate? --no-decorate -n= --max-count= --skip= "
    "--since= --after= --until= --before= --author= --committer= --grep= -i --format= "
    "--pretty? --abbrev-commit --follow --reverse --no-merges --merges --first-parent -S= -G= "
    "--date= --branches? --tags? --remotes? --source --left-right --cherry-pick --topo-order"
)
_GIT_BRANCH_LIST = (
    "-a --all -r --remotes -v -vv --verbose -l --list --show-current --contains? --no-contains? "
    "--merged? --no-merged? --sort= --format= --points-at= --column? --no-column --color? "
    "--no-color -q --quiet"
)
_CARGO_BUILD = (
    f"{_QUIET} -r --release --all-targets --all-features --no-default-features --features= -F= "
    "-p= --package= --workspace --all --exclude= --lib --bins --bin= --tests --test= --examples "
    "--example= --benches --bench= --locked --offline --frozen -j= --jobs= --no-run "
    "--no-fail-fast --doc --message-format= --color= --target= --keep-going --profile= --timings"
)
_GO_BUILD = "-v -race -cover -tags= -trimpath -mod= -p= -a -n -x -buildvcs="
_GO_TEST = (
    f"{_GO_BUILD} -run= -count= -short -timeout= -bench= -benchmem -benchtime= -failfast "
    "-json -list= -skip= -shuffle= -cpu= -parallel= -covermode= -coverpkg= -vet="
)
_PIP_INSTALL = (
    f"{_QUIET} -r= --requirement= -e= --editable= -U --upgrade --no-deps --pre --dry-run "
    "-c= --constraint= --no-cache-dir --upgrade-strategy= --only-binary= --no-binary= "
    "--require-hashes"
)
_NPM_INSTALL = (
    "-D --save-dev -S --save -E --save-exact --no-save -O --save-optional -P --save-prod "
    "--no-audit --no-fund --legacy-peer-deps --ignore-scripts --prefer-offline --frozen-lockfile "
    "--silent"
)

# (program, subcommand) -> its known-safe arguments; a subcommand not listed may have
# positional arguments but no option. Options that write files or run programs (`--output`,
# `-o`, `-exec`, `--target-dir`, `--manifest-path`, `--config`, `--prefix`, `-C`, `--global`, …)
# are in no list, on purpose.
_RULES: dict[tuple[str, str], _Rule] = {
    ("git", "status"): _rule(
        f"{_QUIET} -s --short -b --branch --porcelain? --long -u? --untracked-files? "
        "--ignored? -z --show-stash --ahead-behind --no-ahead-behind --column? --no-column"
    ),
    ("git", "diff"): _rule(_GIT_DIFF),
    ("git", "log"): _rule(_GIT_LOG, numeric=True),
    ("git", "show"): _rule(_GIT_LOG, numeric=True),
    ("git", "shortlog"): _rule("-s --summary -n --numbered -e --email --all --since= --until="),
    ("git", "add"): _rule(
        f"{_QUIET} -A --all -u --update -N --intent-to-add -n --dry-run -f --force --renormalize"
    ),
    ("git", "commit"): _rule(
        f"{_QUIET} -m= --message= -a --all --amend --no-edit -s --signoff --no-verify "
        "--allow-empty --allow-empty-message -F= --file= --author= --date= --fixup= --squash= "
        "-C= --reuse-message="
    ),
    ("git", "branch"): _rule(_GIT_BRANCH_LIST),
    ("git", "switch"): _rule(
        "-c= --create= -d --detach --guess --no-guess -t --track? --no-track -q --quiet "
        "--progress --no-progress"
    ),
    ("git", "restore"): _rule(
        "--staged -S -q --quiet", requires={"--staged": "--staged", "-S": "--staged"}
    ),
    ("git", "reset"): _rule("-q --quiet --mixed --soft -N --no-refresh --refresh"),
    ("git", "fetch"): _rule(
        f"{_QUIET} --all -p --prune --tags --no-tags --depth= --dry-run -n --progress "
        "--no-recurse-submodules",
        sources="remote",
    ),
    ("git", "pull"): _rule(
        f"{_QUIET} --rebase? --no-rebase --ff-only --ff --no-ff --no-edit --all --tags -p "
        "--prune --autostash --no-autostash",
        sources="remote",
    ),
    ("git", "push"): _rule(
        f"{_QUIET} -u --set-upstream --tags --follow-tags --dry-run -n --porcelain --progress",
        sources="remote",
    ),
    ("git", "ls-remote"): _rule("-h --heads -t --tags --refs -q --quiet", sources="remote"),
    ("git", "merge"): _rule(f"{_QUIET} --no-ff --ff-only --ff --no-edit -m= --squash --no-commit"),
    ("git", "tag"): _rule(
        "-l --list -n? --sort= --contains? --no-contains? --merged? --no-merged? --points-at= "
        "--format= -a --annotate -m= --message= --column? --no-column"
    ),
    ("git", "rev-parse"): _rule(
        "--show-toplevel --show-prefix --show-cdup --abbrev-ref? --short? --verify -q --quiet "
        "--git-dir --absolute-git-dir --is-inside-work-tree --is-bare-repository "
        "--symbolic-full-name"
    ),
    ("git", "ls-files"): _rule(
        "-m --modified -o --others -d --deleted -c --cached --exclude-standard -i --ignored "
        "-s --stage -z --full-name --error-unmatch -u --unmerged"
    ),
    ("git", "blame"): _rule("-L= -w -M? -C? -e -s --porcelain --line-porcelain -l -t --date="),
    ("git", "grep"): _rule(
        "-n --line-number -i --ignore-case -w --word-regexp -l --files-with-matches "
        "-L --files-without-match -c --count -e= -E --extended-regexp -F --fixed-strings "
        "-P --perl-regexp -v --invert-match -h -H --cached --untracked --no-index -I "
        "-A= -B= -C= --context= -q --quiet --break --heading -o --only-matching"
    ),
    ("git", "rm"): _rule(f"{_QUIET} --cached -r -n --dry-run"),
    ("git", "mv"): _rule("-v --verbose -n --dry-run -k"),
    ("git", "stash"): _rule(
        "-m= --message= -u --include-untracked -k --keep-index -q --quiet", positionals=False
    ),
    ("git", "stash push"): _rule("-m= --message= -u --include-untracked -k --keep-index -q"),
    ("git", "stash list"): _rule(_GIT_LOG, positionals=False),
    ("git", "stash show"): _rule(_GIT_DIFF),
    ("git", "remote"): _rule("-v --verbose", positionals=False),
    ("git", "remote show"): _rule("-n", sources="remote"),
    ("git", "remote get-url"): _rule("--push --all"),
    ("git", "worktree list"): _rule("--porcelain -v --verbose -z", positionals=False),
    ("git", "reflog"): _rule(_GIT_LOG, numeric=True),
    ("git", "reflog show"): _rule(_GIT_LOG, numeric=True),
    # Configuration is read only: any write (`git config core.pager x`, `--add`, `--unset`,
    # `--global`, `--file`) is exact.
    ("git", "config"): _rule(
        "--get --get-all --get-regexp -l --list --show-origin --show-scope --name-only -z "
        "--null --local --includes --no-includes --type= --bool --int --path --default=",
        requires={
            "--get": "--get",
            "--get-all": "--get",
            "--get-regexp": "--get",
            "--list": "--list",
            "-l": "--list",
        },
    ),
    ("git", "config get"): _rule("--all --regexp --show-origin --show-scope --local -z --null"),
    ("git", "config list"): _rule(
        "--show-origin --show-scope --name-only --local -z --null", positionals=False
    ),
    ("npm", "install"): _rule(_NPM_INSTALL, sources="npm"),
    ("npm", "i"): _rule(_NPM_INSTALL, sources="npm"),
    ("npm", "ci"): _rule(_NPM_INSTALL, sources="npm"),
    ("npm", "ls"): _rule("--depth= --all -a --json --long -l --prod --dev"),
    ("npm", "list"): _rule("--depth= --all -a --json --long -l --prod --dev"),
    ("npm", "outdated"): _rule("--json --long -l --all"),
    ("npm", "view"): _rule("--json"),
    ("npm", "config get"): _rule("--json"),
    ("npm", "config list"): _rule("--json -l --long", positionals=False),
    ("npm", "config ls"): _rule("--json -l --long", positionals=False),
    ("pnpm", "install"): _rule(_NPM_INSTALL, sources="npm"),
    ("yarn", "install"): _rule(_NPM_INSTALL, sources="npm"),
    ("cargo", "build"): _rule(_CARGO_BUILD),
    ("cargo", "check"): _rule(_CARGO_BUILD),
    ("cargo", "test"): _rule(_CARGO_BUILD),
    ("cargo", "bench"): _rule(_CARGO_BUILD),
    ("cargo", "clippy"): _rule(_CARGO_BUILD),
    ("cargo", "doc"): _rule(f"{_CARGO_BUILD} --no-deps --document-private-items"),
    ("cargo", "fmt"): _rule(f"{_QUIET} --all --check -p= --package="),
    ("cargo", "tree"): _rule(f"{_QUIET} -p= --package= -i= --invert= -e= --edges= --depth= -d"),
    ("cargo", "metadata"): _rule("--format-version= --no-deps --offline --locked"),
    ("cargo", "update"): _rule(f"{_QUIET} -p= --package= --precise= --dry-run -w --workspace"),
    ("cargo", "add"): _rule(
        f"{_QUIET} --dev --build -F= --features= --no-default-features", sources="packages"
    ),
    ("cargo", "remove"): _rule(f"{_QUIET} --dev --build"),
    ("cargo", "config get"): _rule("--format= --show-origin"),
    ("go", "build"): _rule(_GO_BUILD),
    ("go", "test"): _rule(_GO_TEST),
    ("go", "vet"): _rule("-v -tags= -json"),
    ("go", "list"): _rule("-m -json -f= -deps -test -u -e -tags="),
    ("go", "env"): _rule("-json"),  # `-w`, `-u` write configuration: exact
    ("go", "mod tidy"): _rule("-v -e -go= -compat=", positionals=False),
    ("go", "mod download"): _rule("-json -x"),
    ("go", "mod verify"): _rule("", positionals=False),
    ("go", "mod graph"): _rule("-go="),
    ("go", "mod why"): _rule("-m -vendor"),
    ("pip", "install"): _rule(_PIP_INSTALL, sources="packages"),
    ("pip", "list"): _rule(f"{_QUIET} -o --outdated --uptodate --format= --not-required -l"),
    ("pip", "show"): _rule(f"{_QUIET} -f --files"),
    ("pip", "freeze"): _rule("--all -l --local --exclude-editable"),
    ("pip", "config list"): _rule("", positionals=False),
    ("pip", "config get"): _rule(""),
    ("pip", "config debug"): _rule("", positionals=False),
    ("uv", "pip list"): _rule(f"{_QUIET} -o --outdated --format= -e --editable --exclude-editable"),
    ("uv", "pip freeze"): _rule(f"{_QUIET} --exclude-editable"),
    ("uv", "pip show"): _rule(f"{_QUIET} -f --files"),
    ("uv", "pip tree"): _rule(f"{_QUIET} -d= --depth="),
    ("uv", "pip check"): _rule(_QUIET),
    ("uv", "pip install"): _rule(_PIP_INSTALL, sources="packages"),
    ("uv", "python list"): _rule("--only-installed --all-versions"),
    ("uv", "python find"): _rule(""),
    ("uv", "sync"): _rule(
        f"{_QUIET} --frozen --locked --all-extras --extra= --dev --no-dev --group= "
        "--all-groups --no-install-project"
    ),
    ("uv", "lock"): _rule(f"{_QUIET} -U --upgrade --upgrade-package= --locked --check"),
    ("uv", "add"): _rule(f"{_QUIET} --dev --group= --optional=", sources="packages"),
    ("uv", "remove"): _rule(f"{_QUIET} --dev --group= --optional="),
    ("uv", "tree"): _rule(f"{_QUIET} -d= --depth= --outdated"),
    ("poetry", "install"): _rule(f"{_QUIET} --no-root --with= --without= --only= --sync"),
    ("poetry", "lock"): _rule(f"{_QUIET} --no-update --check"),
    ("poetry", "show"): _rule(f"{_QUIET} --tree --outdated --latest -l --only= --with="),
    ("poetry", "add"): _rule(f"{_QUIET} -G= --group= -D --dev", sources="packages"),
    ("poetry", "remove"): _rule(f"{_QUIET} -G= --group= -D --dev"),
    ("docker", "ps"): _rule(
        "-a --all -q --quiet --format= -n= --last= -l --latest --no-trunc -s --size --filter= -f="
    ),
    ("docker", "images"): _rule("-a --all -q --quiet --format= --filter= -f= --digests --no-trunc"),
    ("docker", "logs"): _rule(
        "-f --follow --tail= -n= -t --timestamps --since= --until= --details"
    ),
    ("docker", "volume ls"): _rule("-q --quiet --format= --filter= -f=", positionals=False),
    ("docker", "network ls"): _rule("-q --quiet --format= --filter= -f=", positionals=False),
    ("docker", "image ls"): _rule("-a --all -q --quiet --format= --filter= -f="),
}
_RULES[("pip3", "install")] = _RULES[("pip", "install")]
_BARE = _rule()  # a subcommand without a rule: positional arguments only
# git and cargo run aliases and `git-x`/`cargo-x` programs under any other name (`git co .` may
# be `git checkout .`; with help.autocorrect, `git chekcout .` is): for them only the
# subcommands named here or in _RULES get a key; any other name is exact.
_KNOWN_ONLY = {
    "git": {
        "init", "cherry-pick", "revert", "rebase", "am", "apply", "describe",
        "show-ref", "ls-remote", "ls-tree", "cat-file", "rev-list", "merge-base",
        "count-objects", "fsck", "version", "whatchanged", "range-diff", "cherry", "name-rev",
        "for-each-ref", "check-ignore", "check-attr", "format-patch", "archive", "worktree",
    },
    "cargo": {"clean", "new", "init", "search", "version", "verify-project", "package", "vendor"},
}  # fmt: skip
# Programs whose options are whole words with one dash (`-run`, `-coverprofile=x`): no clusters.
_GO_STYLE = frozenset(("go",))

# Read-only programs: "always" covers any arguments (inside the workspace), unless one of these
# options is present (single letters forbidden in a `-abc` cluster, long options forbidden as a
# prefix).
_READ_ONLY: dict[str, tuple[str, tuple[str, ...]]] = {
    "ls": ("", ()),
    "cat": ("", ()),
    "head": ("", ()),
    "tail": ("", ()),
    "wc": ("", ()),
    # -R follows every symlink while recursing: a link inside may lead out of the workspace.
    "grep": ("R", ("--dereference-recursive",)),
    "pwd": ("", ()),
    "echo": ("", ()),
    "stat": ("", ()),
    "du": ("", ()),
    "which": ("", ()),
    # --files0-from reads the names of the files to sort from a file: they are not checked.
    "sort": ("o", ("--output", "--compress-program", "--files0-from")),
    # find's actions take one dash: matched as whole-word prefixes by _find_is_read_only.
    "find": ("", ()),
}
_FIND_ACTIONS = ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls")


def command_keys(command: str, cwd: Path | None = None, roots: Sequence[Path] = ()) -> list[str]:
    """The keys that must all be remembered for `command` to run unasked; [] when it never may.

    With `cwd` (where the command runs) and `roots` (the workspace), a keyed command with an
    argument that leads outside the workspace gets an exact key."""
    segments = None if "\x00" in command else _parse(command)
    if not segments:
        return []
    # Every directory a `cd` of the list may have left the shell in: a relative argument must
    # stay inside from each (`cd sub | cat ../x` runs `cat` in the first one).
    cwds = [cwd] if cwd is not None else []
    keys: list[str] = []
    for words, inputs in segments:
        if words[0] in _CHANGES_DIRECTORY:
            target = _cd_target(words)
            if target is None:
                return []  # `cd`, `cd -`, `popd`: where later commands run is unknown
            cwds = list(dict.fromkeys([*cwds, *(_join(base, target) for base in cwds)]))
            if len(cwds) > _MOST_DIRECTORIES:
                return []  # `cd a; cd b; cd c …` doubles the places each time: not followed
        key = _segment_key(words)
        if key is None or (cwds and _leaves_workspace(inputs, cwds, roots)):
            return []  # `cat < link` where link leads out: like `cat < ../x`, never remembered
        if key.startswith(f"{ANY_ARGS}:") and cwds and _leaves_workspace(words[1:], cwds, roots):
            key = _exact(words)
        keys.append(key)
    return list(dict.fromkeys(keys))


def describe_key(key: str) -> str:
    """A key in an option label: `` `git status` (safe options, paths in the workspace)`` or
    ``exactly `ls -l` ``."""
    family, _, detail = key.partition(":")
    if family == ANY_ARGS:
        return f"`{detail}` (safe options, paths in the workspace)"
    return f"exactly `{detail}`"


# ---------------------------------------------------------------------------------------------
# Parsing: words of each simple command, or None for anything not fully understood


def _parse(command: str) -> list[tuple[list[str], list[str]]] | None:
    """Each simple command's words and the files of its `<` redirections."""
    segments: list[tuple[list[str], list[str]]] = []
    inputs: list[str] = []
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
                inputs.append(text)
                pending_input = False
            else:
                words.append(text)
        word, in_word, quoted = [], False, False
        return True

    def end_segment() -> bool:
        nonlocal words, inputs
        if not end_word() or pending_input:
            return False
        if not words:
            return False  # an empty command (`;;`, leading `|`): not something we model
        segments.append((words, inputs))
        words, inputs = [], []
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
        segments.append((words, inputs))
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
    subcommand, rest = args[0], args[1:]
    if subcommand in _ALWAYS_EXACT.get(program, ()):
        return _exact(words)
    if subcommand in _NESTED.get(program, ()) and rest and _SUBCOMMAND.match(rest[0]):
        subcommand, rest = f"{subcommand} {rest[0]}", rest[1:]
        rule = _RULES.get((program, subcommand))
        if rule is None:
            return _exact(words)  # `git stash drop`, `npm config set`, `uv pip uninstall`
    else:
        rule = _RULES.get((program, subcommand))
        if rule is None:
            known = _KNOWN_ONLY.get(program)
            if known is not None and subcommand not in known:
                return _exact(words)  # perhaps an alias: `git co .`
            rule = _BARE
    named = _check_arguments(rule, rest, go_style=program in _GO_STYLE)
    if named is None:
        return _exact(words)
    return f"{ANY_ARGS}:{program} {subcommand}{named}"


def _check_arguments(rule: _Rule, args: list[str], go_style: bool) -> str | None:
    """None when an argument is not known-safe for `rule`; else what the key adds to the
    subcommand (`" --get"` for `git config --get`, "" mostly)."""
    named = None
    positional_only = False
    positionals = 0
    if rule.sources in ("packages", "npm") and any(":" in arg for arg in args):
        return None  # `git+https://…`, `-e git+ssh://…`, `pkg@npm:other`, `file:…`: elsewhere
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if positional_only or arg == "-" or not arg.startswith("-"):
            if not rule.positionals or arg.startswith(("+", ":")):
                return None  # `git push origin +main`, `:branch`: a forced update, a delete
            if _names_a_place(rule.sources, arg, first=positionals == 0):
                return None  # `git push ssh://host/repo`, `npm i user/repo`
            positionals += 1
            continue
        if arg == "--":
            positional_only = True
            continue
        if arg in rule.requires:
            named = named or rule.requires[arg]
        if rule.numeric and arg[1:].isdigit():
            continue
        if arg.startswith("--") or go_style:
            name, eq, _ = arg.partition("=")
            if go_style and name.startswith("--"):
                name = name[1:]
            if name in rule.flags and (not eq or go_style):
                continue
            if name in rule.glued:
                continue
            if name in rule.valued:
                if not eq:
                    if i >= len(args) or args[i].startswith("-"):
                        return None  # a value that looks like an option: not modelled
                    i += 1
                continue
            return None  # unknown, or an abbreviation (`--output-d`): exact
        if not _short_cluster_is_safe(rule, arg, args, i):
            return None
        if f"-{arg[-1]}" in rule.valued and all(f"-{c}" in rule.flags for c in arg[1:-1]):
            i += 1  # `-m msg`, `-am msg`: the next word is the value
    if rule.requires and named is None:
        return None  # `git config core.pager x` (a write), `git restore file` (discards)
    return f" {named}" if named else ""


def _names_a_place(sources: str, arg: str, first: bool) -> bool:
    """Whether an argument names a repository or package source elsewhere than the remotes
    and registries configured: a URL (`https://`, `file://`, `ssh://`, `ext::`), `host:path`
    or `user@host:repo`, a path (`../other`, `/srv/repo`, `~/x`); for npm, `user/repo`
    (GitHub) too. A remote's name has none of `:`, `/` or `\\` in it."""
    if sources == "remote":
        return first and (any(c in arg for c in ":/\\") or arg.startswith((".", "~")))
    if sources == "npm":  # `@scope/name` is a package; `user/repo`, `./dir` are not
        scoped = arg.startswith("@") and arg.count("/") == 1
        return "/" in arg and not scoped
    return False


def _short_cluster_is_safe(rule: _Rule, arg: str, args: list[str], i: int) -> bool:
    """`-sb`: every letter a known flag, up to one that takes a value (glued or next word)."""
    for j in range(1, len(arg)):
        option = f"-{arg[j]}"
        if option in rule.flags:
            continue
        if option in rule.glued:
            return True  # the rest of the word is its value
        if option in rule.valued:
            if j < len(arg) - 1:
                return True  # `-mmsg`: the rest is the value
            return i < len(args) and not args[i].startswith("-")
        return False
    return True


def _cd_target(words: list[str]) -> str | None:
    """Where `cd X` / `pushd X` goes; None when that is not a plain directory argument."""
    if words[0] == "popd" or len(words) != 2 or words[1].startswith("-"):
        return None
    return words[1]


def _join(base: Path, path: str) -> Path:
    return Path(os.path.normpath(os.path.join(base, path)))


def _leaves_workspace(args: list[str], cwds: list[Path], roots: Sequence[Path]) -> bool:
    """Whether an argument, or an option's value, leads outside the workspace from a cwd: as
    written, or as the kernel resolves it (`d/../secret` with `d` a link out is outside)."""
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    for arg in args:
        if len(arg) > (_LONGEST_CHECKED_OPTION if arg.startswith("-") else _LONGEST_CHECKED_WORD):
            return True
        for candidate in _path_candidates(arg):
            for cwd in cwds:
                if not inside(_join(cwd, candidate), roots):
                    return True
                if not any(under(_resolve(cwd, candidate), root) for root in real_roots):
                    return True
    return False


def _resolve(cwd: Path, path: str) -> Path:
    """Where the kernel finds `path` from `cwd`: each symlink followed before a `..` after it
    climbs (a lexical `normpath` would drop `d/..` whatever `d` is)."""
    return Path(os.path.realpath(os.path.join(cwd, path)))


def _path_candidates(arg: str) -> set[str]:
    """What in a word may be read as a path: the word, the value of `--opt=value` / `if=x`, and
    for `-fFILE` every tail of the word (which letters take a value is not known here)."""
    candidates = {arg}
    if "=" in arg:
        candidates.add(arg.split("=", 1)[1])
    if arg.startswith("-") and not arg.startswith("--"):
        candidates.update(arg[j:] for j in range(2, len(arg)))
    candidates.discard("")
    return candidates


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


def _is_option(arg: str, option: str) -> bool:
    """Whether `arg` can be `option`: `-o`, `-ofile` or `-xo` for a short one; for a long one,
    `--output`, `--output=x` or any abbreviation (`--out=x`: getopt and git accept those)."""
    if option.startswith("--"):
        name = arg.split("=", 1)[0]
        return arg.startswith("--") and len(name) > 2 and option.startswith(name)
    return arg.startswith("-") and not arg.startswith("--") and option[1] in arg[1:]


def _exact(words: list[str]) -> str:
    return f"{EXACT}:{shlex.join(words)}"
