"""Rules files, end to end: the user's own instructions first, then the project's from the
repository's root down to the working directory (AGENTS.md, else the other agents' names),
nearest last; `/rules` says what is in force and what was skipped; and the system prompt stays
the same byte for byte between the requests of a session, except once when the user changes
the trust.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

from fake_openai import Call, text, tool_calls


def system_of(fake_llm, index: int = -1) -> str:
    return fake_llm.requests[index].body["messages"][0]["content"]


def said(result) -> str:
    return "".join(
        u["content"]["text"]
        for u in result["updates"]
        if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["type"] == "text"
    )


def nested_project(workspace: str) -> Path:
    """A repository whose root, a package and a folder in it each have a rules file."""
    root = Path(workspace)
    (root / ".git").mkdir()
    deep = root / "pkg" / "deep"
    deep.mkdir(parents=True)
    (root / "AGENTS.md").write_text("Root rules.")
    (root / "pkg" / "CLAUDE.md").write_text("Package rules (Claude's name).")
    (root / "pkg" / "GEMINI.md").write_text("Not read: CLAUDE.md comes first.")
    (deep / "AGENTS.md").write_text("Deep rules.")
    (deep / "CLAUDE.md").write_text("Not read: AGENTS.md is there.")
    return deep


def test_nested_rules_from_the_root_down_after_the_users_own(
    heron, fake_llm, workspace, heron_home
):
    deep = nested_project(workspace)
    user = heron_home / ".config" / "heron" / "AGENTS.md"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text("My own rules, everywhere.")
    fake_llm.script(text("ok"))
    client = heron()
    client.prompt(client.new_session(str(deep)), "hi")
    system = system_of(fake_llm)
    order = [
        "<~/.config/heron/AGENTS.md>\nMy own rules, everywhere.",
        "<AGENTS.md>\nRoot rules.",
        "<pkg/CLAUDE.md>\nPackage rules (Claude's name).",
        "<pkg/deep/AGENTS.md>\nDeep rules.",
    ]
    positions = [system.find(part) for part in order]
    assert -1 not in positions, system
    assert positions == sorted(positions)  # the nearest comes last
    assert "Not read" not in system


def test_rules_shows_the_files_in_force_and_why_any_were_skipped(heron, fake_llm, workspace):
    deep = nested_project(workspace)
    (deep / "AGENTS.md").unlink()
    os.mkfifo(deep / "AGENTS.md")  # never opened: it would block
    client = heron()
    shown = said(client.prompt(client.new_session(str(deep)), "/rules"))
    assert "- `AGENTS.md` (the project's, marked as from an untrusted folder" in shown
    assert "- `pkg/CLAUDE.md`" in shown
    assert "- skipped `pkg/deep/AGENTS.md`: " in shown and "FIFO" in shown
    assert "- `pkg/deep/CLAUDE.md`" in shown  # the next name in that folder instead
    assert "Skills" in shown and "none" in shown
    assert fake_llm.requests == []


def test_the_system_prompt_stays_the_same_except_once_when_trust_changes(
    heron, fake_llm, workspace
):
    Path(workspace, "AGENTS.md").write_text("Use tabs.")
    Path(workspace, "a.txt").write_text("alpha\n")
    read = tool_calls(Call("read_file", {"path": "a.txt"}))
    fake_llm.script(read, text("ok"), read, text("ok"), text("The summary."), text("three"))
    fake_llm.script(text("after trust"), text("still"))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "one")
    Path(workspace, "AGENTS.md").write_text("Use spaces.")  # read again in a new session only
    client.prompt(session_id, "two")
    client.prompt(session_id, "/compact")  # not even a compaction re-reads it
    client.prompt(session_id, "three")
    turns = [r for r in fake_llm.requests if "You are Heron" in r.body["messages"][0]["content"]]
    before = {r.body["messages"][0]["content"] for r in turns}  # the summary request aside
    assert len(turns) == 5 and len(before) == 1 and "Use tabs." in before.pop()

    client.prompt(session_id, "/trust session")
    client.prompt(session_id, "four")
    client.prompt(session_id, "five")
    after = [system_of(fake_llm, i) for i in range(-2, 0)]
    assert after[0] == after[1]  # one change, then stable again
    assert "untrusted folder" not in after[0] and "Use spaces." in after[0]
    turns = [r for r in fake_llm.requests if "You are Heron" in r.body["messages"][0]["content"]]
    assert len({json.dumps(r.body.get("tools")) for r in turns}) == 1


def test_each_request_starts_with_the_previous_one_with_skills_and_rules(
    heron, fake_llm, workspace, heron_home
):
    Path(workspace, "AGENTS.md").write_text("Use tabs.\n")
    skills = heron_home / ".agents" / "skills" / "tidy"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: tidy\ndescription: Tidy up\n---\nTidy.\n")
    for i in range(3):
        fake_llm.script(tool_calls(Call("skill", {"name": "tidy"})), text(f"answer {i}"))
    client = heron("--mode", "full-access")
    session_id = client.new_session(workspace)
    for i in range(3):
        assert client.prompt(session_id, f"question {i}")["stopReason"] == "end_turn"
    bodies = [r.body for r in fake_llm.requests]
    for previous, current in itertools.pairwise(bodies):
        before = [json.dumps(m) for m in previous["messages"]]
        after = [json.dumps(m) for m in current["messages"]]
        assert after[: len(before)] == before
        assert json.dumps(previous.get("tools")) == json.dumps(current.get("tools"))
