"""Agent Skills, end to end: the real `heron` over its pipes, against the fake model.

Skills are read from the user's `~/.agents/skills/` and `~/.claude/skills/` (and a trusted
project's `.agents/skills/`, `.claude/skills/`); the system prompt lists their names and
descriptions (bounded), the model loads one with the `skill` tool, each is a slash command,
and a broken one is skipped with a reason, never breaking the session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import trust_folder
from fake_openai import Call, text, tool_calls


def skill(
    root: Path, name: str, front: str | None = None, body: str = "", folder: str = ""
) -> Path:
    path = root / (folder or name) / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    if front is None:
        front = f"name: {name}\ndescription: The {name} skill"
    path.write_text(f"---\n{front}\n---\n{body or f'Instructions of {name}.'}\n")
    return path


def user_skills(home: Path, folder: str = ".agents") -> Path:
    return home / folder / "skills"


def said(result: dict[str, Any]) -> str:
    return "".join(
        u["content"]["text"]
        for u in result["updates"]
        if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["type"] == "text"
    )


def listing(client, session_id: str) -> list[dict[str, Any]]:
    update = client.wait_for_update(
        lambda u: u["sessionUpdate"] == "available_commands_update", session_id=session_id
    )
    return update["availableCommands"]


def system_of(fake_llm, index: int = -1) -> str:
    return fake_llm.requests[index].body["messages"][0]["content"]


def tool_names(fake_llm, index: int = -1) -> list[str]:
    return [t["function"]["name"] for t in fake_llm.requests[index].body.get("tools", [])]


def tool_results(fake_llm) -> dict[str, str]:
    return {
        m["tool_call_id"]: m["content"]
        for m in fake_llm.requests[-1].body["messages"]
        if m["role"] == "tool"
    }


def test_skills_are_listed_loaded_and_run_as_commands(heron, fake_llm, workspace, heron_home):
    pdf = skill(
        user_skills(heron_home),
        "pdf",
        "name: pdf\ndescription: >\n  Fill PDF forms.\n  Use when: a form must be filled\n"
        "license: Apache-2.0\nmetadata:\n  author: me\n  version: '1.0'",
        body="Use pdftk to fill forms.",
    )
    lint = skill(user_skills(heron_home, ".claude"), "lint", body="Run scripts/check.py first.")
    (lint.parent / "scripts").mkdir()
    (lint.parent / "scripts" / "check.py").write_text("print('checked')\n")
    fake_llm.script(
        tool_calls(
            Call("skill", {"name": "lint"}, id="load"),
            Call("skill", {"name": "lint", "file": "scripts/check.py"}, id="file"),
            Call(
                "skill", {"name": "lint", "file": "../../../.agents/skills/pdf/SKILL.md"}, id="out"
            ),
            Call("skill", {"name": "nope"}, id="unknown"),
        ),
        text("Loaded."),
        text("Filled."),
    )
    client = heron("--mode", "read-only")  # loading a skill asks nothing, in every mode
    session_id = client.new_session(workspace)
    names = [entry["name"] for entry in listing(client, session_id)]
    assert names[-2:] == ["pdf", "lint"]  # after the built-ins
    entries = {entry["name"]: entry for entry in listing(client, session_id)}
    assert entries["pdf"]["description"] == "Fill PDF forms. Use when: a form must be filled"

    turn = client.prompt(session_id, "lint this")
    assert turn["stopReason"] == "end_turn"
    system = system_of(fake_llm, 0)
    assert "- pdf: Fill PDF forms. Use when: a form must be filled" in system
    assert "- lint: The lint skill" in system
    assert "Use pdftk" not in system  # the instructions are loaded on demand
    assert tool_names(fake_llm, 0)[-1] == "skill"
    results = tool_results(fake_llm)
    assert "Run scripts/check.py first." in results["load"]
    assert "- scripts/check.py" in results["load"] and str(lint.parent) in results["load"]
    assert "---" not in results["load"].split("\n", 1)[1]  # the front matter is left out
    assert results["file"] == "print('checked')\n"
    assert "leads out of the skill's folder" in results["out"]
    assert "There is no skill 'nope'" in results["unknown"] and "pdf, lint" in results["unknown"]
    assert [r.method for r in client.agent_requests] == []  # nothing was asked

    turn = client.prompt(session_id, "/pdf the tax form")
    request = fake_llm.requests[-1].body["messages"][-1]["content"]
    assert "Use pdftk to fill forms." in request and "the tax form" in request
    assert f'<skill name="pdf" folder="{pdf.parent}">' in request
    assert turn["stopReason"] == "end_turn"


def test_broken_skills_are_skipped_with_a_reason(heron, fake_llm, workspace, heron_home, tmp_path):
    root = user_skills(heron_home)
    skill(root, "good")
    skill(root, "nofront", front=None).write_text("Just text, no front matter.\n")
    skill(root, "noname", "description: no name here")
    skill(root, "nodesc", "name: nodesc")
    skill(root, "badyaml", "name: badyaml\ndescription: fine\nthis line is not yaml")
    skill(root, "spaces", "name: has spaces\ndescription: x")
    skill(root, "huge", body="x" * (200 * 1024))
    outside = tmp_path / "outside.md"
    outside.write_text("---\nname: escape\ndescription: from elsewhere\n---\nSecret.\n")
    (root / "escape").mkdir()
    (root / "escape" / "SKILL.md").symlink_to(outside)
    skill(user_skills(heron_home, ".claude"), "good", body="The second good.")
    skill(root, "help")  # a built-in command has the name: loadable, not a slash command
    (root / "notaskill").mkdir()  # a folder without SKILL.md is not a skill, not an error
    fake_llm.script(text("fine"))
    client = heron()
    session_id = client.new_session(workspace)
    names = [e["name"] for e in listing(client, session_id)]
    assert "good" in names and names.count("help") == 1
    turn = client.prompt(session_id, "/help")
    shown = said(turn)
    for where, why in [
        ("nofront", "no front matter"),
        ("noname", "no `name`"),
        ("nodesc", "no `description`"),
        ("badyaml", "cannot be read"),
        ("spaces", "cannot be a command name"),
        ("huge", "over 128 KB"),
        ("escape", "out of the skill's folder"),
    ]:
        assert f"skills/{where}/SKILL.md`: " in shown and why in shown, where
    assert "~/.claude/skills/good/SKILL.md`: the name `good` is taken by" in shown
    assert "`help` has no `/help`" in shown
    assert "notaskill" not in shown
    assert client.stderr.count("skipped:") >= 8  # one log line each
    client.prompt(session_id, "hi")
    system = system_of(fake_llm)
    assert "- good: The good skill" in system and "- help:" in system
    assert "Secret" not in system and "escape" not in system


def test_the_catalog_is_bounded_and_the_rest_said_to_exist(heron, fake_llm, workspace, heron_home):
    root = user_skills(heron_home)
    for n in range(45):
        skill(root, f"s{n:02d}", f"name: s{n:02d}\ndescription: {'d' * 900}")
    fake_llm.script(tool_calls(Call("skill", {"name": "*"}, id="all")), text("ok"))
    client = heron()
    client.prompt(client.new_session(workspace), "hi")
    system = system_of(fake_llm, 0)
    assert system.count("\n- s") == 40
    assert "\n- … and 5 more skills" in system
    assert len(system) < 40 * 320 + 8000  # descriptions cut at 300 characters
    assert "s44" in tool_results(fake_llm)["all"]


def test_project_skills_when_trusted_nearest_first_and_the_users_win(
    heron, fake_llm, workspace, heron_home
):
    repo = Path(workspace)
    (repo / ".git").mkdir()
    sub = repo / "pkg"
    skill(repo / ".agents" / "skills", "build", body="Root build.")
    skill(sub / ".claude" / "skills", "build", body="Package build.")
    skill(repo / ".agents" / "skills", "mine", body="The project's mine.")
    skill(user_skills(heron_home), "mine", body="My own.")
    trust_folder(heron_home, repo)
    fake_llm.script(
        tool_calls(
            Call("skill", {"name": "build"}, id="b"), Call("skill", {"name": "mine"}, id="m")
        ),
        text("ok"),
    )
    client = heron()
    session_id = client.new_session(str(sub))
    client.prompt(session_id, "build")
    results = tool_results(fake_llm)
    assert "Package build." in results["b"]  # the nearest folder's
    assert "My own." in results["m"]  # a repository cannot replace the user's skill
    shown = said(client.prompt(session_id, "/rules"))
    assert "skipped `" in shown and "the name `build` is taken" in shown
    assert "the name `mine` is taken by ~/.agents/skills/mine/SKILL.md" in shown


def test_skills_that_opt_out_of_the_model_or_of_the_command_list(
    heron, fake_llm, workspace, heron_home
):
    root = user_skills(heron_home)
    skill(root, "manual", "name: manual\ndescription: Only by hand\ndisable-model-invocation: true")
    skill(root, "auto", "name: auto\ndescription: Only by the model\nuser-invocable: false")
    fake_llm.script(text("a"), text("b"))
    client = heron()
    session_id = client.new_session(workspace)
    names = [e["name"] for e in listing(client, session_id)]
    assert "manual" in names and "auto" not in names
    client.prompt(session_id, "hi")
    system = system_of(fake_llm)
    assert "- auto: Only by the model" in system and "manual" not in system
    client.prompt(session_id, "/manual now")
    assert "Instructions of manual." in fake_llm.requests[-1].body["messages"][-1]["content"]


@pytest.mark.parametrize("mode", ["native", "text"])
def test_no_skills_no_tool_and_no_catalog(heron, fake_llm, workspace, mode):
    fake_llm.text_tool_calls = mode == "text"
    fake_llm.script(text("a"))
    client = heron()
    client.prompt(client.new_session(workspace), "hi")
    body = fake_llm.requests[0].body
    assert "Skills:" not in body["messages"][0]["content"]
    assert "skill" not in json.dumps(body.get("tools", []))
