"""Issue 28 §3 through the real `heron`: the model asks the user (`ask_user`). A form
(`elicitation/create`) for clients that show forms, permission questions for the others,
nobody to ask in `heron exec`; a cancel or a client error never leaves it hanging; an MCP
server's elicitation goes to the client the same way."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from acp_client import RpcError
from conftest import _heron_executable, heron_env
from fake_openai import Call, text, tool_calls

FORMS: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "elicitation": {"form": {}},
}
QUESTIONS = {
    "questions": [
        {"question": "Which indentation?", "options": [{"label": "tabs"}, {"label": "spaces"}]},
        {
            "question": "Which files?",
            "options": [{"label": "a.py"}, {"label": "b.py"}, {"label": "c.py"}],
            "multi_select": True,
        },
    ]
}


def asked(**arguments: Any) -> Any:
    return tool_calls(Call("ask_user", arguments or QUESTIONS, id="q1"))


def tool_result(fake_llm: Any) -> str:
    return fake_llm.requests[1].body["messages"][-1]["content"]


def test_a_form_client_gets_one_form_linked_to_the_call(heron, fake_llm, workspace):
    fake_llm.script(asked(), text("Tabs it is."))
    client = heron(client_capabilities=FORMS)
    forms: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        forms.append(params)
        content = {"q1": "tabs", "q2": ["a.py", "c.py"], "q2_other": "and the tests"}
        return {"action": "accept", "content": content}

    client.handlers["elicitation/create"] = answer
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "Reformat")
    assert turn["stopReason"] == "end_turn"
    (form,) = forms
    call = next(u for u in turn["updates"] if u["sessionUpdate"] == "tool_call")
    assert form["toolCallId"] == call["toolCallId"] and form["mode"] == "form"
    assert call["name"] == "ask_user" and call["kind"] == "other"
    properties = form["requestedSchema"]["properties"]
    assert properties["q1"]["oneOf"] == [
        {"const": "tabs", "title": "tabs"},
        {"const": "spaces", "title": "spaces"},
    ]
    assert properties["q2"]["type"] == "array"
    assert [o["const"] for o in properties["q2"]["items"]["anyOf"]] == ["a.py", "b.py", "c.py"]
    assert properties["q1_other"]["type"] == "string"
    result = tool_result(fake_llm)
    assert "Which indentation?\n→ tabs" in result
    assert "a.py; c.py; (in their own words) and the tests" in result
    done = [u for u in turn["updates"] if u.get("status") == "completed"]
    assert [u["toolCallId"] for u in done] == [call["toolCallId"]]
    assert not [r for r in client.agent_requests if r.method == "session/request_permission"]


def test_a_declined_form_goes_to_the_model_as_such(heron, fake_llm, workspace):
    fake_llm.script(asked(), text("I will decide."))
    client = heron(client_capabilities=FORMS)
    client.handlers["elicitation/create"] = lambda params: {"action": "decline"}
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "Reformat")["stopReason"] == "end_turn"
    assert tool_result(fake_llm) == "The user declined to answer."


def test_a_client_without_forms_gets_one_permission_question_per_question(
    heron, fake_llm, workspace
):
    fake_llm.script(asked(), text("Fine."))
    client = heron()  # no elicitation capability
    picks = iter(["choice-1", "choice-2"])

    def pick(params: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": "selected", "optionId": next(picks)}

    client.permission = pick
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "Reformat")["stopReason"] == "end_turn"
    questions = [
        r.params for r in client.agent_requests if r.method == "session/request_permission"
    ]
    assert [q["toolCall"]["title"] for q in questions] == ["Which indentation?", "Which files?"]
    assert [o["kind"] for o in questions[0]["options"]] == [
        "allow_once",
        "allow_once",
        "reject_once",
    ]
    assert [o["name"] for o in questions[0]["options"][:2]] == ["tabs", "spaces"]
    result = tool_result(fake_llm)
    assert "Which indentation?\n→ spaces" in result and "Which files?\n→ c.py" in result
    assert not [r for r in client.agent_requests if r.method == "elicitation/create"]


def test_a_question_the_user_cancels_ends_the_turn_without_hanging(heron, fake_llm, workspace):
    fake_llm.script(asked())
    client = heron(client_capabilities=FORMS)
    opened, release = threading.Event(), threading.Event()

    def wait(params: dict[str, Any]) -> dict[str, Any]:
        opened.set()
        release.wait(60)
        return {"action": "cancel"}

    client.handlers["elicitation/create"] = wait
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "Reformat")
    assert opened.wait(30)
    client.cancel(session_id)
    assert pending.result(30) == {"stopReason": "cancelled"}
    failed = [u for u in pending.updates() if u.get("status") == "failed"]
    assert len(failed) == 1
    # The form was withdrawn with $/cancel_request.
    withdrawn = [n for n in client.notifications if n.get("method") == "$/cancel_request"]
    form_id = next(r.id for r in client.agent_requests if r.method == "elicitation/create")
    assert [n["params"]["requestId"] for n in withdrawn] == [form_id]
    release.set()
    assert len(fake_llm.requests) == 1


def test_the_user_dismissing_a_form_is_an_answer_too(heron, fake_llm, workspace):
    fake_llm.script(asked(), text("Going on."))
    client = heron(client_capabilities=FORMS)
    client.handlers["elicitation/create"] = lambda params: {"action": "cancel"}
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "Reformat")["stopReason"] == "end_turn"
    assert "dismissed" in tool_result(fake_llm)


def test_a_client_error_fails_the_call_with_its_reason(heron, fake_llm, workspace):
    fake_llm.script(asked(), text("Going on."))
    client = heron(client_capabilities=FORMS)

    def broken(params: dict[str, Any]) -> Any:
        raise RpcError(-32603, "Internal error", {"details": "the form cannot be shown"})

    client.handlers["elicitation/create"] = broken
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "Reformat")
    failed = [u for u in turn["updates"] if u.get("status") == "failed"]
    assert len(failed) == 1
    assert "the form cannot be shown" in failed[0]["content"][0]["content"]["text"]
    assert "the form cannot be shown" in tool_result(fake_llm)


def test_in_heron_exec_nobody_is_asked(fake_llm, workspace, heron_home):
    fake_llm.script(asked(), text("Assumed tabs."))
    done = subprocess.run(
        [_heron_executable(), "exec", "--cwd", workspace, "Reformat"],
        input="",
        capture_output=True,
        text=True,
        env=heron_env(fake_llm, heron_home, None),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Assumed tabs." in done.stdout
    assert "No user is available" in tool_result(fake_llm)


ELICITING_SERVER = """
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("asker")

class Pick(BaseModel):
    colour: str

@server.tool()
async def choose(ctx: Context) -> str:
    answer = await ctx.elicit("Which colour?", Pick)
    data = getattr(answer, "data", None)
    return f"{answer.action}:{data.colour if data else ''}"

server.run()
"""


def mcp_server(tmp: Path) -> dict[str, Any]:
    script = tmp / "asker.py"
    script.write_text(ELICITING_SERVER)
    return {"name": "asker", "command": sys.executable, "args": [str(script)], "env": []}


def test_an_mcp_servers_elicitation_goes_to_the_client_as_a_form(
    heron, fake_llm, workspace, tmp_path
):
    fake_llm.script(tool_calls(Call("mcp__asker__choose", {}, id="m1")), text("Blue."))
    client = heron("--mode", "full-access", client_capabilities=FORMS)
    forms: list[dict[str, Any]] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        forms.append(params)
        return {"action": "accept", "content": {"colour": "blue"}}

    client.handlers["elicitation/create"] = answer
    session_id = client.new_session(workspace, [mcp_server(tmp_path)])
    turn = client.prompt(session_id, "Pick a colour", timeout=60)
    assert turn["stopReason"] == "end_turn"
    (form,) = forms
    assert form["toolCallId"] == "m1" and "Which colour?" in form["message"]
    assert "colour" in form["requestedSchema"]["properties"]
    assert "accept:blue" in json.dumps(fake_llm.requests[1].body["messages"][-1])


def test_without_forms_an_mcp_elicitation_is_declined_with_a_reason(
    heron, fake_llm, workspace, tmp_path
):
    fake_llm.script(tool_calls(Call("mcp__asker__choose", {}, id="m1")), text("None."))
    client = heron("--mode", "full-access")
    session_id = client.new_session(workspace, [mcp_server(tmp_path)])
    assert client.prompt(session_id, "Pick a colour", timeout=60)["stopReason"] == "end_turn"
    assert "decline" in json.dumps(fake_llm.requests[1].body["messages"][-1])
    assert not [r for r in client.agent_requests if r.method == "elicitation/create"]


def test_an_mcp_form_is_rebuilt_into_what_acp_can_carry():
    """A server's form goes out schema-valid whatever it holds: unknown keys dropped, values of
    the wrong type left out, a field ACP has no type for refuses the whole form."""
    from acp_schema import validate_client_payload

    from agent.questions.forward import acp_form

    hostile = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": "x", "format": "ftp", "x-evil": 1, "title": 5},
            "age": {"type": "integer", "minimum": 1.5, "maximum": 99, "default": "old"},
            "ok": {"type": "boolean", "default": "yes"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": -1},
            "pick": {"type": "string", "oneOf": [{"const": "a", "title": "A", "extra": 1}]},
        },
        "required": ["name", "missing", 7],
    }
    form = acp_form(hostile)
    assert form is not None
    assert validate_client_payload("ElicitationSchema", form) == []
    assert form["properties"]["name"] == {"type": "string"}
    assert form["properties"]["age"] == {"type": "integer", "maximum": 99}
    assert form["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["a", "b"]},
    }
    assert "oneOf" not in form["properties"]["pick"]
    assert form["required"] == ["name"]
    assert acp_form({"properties": {"f": {"type": "object"}}}) is None
    assert acp_form({"properties": {}}) is None
    assert acp_form("nonsense") is None
