"""Small local models, as they really behave (issue 27), end to end against the fake configured
like llama.cpp's server (tests/fake_local.py): a chat template that demands alternating roles,
a window it refuses longer requests over, a model that writes on after its tool call until the
token limit.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import Call, error, silent, text, tool_calls

UNANSWERED = "[No answer: the user cancelled this request before it was answered.]"
FAILED = "[No answer: the request to the model failed before it was answered.]"


def roles(request: Any) -> list[str]:
    return [m["role"] for m in request.body["messages"]]


def chunks(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def statuses(updates: list[dict[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for u in updates:
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u:
            found[u["toolCallId"]] = u["status"]
    return found


def is_summary(request: Any) -> bool:
    return "You summarize a coding session" in request.body["messages"][0]["content"]


def starts_with(current: Any, previous: Any) -> bool:
    before = [json.dumps(m) for m in previous.body["messages"]]
    return [json.dumps(m) for m in current.body["messages"]][: len(before)] == before


# ------------------------------------------------------------- 1. a turn that produced no answer


@pytest.mark.parametrize("mode", ["native", "text"])
def test_a_turn_cancelled_before_the_first_token_keeps_the_roles_alternating(
    heron, fake_llm, workspace, mode
):
    """Gemma's template refuses two user messages in a row, for every later request: the
    cancelled request gets a noted answer, and the next request extends the last one."""
    Path(workspace, "a.txt").write_text("alpha\n")
    fake_llm.alternation = True
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "a.txt"})),
        text("read it"),
        silent(),  # the slow local server: the user cancels before the first token
        text("here it is"),
        text("and again"),
    )
    client = heron("--tool-calls", mode, "--mode", "full-access")
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "read a.txt")["stopReason"] == "end_turn"
    pending = client.prompt_async(session_id, "now something slow")
    fake_llm.wait_for_requests(3)
    client.cancel(session_id)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}
    turn = client.prompt(session_id, "try that again")
    assert turn["stopReason"] == "end_turn", turn
    assert "here it is" in chunks(turn["updates"])
    assert client.prompt(session_id, "once more")["stopReason"] == "end_turn"
    requests = fake_llm.requests
    assert all(r.status == 200 for r in requests)  # the fake refused nothing
    cancelled, after = requests[2], requests[3]
    assert starts_with(after, cancelled)
    assert after.body["messages"][len(cancelled.body["messages"])] == {
        "role": "assistant",
        "content": UNANSWERED,
    }
    assert after.body["messages"][-1]["content"] == "try that again"
    assert starts_with(requests[4], after)


def test_a_failed_request_keeps_the_roles_alternating(heron, fake_llm, workspace):
    fake_llm.alternation = True
    fake_llm.script(text("hello"), error(400, "The model is loading, try later."), text("ok"))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    with pytest.raises(RpcError):
        client.prompt(session_id, "a question")
    assert client.prompt(session_id, "the question again")["stopReason"] == "end_turn"
    last = fake_llm.requests[-1]
    assert last.status == 200
    assert roles(last) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last.body["messages"][4]["content"] == FAILED


def test_a_session_saved_with_two_user_messages_in_a_row_is_sent_alternating(
    heron, fake_llm, workspace, heron_home
):
    """A history saved before the turns noted their missing answers (or by a process killed
    mid-request): the two requests go as one user message."""
    fake_llm.alternation = True
    fake_llm.script(text("hello"), silent(), text("answered"))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "first")
    client.prompt_async(session_id, "second")
    fake_llm.wait_for_requests(2)
    client.kill()  # killed mid-request: the history ends with the user's message
    client = heron()
    client.request("session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []})
    assert client.prompt(session_id, "third")["stopReason"] == "end_turn"
    last = fake_llm.requests[-1]
    assert last.status == 200
    assert roles(last) == ["system", "user", "assistant", "user"]
    assert last.body["messages"][-1]["content"] == "second\n\nthird"


def test_after_compaction_the_summary_and_the_request_are_one_user_message(
    heron, fake_llm, workspace
):
    fake_llm.alternation = True
    fake_llm.script(
        text("noted " * 300),
        text("noted again " * 300),
        text("SUMMARY: the user noted things."),
        text("done"),
    )
    client = heron("--context-window", "4000")
    session_id = client.new_session(workspace)
    client.prompt(session_id, "remember this: " + "alpha " * 300)
    client.prompt(session_id, "and this: " + "beta " * 300)
    turn = client.prompt(session_id, "what now?")
    assert turn["stopReason"] == "end_turn", turn
    assert any(is_summary(r) for r in fake_llm.requests)
    last = fake_llm.requests[-1]
    assert last.status == 200 and not is_summary(last)
    assert "SUMMARY: the user noted things." in json.dumps(last.body["messages"])
    for a, b in itertools.pairwise(last.body["messages"][1:]):
        assert a["role"] != b["role"], roles(last)


def test_after_slash_compact_the_next_request_alternates(heron, fake_llm, workspace):
    fake_llm.alternation = True
    fake_llm.script(text("hello"), text("SUMMARY: we said hello."), text("ok"))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    client.prompt(session_id, "/compact")
    assert client.prompt(session_id, "go on")["stopReason"] == "end_turn"
    last = fake_llm.requests[-1]
    assert last.status == 200
    assert roles(last) == ["system", "user"]
    assert last.body["messages"][1]["content"].endswith("SUMMARY: we said hello.\n\ngo on")
