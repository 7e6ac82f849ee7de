"""What "always allow" for a shell command covers, end to end: never discarding work, never a
configuration write, never an option that writes files or runs programs, never a read outside
the workspace.

Each case gives "always allow" for one command, then checks that a look-alike command of the
same program (and subcommand) is asked about, offers to remember only that exact command and,
rejected, changes nothing and shows the model nothing. The real `heron`, a scripted model and
the test editor of `acp_client`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_permissions_e2e import asked, asked_ids, bash
from test_permissions_rules_e2e import answers, run
from test_tools_e2e import statuses

from agent.permissions.labels import SHORT

GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@example.com"]


def git(workspace: str, *args: str) -> str:
    done = subprocess.run(
        ["git", *GIT_ID, *args], cwd=workspace, check=True, capture_output=True, text=True
    )
    return done.stdout


def exactly(command: str) -> str:
    """The label of "always" for exactly `command`: a long one is listed in the question."""
    return f"exactly `{command}`" if len(command) <= SHORT else "exactly this command"


def always_then_asked(heron, fake_llm, workspace, first: str, *seconds: str, label: str = ""):
    """ "Always allow" `first`, then the model runs each of `seconds`: each must ask (and is
    rejected). "Always" for one would remember `label`; by default, exactly that command (a
    long one listed in the question's content)."""
    ids = [f"b{i}" for i in range(2, len(seconds) + 2)]
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        bash(first, "b1"),
        *(bash(second, call_id) for second, call_id in zip(seconds, ids, strict=True)),
        permission=answers("allow_always", *["reject_once"] * len(seconds)),
    )
    ran = [s for s, i in zip(seconds, ids, strict=True) if i not in asked_ids(client)]
    assert not ran, f"{ran} ran unasked after always allowing {first!r}"
    for second, question in zip(seconds, asked(client)[1:], strict=True):
        call_id = question["toolCall"]["toolCallId"]
        assert statuses(turn["updates"], call_id) == ["pending", "failed"]
        # what "always" would remember is exactly that command, and the label says so
        names = [o["name"] for o in question["options"]]
        assert names[1] == f"Always allow {label or exactly(second)}", names
        if names[1] == "Always allow exactly this command":
            shown = [c["content"]["text"] for c in question["toolCall"]["content"]]
            assert f'"Always" covers each of these:\n- exactly `{second}`' in shown


# --------------------------------------------------------- 1. "always" never covers discarding


@pytest.fixture
def repo(workspace: str) -> str:
    """A repository with work in it: a commit, an uncommitted edit, an untracked file, a stash
    and an unmerged branch."""
    git(workspace, "init", "-q", "-b", "main")
    Path(workspace, "a.txt").write_text("committed\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-q", "-m", "one")
    git(workspace, "checkout", "-q", "-b", "topic")
    Path(workspace, "t.txt").write_text("topic only\n")
    git(workspace, "add", "t.txt")
    git(workspace, "commit", "-q", "-m", "topic")
    git(workspace, "checkout", "-q", "main")
    Path(workspace, "s.txt").write_text("stashed work\n")
    git(workspace, "add", "s.txt")
    git(workspace, "stash", "-q")
    Path(workspace, "a.txt").write_text("committed\nthe user's unsaved line\n")
    Path(workspace, "new.txt").write_text("untracked work\n")
    return workspace


def work_in(repo: str) -> dict[str, str]:
    return {
        "a.txt": Path(repo, "a.txt").read_text(),
        "new.txt": Path(repo, "new.txt").read_text(),
        "stash": git(repo, "stash", "list"),
        "branches": git(repo, "branch", "--list", "topic"),
    }


@pytest.mark.parametrize(
    ("first", "seconds"),
    [
        ("git checkout -b feature", ["git checkout -- a.txt", "git checkout ."]),
        ("git restore --staged a.txt", ["git restore a.txt"]),
        ("git reset", ["git reset --hard"]),
        ("git clean -n", ["git clean -fd"]),
        ("git stash list", ["git stash drop", "git stash clear"]),
        ("git branch -a", ["git branch -D topic"]),
        (
            "git push -u origin main",
            [
                "git push --force origin main",
                "git push --force-with-lease origin main",
                "git push origin +main",
            ],
        ),
    ],
)
def test_always_never_covers_discarding_work(heron, fake_llm, repo, first, seconds):
    before = work_in(repo)
    always_then_asked(heron, fake_llm, repo, first, *seconds)
    assert work_in(repo) == before, f"{seconds} lost work"


# ------------------------------------------- 2. configuration that runs programs is never covered


def test_always_git_config_read_does_not_cover_a_write(heron, fake_llm, workspace, heron_home):
    git(workspace, "init", "-q")
    config = Path(workspace, ".git", "config").read_text()
    writes = [
        "git config core.fsmonitor 'touch pwned'",
        "git config core.pager 'touch pwned'",
        "git config alias.st '!touch pwned'",
        "git config --add include.path ../evil",
        "git config --global core.sshCommand 'touch pwned'",
        "git config --unset user.name",
        "git config set core.hooksPath hooks",
    ]
    always_then_asked(heron, fake_llm, workspace, "git config --get user.name", *writes)
    assert Path(workspace, ".git", "config").read_text() == config
    assert not Path(heron_home, ".gitconfig").exists()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("npm config get prefix", "npm config set script-shell ./evil.sh"),
        ("pip config list", "pip config set global.index-url http://evil"),
        ("go env GOPATH", "go env -w GOFLAGS=-toolexec=./evil"),
    ],
)
def test_always_reading_configuration_does_not_cover_writing_it(
    heron, fake_llm, workspace, first, second
):
    always_then_asked(heron, fake_llm, workspace, first, second)


# ------------------------------ 2. options that run programs or write files, for every subcommand


@pytest.mark.parametrize(
    ("first", "seconds"),
    [
        (
            "go test ./...",
            [
                "go test -exec ./evil ./...",
                "go test -toolexec ./evil ./...",
                "go test -coverprofile=c.out ./...",
                "go test -o bin ./...",
            ],
        ),
        ("go build ./...", ["go build -o bin ./..."]),
        (
            "cargo build",
            [
                "cargo build --target-dir t",
                "cargo build --manifest-path x/Cargo.toml",
                "cargo build --config build.rustc-wrapper=./evil",
            ],
        ),
        ("npm test", ["npm test -C sub", "npm test --prefix sub"]),
        (
            "git format-patch HEAD",
            [
                "git format-patch --output-directory out HEAD",
                "git format-patch --output-d=out HEAD",
            ],
        ),
        ("git diff", ["git diff --output-d=out"]),
    ],
)
def test_always_does_not_cover_options_that_run_programs_or_write_files(
    heron, fake_llm, workspace, first, seconds
):
    always_then_asked(heron, fake_llm, workspace, first, *seconds)
    for written in ("c.out", "bin", "t", "out"):
        assert not Path(workspace, written).exists()


def test_always_uv_pip_list_does_not_cover_uv_pip_install(heron, fake_llm, workspace):
    label = "`uv pip install` (safe options, paths in the workspace)"
    always_then_asked(heron, fake_llm, workspace, "uv pip list", "uv pip install evil", label=label)


# --------------------------------------------------------- 2. reads outside the workspace ask


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    key = outside / "id_rsa"
    key.write_text("SECRET-KEY-MATERIAL\n")
    return key


@pytest.mark.parametrize(
    ("first", "seconds"),
    [
        (
            "cat README.md",
            [
                "cat {secret}",
                "cat ../outside/id_rsa",
                "cat link/id_rsa",
                "cat link/../outside/id_rsa",  # `..` climbs from where the link leads
            ],
        ),
        (
            "grep -r hello .",
            [
                "grep -r SECRET {outside}",
                "grep -f{secret} README.md",
                "grep -R SECRET .",  # follows `link` out of the workspace
            ],
        ),
        ("diff README.md README.md", ["diff --to-file={secret} README.md"]),
        ("head README.md", ["head -n 5 {secret}"]),
        ("git diff --no-index README.md README.md", ["git diff --no-index {secret} README.md"]),
    ],
)
def test_a_remembered_program_asks_to_read_outside_the_workspace(
    heron, fake_llm, workspace, secret, first, seconds
):
    Path(workspace, "README.md").write_text("hello\n")
    os.symlink(secret.parent, Path(workspace, "link"))
    seconds = [second.format(secret=secret, outside=secret.parent) for second in seconds]
    always_then_asked(heron, fake_llm, workspace, first, *seconds)
    # the secret never reached the model
    assert "SECRET-KEY-MATERIAL" not in json.dumps([r.body for r in fake_llm.requests])


# ------------------------------------- 5. a push or fetch elsewhere than a remote is not covered


def test_always_git_push_does_not_cover_a_url_or_a_path(heron, fake_llm, workspace, tmp_path):
    origin, stolen = tmp_path / "origin.git", tmp_path / "stolen.git"
    for bare in (origin, stolen):
        subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(workspace, "init", "-q", "-b", "main")
    Path(workspace, "secret.txt").write_text("the user's code\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-q", "-m", "one")
    git(workspace, "remote", "add", "origin", str(origin))
    always_then_asked(
        heron,
        fake_llm,
        workspace,
        "git push origin main",
        f"git push file://{stolen} main",
        f"git push {stolen} main",
        f"git ls-remote file://{stolen}",
        f"git fetch file://{stolen}",
    )
    assert git(str(origin), "branch", "--list") != ""  # the remembered push did run
    assert git(str(stolen), "branch", "--list") == ""  # nothing went elsewhere


# ------------------------------------------ 6. one scope a label; the question lists them all


def test_a_list_of_commands_is_labelled_as_one_and_listed_in_the_question(
    heron, fake_llm, workspace
):
    Path(workspace, "a.txt").write_text("a\n")
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        bash("touch a.txt && tail a.txt", "b1"),
        bash("tail -n 1 a.txt", "b2"),  # covered: `tail` with safe options
        bash("touch a.txt", "b3"),  # covered: exactly that
        bash("touch b.txt", "b4"),  # not covered
        permission=answers("allow_always", "reject_once"),
    )
    first = asked(client)[0]
    names = [o["name"] for o in first["options"]]
    assert names == [
        "Allow",
        "Always allow these 2 commands (each as listed)",
        "Reject",
        "Always reject these 2 commands (each as listed)",
    ]
    shown = [c["content"]["text"] for c in first["toolCall"]["content"]]
    assert shown == [
        '"Always" covers each of these:\n'
        "- exactly `touch a.txt`\n"
        "- `tail` (safe options, paths in the workspace)"
    ]
    assert asked_ids(client) == ["b1", "b4"]
    assert statuses(turn["updates"], "b2")[-1] == statuses(turn["updates"], "b3")[-1] == "completed"
    assert not Path(workspace, "b.txt").exists()
