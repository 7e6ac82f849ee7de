"""Which shell commands discard work (auto mode asks before them even in the sandbox), wherever
they hide in a command: an attacker's and a careless model's spellings. Data only: nothing
here is run."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from agent.tools.command_discards import DISCARDS, MAY_DISCARD, command_discards


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("work\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("work\n")
    return tmp_path


DISCARDING = [
    # git, plainly
    "git checkout -- a.txt",
    "git checkout .",
    "git checkout a.txt",  # an existing file: its changes are overwritten
    "git checkout main a.txt",
    "git checkout -f main",
    "git checkout --force main",
    "git checkout -p",
    "git checkout --ours a.txt",
    "git checkout -B main origin/main",
    "git checkout '*.py'",
    "git checkout :/a.txt",
    "git restore a.txt",
    "git restore --worktree a.txt",
    "git restore -SW a.txt",
    "git restore --staged --worktree a.txt",
    "git reset --hard",
    "git reset --hard HEAD~1",
    "git reset --ha",  # git accepts an abbreviation
    "git reset --merge",
    "git clean -fd",
    "git clean -fdx",
    "git clean --force",
    "git stash drop",
    "git stash clear",
    "git stash pop",
    "git branch -D topic",
    "git branch -df topic",
    "git branch --delete --force topic",
    "git branch -M old new",
    "git branch -f main HEAD~3",
    "git switch -f main",
    "git switch --discard-changes main",
    "git switch -C main",
    "git push --force origin main",
    "git push -f",
    "git push --force-with-lease origin main",
    "git push --forc origin main",
    "git push origin +main",
    "git push origin :main",
    "git push --delete origin topic",
    "git push --mirror backup",
    "git rm -f a.txt",
    "git rm -rf sub",
    "git mv -f a.txt sub/b.txt",
    "git merge --abort",
    "git rebase --abort",
    "git cherry-pick --abort",
    "git reflog expire --expire=now --all",
    "git gc --prune=now",
    "git worktree remove --force ../w",
    "git submodule deinit -f lib",
    "git checkout-index -a -f",
    "git read-tree -u --reset HEAD",
    "git update-ref -d refs/heads/topic",
    "git filter-branch --tree-filter true",
    # rm and friends
    "rm -r build",
    "rm -rf build",
    "rm -fr build",
    "rm -R build",
    "rm --recursive build",
    "rm --rec build",
    "rm build -r",
    "find . -delete",
    "find . -name '*.o' -exec rm {} +",
    "find . -name '*.o' -execdir rm -f {} ';'",
    "find . -type f | xargs rm",
    "xargs -0 rm -f < list",
    "parallel rm ::: a b",
    "shred -u a.txt",
    "rsync -a --delete src/ dst/",
    "rsync -a --del src/ dst/",
    # in a list, a pipeline, a group, a subshell, a function, a loop
    "ls && git clean -fd",
    "git checkout -- . && git clean -fd",
    "make; git reset --hard",
    "false || rm -rf build",
    "ls | git clean -fd",
    "(git clean -fd)",
    "{ git clean -fd; }",
    "if true; then git clean -fd; fi",
    "for f in a b; do rm -r $f; done",
    "f() { rm -rf build; }; f",
    "ls\ngit clean -fd",
    "ls & git clean -fd",
    "! git clean -fd",
    # behind cd, git -C, assignments
    "cd sub; rm -r x",
    "cd sub && git clean -fd",
    "git -C sub clean -fd",
    "git -C sub -c core.quotepath=off clean -fd",
    "git --git-dir=.git --work-tree=. clean -fd",
    "GIT_DIR=.git git clean -fd",
    # quoting, escapes, program paths, case
    "'git' 'clean' '-fd'",
    '"git" clean -f"d"',
    "g\\it cl\\ean -fd",
    "/usr/bin/git clean -fd",
    "/bin/rm -rf build",
    "\\rm -rf build",
    "'rm' -rf build",
    "r\\m -r build",
    "rm -\\rf build",
    "rm -'r'f build",
    "$'\\x72m' -rf build",
    "$'\\162m' -rf build",
    "RM -rf build",
    "git cle\\\nan -fd",
    # behind a program that runs its arguments
    "timeout 5 git clean -fd",
    "env -i PATH=/bin git checkout -- .",
    "env FOO=1 rm -rf build",
    "nice -n 5 rm -rf build",
    "nohup rm -rf build &",
    "sudo -u me rm -rf build",
    "time git reset --hard",
    "command rm -rf build",
    "exec git clean -fd",
    "busybox rm -rf build",
    "xargs rm -r",
    "xargs -I{} rm -r {}",
    "setsid -f git clean -fd",
    "stdbuf -oL git clean -fd",
    "flock /tmp/l git clean -fd",
    # in a string or here-doc a shell runs
    "sh -c 'git clean -fd'",
    "bash -c 'rm -rf build'",
    'bash -lc "cd x && git reset --hard"',
    "sh -c 'sh -c \"rm -rf build\"'",
    'eval "git clean -fd"',
    "eval git clean -fd",
    "echo git clean -fd | sh",
    "echo 'rm -rf build' | bash",
    "bash <<EOF\ngit clean -fdx\nEOF",
    "bash <<'EOF'\nrm -rf build\nEOF",
    "cat <<EOF | sh\nrm -rf build\nEOF",
    "bash <<< 'rm -rf build'",
    "xargs -I{} sh -c 'rm -r {}'",
    "find . -exec sh -c 'rm -rf \"$1\"' _ {} \\;",
    "alias x='rm -rf'; x build",
    "watch -n1 'git clean -fd'",
    # what a substitution runs
    "echo $(git clean -fd)",
    'echo "$(rm -rf build)"',
    "echo `rm -rf build`",
    'echo "`git clean -fd`"',
    "cat <(git clean -fd)",
    "echo ${x:-$(rm -rf build)}",
    "cat <<EOF\n$(rm -rf build)\nEOF",
    # git runs these as shell commands
    "git submodule foreach 'git clean -fdx'",
    "git submodule foreach git reset --hard",
    "git rebase -x 'git clean -fd' main",
    "git rebase --exec='rm -rf build' main",
    "git bisect run rm -rf build",
    "git -c core.pager='rm -rf build' log",
    "git -c alias.x='!git clean -fd' x",
]


@pytest.mark.parametrize("command", DISCARDING)
def test_discarding_commands_are_recognised(ws: Path, command: str) -> None:
    assert command_discards(command, ws) == DISCARDS


KEEPING = [
    "git status",
    "git diff",
    "git log -5",
    "git checkout main",  # a branch: git keeps local changes or refuses
    "git checkout -b feature",
    "git checkout -b feature main",
    "git checkout -",
    "git checkout --detach HEAD~1",
    "git switch main",
    "git switch -c feature",
    "git restore --staged a.txt",
    "git restore -S a.txt",
    "git reset",
    "git reset HEAD a.txt",
    "git reset --soft HEAD~1",
    "git reset --mixed",
    "git clean -n",
    "git clean -nd",
    "git clean --dry-run -x",
    "git stash",
    "git stash push -m wip",
    "git stash list",
    "git stash show -p",
    "git branch -a",
    "git branch -d topic",
    "git branch --sort=-committerdate",
    "git push -u origin main",
    "git push origin main:main",
    "git push --tags",
    "git rm a.txt",
    "git rm -r --cached sub",
    "git rm -f --cached a.txt",
    "git mv a.txt c.txt",
    "git gc",
    "git commit -m 'git clean -fd later'",  # a message is no command
    "git rebase main",
    "git merge topic",
    "rm a.txt",
    "rm -f a.txt",
    "rm -- -r",  # a file named -r
    "rmdir sub",
    "find . -name '*.py'",
    "find . -name '*.o' -exec echo {} +",
    "echo 'rm -rf build'",  # a string nobody runs
    'echo "git clean -fd"',
    "cat > notes.md <<EOF\nrm -rf build\nEOF",  # a here-doc into a file
    "printf '%s\\n' 'git reset --hard' > notes.md",
    "grep -r 'rm -rf' .",
    "rsync -a src/ dst/",
    "python -m pytest",
    "ls -la # rm -rf build",  # a comment
    "npm run clean",
    "",
]


@pytest.mark.parametrize("command", KEEPING)
def test_commands_that_keep_work_are_not_flagged(ws: Path, command: str) -> None:
    assert command_discards(command, ws) is None


@pytest.mark.parametrize(
    "command",
    [
        "git co .",  # an alias may be `checkout`
        "git lfs prune",  # an add-on: git-lfs
        "git Clean -fd",  # not git's own command: an alias (aliases ignore case)
        "git checkout $BRANCH",  # may name a file
        "git --config-env=alias.x=X x",
        "cd $DIR && git checkout main",  # where it runs is unknown
    ],
)
def test_what_may_hide_a_discarding_command_is_flagged_as_such(ws: Path, command: str) -> None:
    assert command_discards(command, ws) == MAY_DISCARD


def test_git_checkout_of_a_name_depends_on_whether_it_is_a_file(ws: Path) -> None:
    assert command_discards("git checkout a.txt", ws) == DISCARDS
    assert command_discards("git checkout b.txt", ws) is None  # no such file: a branch
    assert command_discards("cd sub && git checkout b.txt", ws) == DISCARDS
    assert command_discards("git -C sub checkout b.txt", ws) == DISCARDS
    # without the folder it cannot be told
    assert command_discards("git checkout b.txt") == MAY_DISCARD


def test_a_link_named_like_a_branch_is_a_path(ws: Path) -> None:
    (ws / "main").symlink_to(ws / "missing")  # dangling: still a path git would check out
    assert command_discards("git checkout main", ws) == DISCARDS


def test_huge_or_deeply_nested_commands_stay_cheap_and_assume_the_worst(ws: Path) -> None:
    nested = "git status"
    for _ in range(10):
        nested = f"sh -c {shlex.quote(nested)}"
    assert command_discards(nested, ws) == MAY_DISCARD  # too deep to read
    many = " ".join(["sudo git status"] * 10_000)
    assert command_discards(many, ws) == MAY_DISCARD  # too many programs to check
    assert command_discards("ls " * 20_000, ws) is None


@pytest.mark.parametrize(
    "command",
    ["echo 'unterminated", 'echo "unterminated', "echo $(unterminated", "cat <<EOF\nno end"],
)
def test_unfinished_syntax_never_raises(ws: Path, command: str) -> None:
    assert command_discards(command, ws) is None
    assert command_discards("git clean -fd; " + command, ws) == DISCARDS
