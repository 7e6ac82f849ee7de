"""Workspace trust, end to end: the real `heron` over its pipes, against the fake model.

A folder is untrusted until the user says otherwise: its command files, its skills and what
its git repository would run by itself stay inert; the user is asked through the standard
`session/request_permission` (each of the four options), the answer is remembered per folder
in the user's config (never the project's), across processes, and `/trust` shows and changes
it. Every test's HOME is a temporary folder (conftest), so the real user's config is never
read or written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import trust_folder
from fake_openai import Call, text, tool_calls

from agent.sandbox.landlock import abi_version

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def trust_file(home: Path) -> Path:
    return home / ".config" / "heron" / "trusted-folders.toml"


def remembered(home: Path) -> dict[str, list[str]]:
    path = trust_file(home)
    return tomllib.loads(path.read_text()) if path.exists() else {}


def with_command(workspace: str) -> Path:
    folder = Path(workspace, ".heron", "commands")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "review.md").write_text("Review the project.\n")
    return folder / "review.md"


def with_skill(root: str | Path, name: str = "deploy", body: str = "Deploy with care.") -> Path:
    folder = Path(root, ".agents", "skills", name)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(f"---\nname: {name}\ndescription: How to deploy this app\n---\n{body}\n")
    return path


def git(cwd: str | Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True
    )


def hostile_repository(workspace: str, marker: Path) -> None:
    """A repository whose own config names a program git runs by itself (core.fsmonitor)."""
    git(workspace, "init", "-q")
    script = Path(workspace, "monitor.sh")
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    script.chmod(0o755)
    git(workspace, "config", "core.fsmonitor", str(script))


def permission_requests(client) -> list[dict[str, Any]]:
    return [r.params for r in client.agent_requests if r.method == "session/request_permission"]


def trust_questions(client) -> list[dict[str, Any]]:
    return [p for p in permission_requests(client) if p["toolCall"]["title"].startswith("Trust ")]


def command_names(client, session_id: str) -> list[str]:
    listings = [
        u["availableCommands"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "available_commands_update"
    ]
    return [entry["name"] for entry in listings[-1]] if listings else []


def wait_commands(client, session_id: str, present: str, here: bool = True) -> None:
    """Until the session's command list holds `present` (or, `here=False`, does not)."""
    client.wait_for_update(
        lambda u: (
            u["sessionUpdate"] == "available_commands_update"
            and (present in [c["name"] for c in u["availableCommands"]]) is here
        ),
        session_id=session_id,
    )


def said(result: dict[str, Any]) -> str:
    return "".join(
        u["content"]["text"]
        for u in result["updates"]
        if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["type"] == "text"
    )


def system_of(fake_llm, index: int = -1) -> str:
    return fake_llm.requests[index].body["messages"][0]["content"]


def trust_meta(client, session_id: str) -> dict[str, Any]:
    return client.session_results[session_id]["_meta"]["workspace_trust"]


def stop(client) -> None:
    client.close_stdin()
    assert client.wait_exit(10) == 0


# -- a fresh clone stays inert until trusted, each of the three ------------------------------


def fresh_clone(workspace: str, tmp_path: Path, *make: Any) -> None:
    """`workspace` becomes a fresh `git clone` of a repository that `make` fills."""
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q")
    for fill in make:
        fill(str(origin))
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qm", "init")
    git(tmp_path, "clone", "-q", str(origin), workspace)


@needs_git
def test_project_commands_stay_inert_until_trusted(heron, fake_llm, workspace, tmp_path):
    fresh_clone(workspace, tmp_path, with_command)
    fake_llm.script(text("a"), text("Reviewed."))
    client = heron()
    client.permission = "reject_once"
    session_id = client.new_session(workspace)
    assert trust_meta(client, session_id)["status"] == "untrusted"
    client.prompt(session_id, "/review")  # not a command here: it goes to the model as typed
    assert fake_llm.requests[0].body["messages"][-1]["content"] == "/review"
    assert "review" not in command_names(client, session_id)

    client.permission = "allow_once"
    client.prompt(session_id, "/trust")
    wait_commands(client, session_id, "review")
    client.prompt(session_id, "/review")
    assert fake_llm.requests[-1].body["messages"][-1]["content"] == "Review the project."


@needs_git
def test_a_project_skill_stays_inert_until_trusted(heron, fake_llm, workspace, tmp_path):
    fresh_clone(workspace, tmp_path, with_skill)
    fake_llm.script(text("a"), text("b"))
    client = heron()
    client.permission = "reject_once"
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    assert "deploy" not in system_of(fake_llm)
    assert "skill" not in [t["function"]["name"] for t in fake_llm.requests[0].body["tools"]]
    assert "deploy" not in command_names(client, session_id)

    client.permission = "allow_once"
    client.prompt(session_id, "/trust")
    client.prompt(session_id, "hi again")
    assert "- deploy: How to deploy this app" in system_of(fake_llm)
    assert "skill" in [t["function"]["name"] for t in fake_llm.requests[-1].body["tools"]]
    client.round_trip()
    assert "deploy" in command_names(client, session_id)


@needs_git
def test_a_hostile_git_config_stays_inert_until_trusted(heron, fake_llm, workspace, tmp_path):
    marker = tmp_path / "fsmonitor-ran"
    hostile_repository(workspace, marker)
    status = tool_calls(Call("bash", {"command": "git status --short"}))
    fake_llm.script(status, text("a"), status, text("b"))
    client = heron("--mode", "full-access")
    client.permission = "reject_once"
    session_id = client.new_session(workspace)
    assert ".git/config" in trust_meta(client, session_id)["details"]["ignoredFiles"]
    client.prompt(session_id, "status?")
    [question] = trust_questions(client)
    assert "core.fsmonitor" in question["toolCall"]["title"]
    assert not marker.exists()  # git ran, its fsmonitor program did not

    client.permission = "allow_once"
    client.prompt(session_id, "/trust")
    client.prompt(session_id, "status again?")
    assert marker.exists()  # trusted: git runs what the repository's config names


# -- trust through session/request_permission, each option -----------------------------------


@pytest.mark.parametrize("choice", ["allow_once", "allow_always", "reject_once", "reject_always"])
def test_the_question_and_each_answer(heron, fake_llm, workspace, heron_home, choice):
    with_command(workspace)
    fake_llm.script(text("a"), text("b"))
    client = heron()
    client.permission = choice
    session_id = client.new_session(workspace)
    meta = trust_meta(client, session_id)
    assert meta == {
        "status": "untrusted",
        "details": {
            "cwd": workspace,
            "repoRoot": None,
            "ignoredFiles": [".heron/commands/review.md"],
            "availableDecisions": [],
        },
    }
    turn = client.prompt(session_id, "hi")
    [question] = permission_requests(client)
    assert [o["kind"] for o in question["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    call = question["toolCall"]
    assert call["title"].startswith(f"Trust {os.path.realpath(workspace)}?")
    assert "1 command file" in call["title"]
    assert ".heron/commands/review.md" in call["content"][0]["content"]["text"]
    # The question is a tool call the turn shows, started before it was asked and ended.
    statuses = [u.get("status") for u in turn["updates"] if "toolCallId" in u]
    assert statuses[0] == "pending" and statuses[-1] == "completed"
    trusted = choice.startswith("allow")
    client.round_trip()
    assert ("review" in command_names(client, session_id)) is trusted
    client.prompt(session_id, "again")
    assert len(permission_requests(client)) == 1  # asked once a session

    folder = os.path.realpath(workspace)
    stored = remembered(heron_home)
    if choice.endswith("always"):
        assert stored["trusted" if trusted else "untrusted"] == [folder]
    else:
        assert not stored  # "this session" is not remembered in the config
    second = client.new_session(workspace)
    expected = {"allow_always": "trusted", "reject_always": "untrusted"}.get(choice, "untrusted")
    assert trust_meta(client, second)["status"] == expected
    fake_llm.script(text("c"))
    client.prompt(second, "hi")
    asked_again = len(permission_requests(client)) == 2
    assert asked_again is choice.endswith("once")


def test_a_decision_is_remembered_across_processes_and_revoked_by_trust(
    heron, fake_llm, workspace, heron_home
):
    with_command(workspace)
    fake_llm.script(text("a"))
    first = heron()
    first.permission = "allow_always"
    first.prompt(first.new_session(workspace), "hi")
    stop(first)

    second = heron()
    session_id = second.new_session(workspace)
    assert trust_meta(second, session_id) == {"status": "trusted", "details": None}
    wait_commands(second, session_id, "review")
    fake_llm.script(text("b"))
    second.prompt(session_id, "hi")
    assert permission_requests(second) == []  # decided: not asked

    turn = second.prompt(session_id, "/trust never")
    assert "stays inert from now on" in said(turn)
    wait_commands(second, session_id, "review", here=False)
    assert remembered(heron_home)["untrusted"] == [os.path.realpath(workspace)]
    stop(second)

    third = heron()
    session_id = third.new_session(workspace)
    assert trust_meta(third, session_id)["status"] == "untrusted"
    fake_llm.script(text("c"))
    third.prompt(session_id, "hi")
    assert permission_requests(third) == []  # kept inert on purpose: not asked again
    assert "review" not in command_names(third, session_id)


def test_trust_shows_the_state_and_asks(heron, fake_llm, workspace):
    with_command(workspace)
    client = heron()
    client.permission = "reject_always"
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "/trust")
    text_shown = said(turn)
    assert "is not trusted: nobody has decided yet" in text_shown
    assert "`.heron/commands/review.md`" in text_shown
    assert len(trust_questions(client)) == 1
    turn = client.prompt(session_id, "/trust")
    assert "is kept inert (remembered in `~/.config/heron/trusted-folders.toml`)" in said(turn)
    options = trust_questions(client)[-1]["options"]
    assert [o["name"] for o in options if o["name"].endswith("(as now)")] == [
        "Keep it inert from now on (as now)"
    ]
    turn = client.prompt(session_id, "/trust maybe")
    assert "Unknown choice" in said(turn) and len(trust_questions(client)) == 2
    assert fake_llm.requests == []  # none of it asks the model


def test_trust_for_this_session_is_saved_with_the_session(heron, fake_llm, workspace):
    with_command(workspace)
    fake_llm.script(text("a"))
    first = heron()
    session_id = first.new_session(workspace)
    first.prompt(session_id, "hi")  # the harness answers allow_once: this session only
    stop(first)

    second = heron()
    result = second.request(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    assert result["_meta"]["workspace_trust"] == {"status": "session", "details": None}
    assert "review" in command_names(second, session_id)
    other = second.new_session(workspace)  # another session is not trusted by it
    assert trust_meta(second, other)["status"] == "untrusted"


def test_a_parent_covers_its_subfolders_links_lead_and_a_moved_folder_is_new(
    heron, fake_llm, workspace, heron_home, tmp_path
):
    parent = tmp_path / "src"
    project = parent / "app"
    project.mkdir(parents=True)
    with_command(str(project))
    link = tmp_path / "link-to-app"
    link.symlink_to(project)
    trust_folder(heron_home, parent)
    client = heron()
    for path in (project, link):
        session_id = client.new_session(str(path))
        assert trust_meta(client, session_id)["status"] == "trusted"
    trust_folder(heron_home, project / "inner", trusted=False)  # the nearest decision wins
    (project / "inner").mkdir()
    with_command(str(project / "inner"))
    assert trust_meta(client, client.new_session(str(project / "inner")))["status"] == "untrusted"

    moved = tmp_path / "elsewhere"
    project.rename(moved)
    assert trust_meta(client, client.new_session(str(moved)))["status"] == "untrusted"


def test_rules_of_an_untrusted_folder_are_read_and_marked(heron, fake_llm, workspace):
    Path(workspace, "AGENTS.md").write_text("Use tabs.")
    with_command(workspace)
    fake_llm.script(text("a"), text("b"))
    client = heron()
    client.permission = "reject_once"
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    system = system_of(fake_llm)
    assert "Use tabs." in system
    assert "Project instructions from an untrusted folder" in system
    assert "cannot widen permissions" in system

    client.permission = "allow_once"
    client.prompt(session_id, "/trust")
    client.prompt(session_id, "hi")
    system = system_of(fake_llm)
    assert "Use tabs." in system and "untrusted folder" not in system


def test_a_broken_trust_file_means_untrusted_and_is_not_written_over(
    heron, fake_llm, workspace, heron_home
):
    with_command(workspace)
    path = trust_file(heron_home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("trusted = [unclosed\n")
    client = heron()
    session_id = client.new_session(workspace)
    assert trust_meta(client, session_id)["status"] == "untrusted"
    turn = client.prompt(session_id, "/trust always")
    assert "could not be remembered" in said(turn) and "for this session only" in said(turn)
    assert path.read_text() == "trusted = [unclosed\n"
    wait_commands(client, session_id, "review")
    assert "cannot read" in client.stderr


def test_the_question_comes_at_the_first_use_of_an_inert_command(heron, fake_llm, workspace):
    fake_llm.script(text("a"), text("Reviewed."))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    assert permission_requests(client) == []  # nothing inert: nothing to ask
    with_command(workspace)  # a command file arrives later (a pull, the model)
    client.prompt(session_id, "/review")  # the harness answers allow_once
    assert len(trust_questions(client)) == 1
    assert fake_llm.requests[-1].body["messages"][-1]["content"] == "Review the project."


def test_cancelling_the_question_ends_the_turn_and_decides_nothing(heron, fake_llm, workspace):
    with_command(workspace)
    client = heron()
    client.permission = "cancelled"
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "hi")["stopReason"] == "cancelled"
    assert fake_llm.requests == []
    assert "review" not in command_names(client, session_id)


# -- git: what a command outside the sandbox may run from the repository ----------------------


def planted_hook(workspace: str, marker: Path) -> dict[str, Any]:
    # Made executable by copying one (Landlock alone's seccomp refuses chmod), then rewritten.
    hook = f"printf '#!/bin/sh\\necho hook >> {marker}\\n' > .git/hooks/pre-commit"
    return {"command": f"cp /bin/sh .git/hooks/pre-commit && {hook}"}


@needs_git
@pytest.mark.parametrize("trusted", [False, True])
def test_a_hook_planted_by_a_sandboxed_command_is_not_run_by_a_later_commit(
    heron, fake_llm, workspace, heron_home, tmp_path, trusted
):
    # Landlock alone: the one path where a sandboxed command can write `.git/` (namespaces
    # mount it read-only, and the plant fails there: tests/test_sandbox_attacks_e2e.py).
    if abi_version() < 6:
        pytest.skip("Landlock alone confines commands from ABI 6 only")
    git(workspace, "init", "-q")
    git(workspace, "config", "user.email", "t@example.com")
    git(workspace, "config", "user.name", "T")
    Path(workspace, "a.txt").write_text("a\n")
    if trusted:
        trust_folder(heron_home, workspace)
    marker = tmp_path / "hook-ran"
    commit = {"command": "git add a.txt && git commit -qm first", "sandbox": False}
    fake_llm.script(
        tool_calls(Call("bash", planted_hook(workspace, marker), id="plant")),
        tool_calls(Call("bash", commit, id="commit")),
        text("Committed."),
    )
    client = heron("--mode", "auto", env={"HERON_SANDBOX": "landlock"})
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "commit it")
    assert turn["stopReason"] == "end_turn"
    results = {
        m["tool_call_id"]: m["content"]
        for m in fake_llm.requests[-1].body["messages"]
        if m["role"] == "tool"
    }
    assert "changed" in results["plant"] and ".git/hooks/pre-commit" in results["plant"]
    assert "Exit code 0" in results["commit"], results["commit"]
    assert Path(workspace, ".git", "hooks", "pre-commit").exists()
    assert not marker.exists()  # the commit ran (asked), the planted hook did not
    assert git(workspace, "log", "--oneline").stdout.strip()

    if trusted:  # the user confirms: the repository's hooks run again
        client.prompt(session_id, "/trust session")
        Path(workspace, "a.txt").write_text("b\n")
        fake_llm.script(tool_calls(Call("bash", commit, id="again")), text("Done."))
        client.prompt(session_id, "commit again")
        assert marker.exists()
