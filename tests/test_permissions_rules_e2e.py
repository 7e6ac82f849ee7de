"""What "always allow" remembers, protected paths and the re-check after the answer, end to end.

Each case gives "always allow" for one call, then checks that a look-alike call which would do
something else is asked about (and, rejected, changes nothing). The real `heron`, a scripted
model and the test editor of `acp_client`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls
from test_permissions_e2e import ASK, asked, asked_ids, bash, edit
from test_tools_e2e import FS_CAPS, statuses, tool_result

ACCEPT_EDITS = ("--mode", "accept-edits")


def answers(*choices: str) -> Any:
    """A permission handler answering the questions in order with these option kinds."""
    pending = list(choices)

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        kind = pending.pop(0)
        option = next(o for o in params["options"] if o["kind"] == kind)
        return {"outcome": "selected", "optionId": option["optionId"]}

    return answer


def run(heron, fake_llm, workspace, *responses, args=ASK, permission=None, caps=None):
    fake_llm.script(*responses, text("ok"))
    client = heron(*args, client_capabilities=caps)
    client.permission = permission
    turn = client.prompt(client.new_session(workspace), "go")
    return client, turn


# ------------------------------------------------------- 1. "always" covers exactly what it says


def test_always_git_status_does_not_cover_a_redirection_into_a_file(
    heron, fake_llm, workspace, heron_home
):
    bashrc = heron_home / ".bashrc"
    bashrc.write_text("export KEEP=1\n")
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        bash("git status", "b1"),
        bash("git status > ~/.bashrc", "b2"),
        permission=answers("allow_always", "reject_once"),
    )
    assert asked_ids(client) == ["b1", "b2"], "a redirection into a file ran unasked"
    assert bashrc.read_text() == "export KEEP=1\n"
    assert statuses(turn["updates"], "b2") == ["pending", "failed"]
    # a command with a redirection can never be remembered: only "once" is offered
    assert [o["kind"] for o in asked(client)[1]["options"]] == ["allow_once", "reject_once"]


def test_always_git_status_does_not_cover_git_config_from_the_environment(
    heron, fake_llm, workspace
):
    subprocess.run(["git", "init", "-q", workspace], check=True)
    pwned = Path(workspace, "pwned")
    inject = (
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor "
        f"GIT_CONFIG_VALUE_0='touch {pwned}' git status"
    )
    client, _ = run(
        heron,
        fake_llm,
        workspace,
        bash("git status", "b1"),
        bash(inject, "b2"),
        permission=answers("allow_always", "reject_once"),
    )
    assert asked_ids(client) == ["b1", "b2"], "GIT_CONFIG_* in front of git status ran unasked"
    assert not pwned.exists()


@pytest.mark.parametrize("dangerous", ["find . -delete", "find . -name keep.txt -exec rm -f {} +"])
def test_always_find_with_a_name_does_not_cover_delete_or_exec(
    heron, fake_llm, workspace, dangerous
):
    keep = Path(workspace, "keep.txt")
    keep.write_text("keep\n")
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        bash("find . -name '*.py'", "b1"),
        bash("find . -name '*.txt'", "b2"),  # the same read-only program: covered
        bash(dangerous, "b3"),
        permission=answers("allow_always", "reject_once"),
    )
    names = [o["name"] for o in asked(client)[0]["options"]]
    assert names[1] == "Always allow `find` (safe options, paths in the workspace)"
    assert asked_ids(client) == ["b1", "b3"], f"{dangerous!r} ran unasked"
    assert statuses(turn["updates"], "b2")[-1] == "completed"
    assert keep.read_text() == "keep\n"


def test_always_cat_does_not_cover_truncating_a_file_outside(heron, fake_llm, workspace, tmp_path):
    Path(workspace, "README.md").write_text("hello\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    client, _ = run(
        heron,
        fake_llm,
        workspace,
        bash("cat README.md", "b1"),
        bash(f"cat /dev/null > {outside}", "b2"),
        permission=answers("allow_always", "reject_once"),
    )
    assert asked_ids(client) == ["b1", "b2"], "cat with an output redirection ran unasked"
    assert outside.read_text() == "precious\n"


def test_an_exact_command_is_remembered_exactly(heron, fake_llm, workspace):
    Path(workspace, "a").write_text("")
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        bash("touch a", "b1"),
        bash("touch a", "b2"),  # the very same command: remembered
        bash("touch b", "b3"),  # other arguments: asks
        permission=answers("allow_always", "reject_once"),
    )
    assert [o["name"] for o in asked(client)[0]["options"]][1] == "Always allow exactly `touch a`"
    assert asked_ids(client) == ["b1", "b3"]
    assert statuses(turn["updates"], "b2")[-1] == "completed"
    assert not Path(workspace, "b").exists()


def test_always_for_git_status_is_per_subcommand_and_says_so(heron, fake_llm, workspace):
    subprocess.run(["git", "init", "-q", workspace], check=True)
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        bash("git status", "b1"),
        bash("git status --short", "b2"),
        bash("git -c core.pager=evil status", "b3"),  # options before the subcommand: asks
        permission=answers("allow_always", "reject_once"),
    )
    assert [o["name"] for o in asked(client)[0]["options"]][1] == (
        "Always allow `git status` (safe options, paths in the workspace)"
    )
    assert asked_ids(client) == ["b1", "b3"]
    assert statuses(turn["updates"], "b2")[-1] == "completed"


# ------------------------------------------------------------------------- 2. protected paths


@pytest.mark.parametrize("target", [".git/config", ".git/hooks/pre-commit", ".heron/settings"])
def test_accept_edits_asks_for_writes_under_git_and_heron(heron, fake_llm, workspace, target):
    path = Path(workspace, target)
    path.parent.mkdir(parents=True)
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("write_file", {"path": "ok.txt", "content": "x\n"}, id="w1")),
        tool_calls(Call("write_file", {"path": target, "content": "evil\n"}, id="w2")),
        args=ACCEPT_EDITS,
        permission=answers("reject_once"),
    )
    assert asked_ids(client) == ["w2"], f"a write to {target} ran unasked in accept-edits"
    assert not path.exists()
    assert Path(workspace, "ok.txt").read_text() == "x\n"
    assert statuses(turn["updates"], "w2") == ["pending", "failed"]


def test_always_for_edits_does_not_cover_git_and_always_there_is_the_exact_path(
    heron, fake_llm, workspace
):
    Path(workspace, ".git", "hooks").mkdir(parents=True)
    hook = Path(workspace, ".git", "hooks", "pre-commit")
    write = "write_file"
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call(write, {"path": "a.txt", "content": "a\n"}, id="w1")),
        tool_calls(Call(write, {"path": ".git/config", "content": "c\n"}, id="w2")),
        tool_calls(Call(write, {"path": ".git/config", "content": "d\n"}, id="w3")),
        tool_calls(Call(write, {"path": ".git/hooks/pre-commit", "content": "e\n"}, id="w4")),
        permission=answers("allow_always", "allow_always", "reject_once"),
    )
    # w2 is asked despite "always" for write_file; w3 is the same exact path: remembered
    assert asked_ids(client) == ["w1", "w2", "w4"]
    config = Path(os.path.realpath(workspace), ".git", "config")
    assert [o["name"] for o in asked(client)[1]["options"]][1] == (
        f"Always allow `write_file` on exactly `{config}`"
    )
    assert config.read_text() == "d\n"
    assert not hook.exists()
    assert statuses(turn["updates"], "w4") == ["pending", "failed"]


# ------------------------------------------------------------- 3. re-checked after the answer


def test_a_symlink_swapped_in_while_asking_fails_the_call(heron, fake_llm, workspace, tmp_path):
    target = Path(workspace, "a.txt")
    target.write_text("x = 1\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("x = 1\n")  # the same text: only the permission re-check can stop it

    def swap_then_allow(params: dict[str, Any]) -> dict[str, Any]:
        target.unlink()
        os.symlink(outside, target)
        return {"outcome": "selected", "optionId": "allow_once"}

    client, turn = run(
        heron,
        fake_llm,
        workspace,
        tool_calls(edit("a.txt", "1", "2", "e1")),
        permission=swap_then_allow,
        caps=FS_CAPS,  # the editor writes where the path leads, as editors do
    )
    assert asked_ids(client) == ["e1"]
    assert statuses(turn["updates"], "e1") == ["pending", "failed"]
    assert outside.read_text() == "x = 1\n", "the write followed a symlink swapped in meanwhile"
    reason = tool_result(fake_llm.requests[1], "e1")
    assert "changed" in reason and str(outside) in reason


# ------------------------------------------------------------------------------------ 4. fetch


def test_fetch_refuses_unsupported_schemes_before_asking(heron, fake_llm, workspace):
    client, turn = run(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("fetch", {"url": "file:///etc/passwd"}, id="f1")),
        permission=answers(),
    )
    assert asked(client) == []
    assert statuses(turn["updates"], "f1") == ["pending", "failed"]
    assert "only http:// and https://" in tool_result(fake_llm.requests[1], "f1")


def test_always_for_a_fetch_is_per_scheme_host_and_port(heron, fake_llm, workspace):
    fetch = "fetch"
    client, _ = run(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call(fetch, {"url": "http://127.0.0.1:9/a"}, id="f1")),
        tool_calls(Call(fetch, {"url": "http://127.0.0.1:9/b"}, id="f2")),  # same origin
        tool_calls(Call(fetch, {"url": "http://127.0.0.1:7/a"}, id="f3")),  # another port
        tool_calls(Call(fetch, {"url": "https://127.0.0.1:9/a"}, id="f4")),  # another scheme
        args=(),
        permission=answers("allow_always", "reject_once", "reject_once"),
    )
    assert [o["name"] for o in asked(client)[0]["options"]][1] == (
        "Always allow fetches from `http://127.0.0.1:9`"
    )
    assert asked_ids(client) == ["f1", "f3", "f4"]


def test_the_permission_request_shows_a_multi_line_command_whole(heron, fake_llm, workspace):
    command = "ls\nrm -rf build"
    client, _ = run(
        heron, fake_llm, workspace, bash(command, "b1"), permission=answers("reject_once")
    )
    (request,) = asked(client)
    shown = [c["content"]["text"] for c in request["toolCall"]["content"]]
    assert shown[0] == "```\nls\nrm -rf build\n```", "the title alone reads `ls rm -rf build`"
    assert request["toolCall"]["title"] == "Run `ls rm -rf build` (discards work)"
