"""The shell-command matcher behind "always allow": which commands get which key, and which
never get one (so they always ask). An attacker's view: anything it cannot vouch for asks."""

from __future__ import annotations

import pytest

from agent.permissions.commands import command_keys, describe_key
from agent.permissions.policy import options_for


@pytest.mark.parametrize(
    ("command", "keys"),
    [
        # subcommand tools: program + subcommand, any arguments
        ("git status", ["bash:git status"]),
        ("git status --short", ["bash:git status"]),
        ("git push origin main", ["bash:git push"]),
        ("npm test", ["bash:npm test"]),
        ("cargo test --release", ["bash:cargo test"]),
        # ...but options before the subcommand, or that write/run something, are exact
        ("git -C repo push", ["bash-exact:git -C repo push"]),
        ("git -c core.pager=x log", ["bash-exact:git -c core.pager=x log"]),
        ("git --config-env=a=B status", ["bash-exact:git --config-env=a=B status"]),
        ("git diff --output=/tmp/x", ["bash-exact:git diff --output=/tmp/x"]),
        ("git diff --out=/tmp/x", ["bash-exact:git diff --out=/tmp/x"]),  # an abbreviation
        ("git grep -Ovim x", ["bash-exact:git grep -Ovim x"]),
        ("git fetch --upload-pack=x o", ["bash-exact:git fetch --upload-pack=x o"]),
        # subcommands that run arbitrary code are exact
        ("npm run build", ["bash-exact:npm run build"]),
        ("npm exec foo", ["bash-exact:npm exec foo"]),
        ("cargo run", ["bash-exact:cargo run"]),
        ("go run .", ["bash-exact:go run ."]),
        # read-only programs: any arguments, unless a dangerous option is there
        ("ls -la src", ["bash:ls"]),
        ("cat README.md", ["bash:cat"]),
        ("find . -name '*.py'", ["bash:find"]),
        ("find . -delete", ["bash-exact:find . -delete"]),
        ("find . -fprint out", ["bash-exact:find . -fprint out"]),
        ("find . -okdir rm \\;", ["bash-exact:find . -okdir rm ';'"]),
        ("sort -k2 x", ["bash:sort"]),
        ("sort -o out x", ["bash-exact:sort -o out x"]),
        ("sort -ro out x", ["bash-exact:sort -ro out x"]),
        ("sort --out=o x", ["bash-exact:sort --out=o x"]),
        ("sort --compress-program=sh x", ["bash-exact:sort --compress-program=sh x"]),
        # everything else: the exact argument list
        ("rm -rf build", ["bash-exact:rm -rf build"]),
        ("sed -i s/a/b/ f", ["bash-exact:sed -i s/a/b/ f"]),
        ("make", ["bash-exact:make"]),
        # every part of a list needs its key
        ("make && ls", ["bash-exact:make", "bash:ls"]),
        ("a || b; c | d & e", [f"bash-exact:{x}" for x in "abcde"]),
        ("ls\ngit diff", ["bash:ls", "bash:git diff"]),
        ("ls |& cat", ["bash:ls", "bash:cat"]),
        ("ls &", ["bash:ls"]),
        # quoting and escapes are understood
        ('echo "a && rm -rf /"', ["bash:echo"]),
        ("echo a \\; rm x", ["bash:echo"]),  # one command: the ; is escaped
        ("git sta\\\ntus", ["bash:git status"]),  # a line continuation inside a word
        ("git 'status'", ["bash:git status"]),
        # fd duplication and input from a file inside the cwd pass
        ("make 2>&1 | cat", ["bash-exact:make", "bash:cat"]),
        ("echo hi >&2", ["bash:echo"]),
        ("cat < in.txt", ["bash:cat"]),
        ("cat <in.txt", ["bash:cat"]),
    ],
)
def test_keys(command: str, keys: list[str]) -> None:
    assert command_keys(command) == keys


@pytest.mark.parametrize(
    "command",
    [
        # output redirection of any kind
        "git status > ~/.bashrc",
        "git status >> f",
        "git status >| f",
        "git status &> f",
        "git status &>> f",
        "git status 2> f",
        "git status 2>f",
        "git status>f",
        "echo hi >&file",
        "cat <> f",
        "cat <<< hi",
        "cat <<EOF\nhi\nEOF",
        "cat /dev/null > /outside/file",
        # input from outside the cwd
        "cat < ../secret",
        "cat < /etc/shadow",
        # the environment
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=cmd git status",
        "LD_PRELOAD=x.so ls",
        "A+=1 ls",
        "X=-delete; find . $X",
        "A=1",
        "export GIT_DIR=/x; git status",
        # expansions and substitutions
        "echo $(rm -rf x)",
        "echo `id`",
        'echo "$(id)"',
        'echo "`id`"',
        "echo $HOME",
        "echo ${x}",
        "ls *.py",
        "ls ?",
        "ls [ab]",
        "echo {a,b}",
        "ls ~/x",
        "diff <(ls) <(ls a)",
        "ls >(cat)",
        "(cd x; rm y)",
        "{ rm x; }",
        "! ls",
        "ls # comment",
        # programs that run their arguments, keywords, paths
        "env ls",
        "exec rm x",
        "command rm x",
        "xargs rm < list",
        "sudo rm -rf build",
        "sh -c 'rm x'",
        "bash script.sh",
        "eval ls",
        "npx cowsay",
        "timeout 5 rm x",
        "/bin/rm x",
        "./script",
        "if true; then rm x; fi",
        "for f in a; do rm $f; done",
        "find . -exec rm {} ;",
        # malformed
        "echo 'unclosed",
        'echo "unclosed',
        "ls \\",
        "ls;;",
        "| ls",
        "ls && && ls",
        "",
        "   ",
        "echo a\x00b",
    ],
)
def test_commands_that_never_get_a_key(command: str) -> None:
    assert command_keys(command) == []


def test_allowing_git_status_does_not_allow_git_push() -> None:
    assert not set(command_keys("git push")) <= set(command_keys("git status"))


def test_the_absolute_path_of_a_program_is_not_the_program() -> None:
    assert command_keys("/bin/ls") == []
    assert command_keys("ls") == ["bash:ls"]


def test_labels_say_what_is_remembered() -> None:
    assert describe_key("bash:git status") == "`git status` (any arguments)"
    assert describe_key("bash-exact:ls -la 'a b'") == "exactly `ls -la 'a b'`"
    names = [o.name for o in options_for(command_keys("make && git status -s"))]
    assert names == [
        "Allow",
        "Always allow exactly `make`, `git status` (any arguments)",
        "Reject",
        "Always reject exactly `make`, `git status` (any arguments)",
    ]
    # a command that can never be remembered offers no "always"
    assert [o.kind for o in options_for(command_keys("ls > f"))] == ["allow_once", "reject_once"]
