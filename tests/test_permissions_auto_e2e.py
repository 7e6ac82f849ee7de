"""Auto mode's questions, end to end: a command that discards work asks even though the sandbox
would run it; after a sandboxed command changed git's settings, a remembered "always" for a
command outside the sandbox asks again and the question shows the change; a command given a
`cwd` names it.

The real `heron` in `--mode auto`, a scripted model and the test editor of `acp_client`. The
suspension test writes `.git/config` from inside the sandbox, which only the Landlock-only path
allows (`HERON_SANDBOX=landlock`; where namespaces make `.git` read-only the write fails, which
is the point of them).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls
from test_permissions_e2e import asked, asked_ids
from test_permissions_rules_e2e import answers
from test_tools_e2e import run_turn, statuses, tool_result

from agent.sandbox.landlock import abi_version

AUTO = ("--mode", "auto")
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
landlock = pytest.mark.skipif(abi_version() < 1, reason="no Landlock in this kernel")


@pytest.fixture(autouse=True)
def temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sandboxed sessions make their TMPDIR here, not in /tmp."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))


def bash(command: str, call_id: str, **extra: Any) -> Any:
    return tool_calls(Call("bash", {"command": command, **extra}, id=call_id))


def git(repo: str, *args: str) -> str:
    done = subprocess.run(
        ["git", *GIT_ID, *args], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout


@pytest.fixture
def repo(workspace: str) -> str:
    """Work that git cannot bring back: an uncommitted edit, untracked files, a stash, a
    branch with a commit of its own."""
    git(workspace, "init", "-q", "-b", "main")
    Path(workspace, "a.txt").write_text("committed\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-q", "-m", "one")
    git(workspace, "branch", "topic")
    Path(workspace, "s.txt").write_text("stashed\n")
    git(workspace, "add", "s.txt")
    git(workspace, "stash", "-q")
    Path(workspace, "a.txt").write_text("committed\nthe user's line\n")
    Path(workspace, "build").mkdir()
    Path(workspace, "build", "notes.txt").write_text("untracked work\n")
    Path(workspace, "new.txt").write_text("untracked\n")
    return workspace


def work(repo: str) -> dict[str, str]:
    return {
        "a.txt": Path(repo, "a.txt").read_text(),
        "new.txt": Path(repo, "new.txt").read_text(),
        "build": Path(repo, "build", "notes.txt").read_text(),
        "stash": git(repo, "stash", "list"),
        "branches": git(repo, "branch", "--list"),
    }


# ---------------------------------------------------- 1. discarding work asks in auto mode


@landlock
@pytest.mark.parametrize(
    "command",  # one of each way to hide (tests/test_command_discards.py has them all)
    [
        "git checkout -- . && git clean -fd",
        "git reset --hard",
        "git stash drop",
        "cd build; rm -r .",
        "find . -name '*.txt' | xargs rm",
        "sh -c 'git checkout -- a.txt'",
        "timeout 10 git clean -fd",
        "echo $(git clean -fd)",
    ],
)
def test_a_command_that_discards_work_asks_in_auto_mode(heron, fake_llm, repo, command):
    before = work(repo)
    client, turn = run_turn(
        heron,
        fake_llm,
        repo,
        bash("git status --short", "look"),  # the sandbox still runs the rest unasked
        bash(command, "discard"),
        text("done"),
        args=AUTO,
        permission="reject_once",
    )
    assert asked_ids(client) == ["discard"], f"{command!r} ran unasked in auto mode"
    (question,) = asked(client)
    assert question["toolCall"]["title"].endswith("(discards work)")
    assert statuses(turn["updates"], "discard") == ["pending", "failed"]
    assert statuses(turn["updates"], "look")[-1] == "completed"
    assert work(repo) == before, f"{command!r} lost work"


@landlock
def test_allowed_once_a_discarding_command_runs_in_the_sandbox(heron, fake_llm, repo, tmp_path):
    outside = tmp_path / "outside.txt"
    command = f"git clean -fd && echo x > {outside}"
    client, _ = run_turn(
        heron, fake_llm, repo, bash(command, "c"), text("done"), args=AUTO, permission="allow_once"
    )
    assert asked_ids(client) == ["c"]
    assert not Path(repo, "new.txt").exists()  # it ran: the user allowed it
    assert not outside.exists()  # still confined


@landlock
def test_always_for_exactly_a_discarding_command_covers_only_it(heron, fake_llm, repo):
    client, _ = run_turn(
        heron,
        fake_llm,
        repo,
        bash("git clean -n", "dry"),  # not discarding: unasked
        bash("git stash drop", "d1"),
        bash("git stash drop", "d2"),  # remembered exactly
        bash("git stash clear", "d3"),
        text("done"),
        args=AUTO,
        permission=answers("allow_always", "reject_once"),
    )
    assert asked_ids(client) == ["d1", "d3"]
    names = [o["name"] for o in asked(client)[0]["options"]]
    assert names[1] == "Always allow exactly `git stash drop`"


# ------------------------------ 2. a sandboxed change to git's settings suspends "always"


@landlock
def test_a_change_to_git_config_suspends_always_for_commands_outside_the_sandbox(
    heron, fake_llm, repo, tmp_path
):
    pwned = tmp_path / "pwned"
    # Not `git config`: with Landlock alone it cannot set the lock file's mode (seccomp).
    plant = f"printf '[core]\\n\\tfsmonitor = touch {pwned}\\n' >> .git/config"
    seen_when_asked: list[bool] = []
    choices = answers("allow_always", "reject_once", "allow_once")

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        seen_when_asked.append(pwned.exists())
        return choices(params)

    fake_llm.script(
        bash("git status --short", "o1", sandbox=False),  # "always" for it, outside
        bash(plant, "plant"),  # sandboxed: runs unasked, writes .git/config
        bash("git status --short", "o2", sandbox=False),  # suspended: asks, rejected
        bash("git status --short", "o3", sandbox=False),  # still suspended: allowed once
        bash("git status --short", "o4", sandbox=False),  # seen: "always" counts again
        text("done"),
    )
    client = heron(*AUTO, env={"HERON_SANDBOX": "landlock"})
    client.permission = answer
    turn = client.prompt(client.new_session(repo), "go")

    assert "fsmonitor" in Path(repo, ".git", "config").read_text()  # the sandbox let it
    assert asked_ids(client) == ["o1", "o2", "o3"]
    assert seen_when_asked == [False, False, False]  # the planted program had not run
    question = asked(client)[1]
    shown = "\n".join(c["content"]["text"] for c in question["toolCall"]["content"])
    config = os.path.join(repo, ".git", "config")
    assert f"`{config}`" in shown and f"fsmonitor = touch {pwned}" in shown
    assert 'so it asks even if you chose "always"' in shown
    assert statuses(turn["updates"], "o2") == ["pending", "failed"]
    assert statuses(turn["updates"], "o4")[-1] == "completed"
    # the model was told too, with the sandboxed command's result
    assert ".git/config" in tool_result(fake_llm.requests[2], "plant")


@landlock
def test_a_change_seen_in_auto_still_suspends_always_after_switching_to_ask(heron, fake_llm, repo):
    fake_llm.script(
        bash("git status", "o1", sandbox=False),
        bash("mkdir -p .git/hooks && printf '#!/bin/sh\\n' > .git/hooks/pre-commit", "hook"),
        text("planted"),
    )
    client = heron(*AUTO, env={"HERON_SANDBOX": "landlock"})
    client.permission = "allow_always"
    session_id = client.new_session(repo)
    client.prompt(session_id, "go")
    assert asked_ids(client) == ["o1"]
    client.request("session/set_mode", {"sessionId": session_id, "modeId": "ask"})
    fake_llm.script(bash("git status", "o2"), bash("git status", "o3"), text("done"))
    client.prompt(session_id, "again")
    # in ask mode `git status` runs outside any sandbox: the remembered answer waits for the
    # user to see the hook; once allowed, it counts again
    assert asked_ids(client) == ["o1", "o2"]
    shown = json.dumps(asked(client)[1]["toolCall"]["content"])
    assert "pre-commit" in shown


# ---------------------------------------------------------- 3. the folder a command runs in


def test_the_question_names_the_folder_a_command_runs_in(heron, fake_llm, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    Path(workspace, "sub").mkdir()
    os.symlink(other, Path(workspace, "link"))
    client, _ = run_turn(
        heron,
        fake_llm,
        workspace,
        bash("ls", "here"),
        bash("ls", "same", cwd="."),
        bash("ls", "sub", cwd="sub"),
        bash("rm -rf build", "abs", cwd=str(other)),
        bash("ls", "link", cwd="link"),
        text("done"),
        args=("--mode", "ask"),
        permission="reject_once",
    )
    titles = {q["toolCall"]["toolCallId"]: q["toolCall"]["title"] for q in asked(client)}
    assert titles == {
        "here": "Run `ls`",
        "same": "Run `ls`",
        "sub": f"Run `ls` in {Path(workspace, 'sub')}",
        "abs": f"Run `rm -rf build` in {other} (discards work)",
        "link": f"Run `ls` in {Path(workspace, 'link')} (→ {other})",
    }
