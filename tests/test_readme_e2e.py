"""The README's "Talking to it by hand" section, typed in as written: the three requests, then
the permission answer it shows. If the README drifts from what Heron accepts, this fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fake_openai import Call, text, tool_calls

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
