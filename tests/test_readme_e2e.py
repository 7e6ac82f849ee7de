"""The README's "Talking to it by hand" section, typed in as written: the three requests, then
the permission answer it shows. If the README drifts from what Heron accepts, this fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fake_openai import Call, text, tool_calls

from agent.config import ENV_VARS, FLAGS, Settings

README = Path(__file__).resolve().parent.parent / "README.md"


def by_hand_section() -> tuple[list[str], list[str], dict[str, object]]:
    """(the command line, the JSON lines typed in, the permission answer shown)."""
    section = README.read_text().split("## Talking to it by hand", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    typed = next(body for lang, body in blocks if lang == "sh").splitlines()
    answer = next(body for lang, body in blocks if lang == "json")
    command = typed[0].split()
    assert command[0] == "heron"
    return command[1:], [line for line in typed[1:] if line.startswith("{")], json.loads(answer)


def test_the_by_hand_section_works_as_written(heron, fake_llm, workspace):
    flags, lines, answer = by_hand_section()
    assert [json.loads(line)["method"] for line in lines] == [
        "initialize",
        "session/new",
        "session/prompt",
    ]
    fake_llm.script(
        tool_calls(Call("bash", {"command": "touch answered-by-hand"})), text("It is a demo.")
    )
    client = heron(*flags, initialize=False)
    asked: list[dict[str, object]] = []

    def answer_as_the_readme_shows(params: dict[str, object]) -> object:
        asked.append(params)
        return answer["result"]

    client.handlers["session/request_permission"] = answer_as_the_readme_shows
    client.send_raw(lines[0].encode() + b"\n")
    assert client.next_response_for(1)["result"]["protocolVersion"] == 1
    client.send_raw(lines[1].replace("/path/to/project", workspace).encode() + b"\n")
    session_id = client.next_response_for(2)["result"]["sessionId"]
    client.send_raw(lines[2].replace("<from id 2>", session_id).encode() + b"\n")
    assert client.next_response_for(3, timeout=30)["result"] == {"stopReason": "end_turn"}

    assert len(asked) == 1  # the question came, and the README's answer was taken
    offered = [option["optionId"] for option in asked[0]["options"]]  # type: ignore[index]
    assert answer["result"]["outcome"]["optionId"] in offered  # type: ignore[index]
    assert Path(workspace, "answered-by-hand").exists()


# ------------------------------------------------------------------ links and the quick start

DOCS = sorted((README.parent / "docs").glob("*.md"))


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation out, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_anchor(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_local_link_leads_somewhere(page: Path):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local or page != README, "the README links nowhere"
    for link in local:
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name}: {link} leads to a missing file"
        if anchor:
            assert anchor in _anchors(path), f"{page.name}: {link} names no heading"


def test_the_readme_links_every_page_of_docs():
    assert DOCS, "docs/ holds no page"
    text = README.read_text()
    for page in DOCS:
        assert f"(docs/{page.name})" in text, f"README does not link docs/{page.name}"


def test_the_contents_list_every_section():
    text = README.read_text()
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = re.findall(r"^## (.+)$", re.sub(r"```.*?```", "", text, flags=re.S), re.M)
    first_screen = {"Two commands", "Quick start in Zed", "Contents"}
    for section in sections:
        if section not in first_screen:
            assert _anchor(section) in listed, f"the contents miss {section!r}"


def _quick_starts() -> list[dict[str, object]]:
    section = README.read_text().split("## Quick start in Zed", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    return [json.loads(block)["agent_servers"]["Heron"] for block in blocks]


def test_the_quick_start_has_a_local_server_and_an_api_key():
    envs = [entry["env"] for entry in _quick_starts()]
    assert len(envs) == 2
    assert any("OPENAI_BASE_URL" in env and "OPENAI_API_KEY" not in env for env in envs)
    assert any("OPENAI_API_KEY" in env for env in envs)


@pytest.mark.parametrize("entry", _quick_starts(), ids=["local server", "api key"])
def test_the_quick_start_runs_as_zed_would_start_it(heron, fake_llm, workspace, entry):
    """Zed runs `command` with `args` and `env`: the model named there gets the prompt, with
    the key named there (a local server's URL points at the fake here)."""
    assert entry["type"] == "custom" and entry["command"] == "heron"
    env: dict[str, str | None] = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}
    env |= dict(entry["env"])  # type: ignore[arg-type]
    env["OPENAI_BASE_URL"] = fake_llm.base_url  # the local server's place, or the hosted API's
    fake_llm.script(text("Hello from the quick start."))
    client = heron(*entry["args"], env=env)  # type: ignore[misc]
    session = client.new_session(workspace)
    assert client.prompt(session, "hi")["stopReason"] == "end_turn"
    [request] = fake_llm.requests
    assert request.model == entry["env"]["HERON_MODEL"]  # type: ignore[index]
    key = entry["env"].get("OPENAI_API_KEY")  # type: ignore[union-attr]
    if key:
        auth = {k.lower(): v for k, v in request.headers.items()}.get("authorization")
        assert auth == f"Bearer {key}"


def test_the_configuration_table_matches_the_settings():
    section = README.read_text().split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| setting")
    ]
    fields = {f for f in Settings.__dataclass_fields__}
    assert len(rows) >= 10
    for _, flag, env, key, _ in rows:
        env = env.split(" ")[0].strip("`")
        key = key.split(" ")[0].strip("`")
        if flag != "—":
            assert flag.startswith("--") and flag[2:].replace("-", "_") in FLAGS, flag
        if key != "—":
            assert key in fields, key
            if env in ENV_VARS:
                assert ENV_VARS[env] == key, (env, key)
