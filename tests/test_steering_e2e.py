"""Issue 28 §2 through the real `heron`: `_session/steering` as codex-acp and claude-agent-acp
answer it. A message for the running turn waits for the turn's next boundary (after the tool
calls running, before the next model request), is shown as a user message of its own, and
reaches the model; without a turn the client is told to send a prompt; during a cancel it
fails with a reason; the running prompt still answers exactly once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import Call, text, tool_calls

STEER = "_session/steering"


def steer(client: Any, session_id: str, words: str, **extra: Any) -> Any:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": words}], **extra}
    return client.request_async(STEER, params)


def test_initialize_advertises_steering(heron):
    client = heron(initialize=False)
    answer = client.initialize()
    assert answer["_meta"]["steering"] == {"supported": True}


def test_with_no_turn_running_the_client_is_told_to_send_a_prompt(heron, fake_llm, workspace):
    client = heron()
    session_id = client.new_session(workspace)
    opted_in = {"_meta": {"steering": {"idleBehavior": "promptRequired"}}}
    for extra in ({}, opted_in):
        answer = steer(client, session_id, "use tabs", **extra).result()
        assert answer == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    client.round_trip()
    assert fake_llm.requests == []  # nothing was started on its own


@pytest.mark.parametrize(
    "params",
    [
        {"prompt": [{"type": "text", "text": "x"}]},
        {"sessionId": "S", "prompt": []},
        {
            "sessionId": "S",
            "prompt": [{"type": "text", "text": "x"}],
            "_meta": {"steering": {"idleBehavior": "queue"}},
        },
        {"sessionId": "sess_unknown", "prompt": [{"type": "text", "text": "x"}]},
    ],
)
def test_bad_steering_params_are_invalid_params(heron, workspace, params):
    client = heron()
    session_id = client.new_session(workspace)
    if params.get("sessionId") == "S":
        params = {**params, "sessionId": session_id}
    with pytest.raises(RpcError) as err:
        client.request(STEER, params)
    assert err.value.code == -32602


def test_two_steers_reach_the_model_in_order_at_the_next_boundary(heron, fake_llm, workspace):
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "a.txt", "content": "x\n"}, id="w1")),
        text("Noted both."),
    )
    client = heron()
    client.permission_gate = threading.Event()  # the write waits for the user's answer
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "Write a.txt")
    client.wait_for_agent_request("session/request_permission", timeout=30)
    first = steer(client, session_id, "use tabs")
    second = steer(client, session_id, "and a trailing newline")
    client.round_trip()
    # The tool call is still running: neither message is in yet.
    assert not first.done() and not second.done()
    assert len(fake_llm.requests) == 1
    client.permission_gate.set()
    assert first.result(30) == {"outcome": "injected"}
    assert second.result(30) == {"outcome": "injected"}
    assert pending.result(30) == {"stopReason": "end_turn"}  # answered once (the client checks)

    # The model read them after the tool's result, in order; in one user message, since chat
    # templates refuse two in a row (agent.context.history.alternating).
    messages = fake_llm.requests[1].body["messages"]
    assert [m["role"] for m in messages[-2:]] == ["tool", "user"]
    assert messages[-1]["content"] == "use tabs\n\nand a trailing newline"
    # Shown to the client where it happened: after the call ended, before the answer.
    updates = pending.updates()
    users = [u for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == ["use tabs", "and a trailing newline"]
    assert users[0]["messageId"] != users[1]["messageId"]
    ended = next(i for i, u in enumerate(updates) if u.get("status") == "completed")
    answer = next(i for i, u in enumerate(updates) if u["sessionUpdate"] == "agent_message_chunk")
    assert ended < updates.index(users[0]) < updates.index(users[1]) < answer

    # And `session/load` shows them at that place too.
    again = heron()
    load = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    said = [
        (u["sessionUpdate"], u["content"]["text"])
        for u in load.updates()
        if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
    ]
    assert said == [
        ("user_message_chunk", "Write a.txt"),
        ("user_message_chunk", "use tabs"),
        ("user_message_chunk", "and a trailing newline"),
        ("agent_message_chunk", "Noted both."),
    ]


def test_a_steer_sent_as_the_answer_streams_is_taken_before_the_turn_ends(
    heron, fake_llm, workspace
):
    """A message that comes while the model writes its final answer is not lost: the turn
    takes it in after that answer and asks the model again."""
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "b.txt", "content": "y\n"}, id="w1")),
        text("First answer."),
        text("Second answer, with the steer."),
    )
    client = heron()
    gate = client.permission_gate = threading.Event()
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "Write b.txt")
    client.wait_for_agent_request("session/request_permission", timeout=30)
    message = steer(client, session_id, "also say hi")
    client.round_trip()
    gate.set()
    assert message.result(30) == {"outcome": "injected"}
    assert pending.result(30) == {"stopReason": "end_turn"}
    assert fake_llm.requests[1].body["messages"][-1] == {"role": "user", "content": "also say hi"}


def test_a_steer_during_a_cancel_fails_with_a_reason(heron, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("bash", {"command": "sleep 60"}, id="s1")))
    caps = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": True}
    client = heron("--mode", "full-access", client_capabilities=caps)
    release = threading.Event()
    kill = client.handlers["terminal/kill"]

    def slow_kill(params: Any) -> Any:
        release.wait(60)  # the cancel cannot finish until the test lets it
        return kill(params)

    client.handlers["terminal/kill"] = slow_kill
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "Sleep")
    client.wait_for_agent_request("terminal/create", timeout=30)
    waiting = steer(client, session_id, "before the cancel")
    client.round_trip()
    client.cancel(session_id)
    client.wait_for_agent_request("terminal/kill", timeout=30)  # the turn is being cancelled
    during = steer(client, session_id, "during the cancel").result(30)
    release.set()
    assert pending.result(30) == {"stopReason": "cancelled"}
    for answer in (waiting.result(30), during):
        assert answer["outcome"] == "failed" and "cancelled" in answer["reason"]
    # Neither reached the model, and the next steer finds no turn.
    assert len(fake_llm.requests) == 1
    assert steer(client, session_id, "after").result()["outcome"] == "promptRequired"


def test_a_plain_prompt_during_a_turn_still_cancels_it(heron, fake_llm, workspace):
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "c.txt", "content": "z\n"}, id="w1")),
        text("New turn."),
    )
    client = heron()
    client.permission_gate = threading.Event()
    session_id = client.new_session(workspace)
    first = client.prompt_async(session_id, "Write c.txt")
    client.wait_for_agent_request("session/request_permission", timeout=30)
    second = client.prompt_async(session_id, "Never mind")
    assert first.result(30) == {"stopReason": "cancelled"}
    client.permission_gate.set()
    assert second.result(30) == {"stopReason": "end_turn"}
