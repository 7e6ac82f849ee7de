"""Issue 28 §5 through the real `heron`: `session/fork` (advertised as
`sessionCapabilities.fork`): a new session with its own id, a copy of the conversation (all of
it, or up to a message), stored, listed and loadable like any other; the original untouched."""

from __future__ import annotations

from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import text


def prompts(client: Any, session_id: str, workspace: str) -> list[tuple[str, str]]:
    load = client.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    return [
        (u["sessionUpdate"], u["content"]["text"])
        for u in load.updates()
        if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
    ]


def chat(heron: Any, fake_llm: Any, workspace: str) -> tuple[Any, str]:
    fake_llm.script(text("Answer one."), text("Answer two."))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "Question one")
    client.prompt(session_id, "Question two")
    return client, session_id


def fork(client: Any, session_id: str, workspace: str, **extra: Any) -> str:
    params = {"sessionId": session_id, "cwd": workspace, "mcpServers": [], **extra}
    answer = client.request("session/fork", params)
    assert {"configOptions", "modes"} <= set(answer)
    return answer["sessionId"]


def test_initialize_advertises_fork(heron):
    client = heron(initialize=False)
    assert client.initialize()["agentCapabilities"]["sessionCapabilities"]["fork"] == {}


def test_a_fork_copies_the_conversation_and_leaves_the_original_alone(heron, fake_llm, workspace):
    client, original = chat(heron, fake_llm, workspace)
    copy = fork(client, original, workspace)
    assert copy != original
    listed = {s["sessionId"] for s in client.request("session/list", {})["sessions"]}
    assert {copy, original} <= listed
    fake_llm.script(text("Forked answer."))
    client.prompt(copy, "Only in the fork")
    users = [m["content"] for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["Question one", "Question two", "Only in the fork"]
    other = heron()
    assert ("user_message_chunk", "Only in the fork") in prompts(other, copy, workspace)
    assert ("user_message_chunk", "Only in the fork") not in prompts(other, original, workspace)
    assert len(prompts(other, original, workspace)) == 4


def test_fork_at_a_message_then_load_both(heron, fake_llm, workspace):
    client, original = chat(heron, fake_llm, workspace)
    other = heron()
    load = other.request_async(
        "session/load", {"sessionId": original, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    ids = {
        u["content"]["text"]: u["messageId"]
        for u in load.updates()
        if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
    }
    # At the second question: the fork is the conversation before it was sent.
    before = fork(client, original, workspace, _meta={"heron": {"messageId": ids["Question two"]}})
    # At the first answer: the conversation through it.
    through = fork(client, original, workspace, _meta={"heron": {"messageId": ids["Answer one."]}})
    fresh = heron()
    expected = [("user_message_chunk", "Question one"), ("agent_message_chunk", "Answer one.")]
    assert prompts(fresh, before, workspace) == expected
    assert prompts(fresh, through, workspace) == expected
    assert len(prompts(fresh, original, workspace)) == 4  # untouched
    fake_llm.script(text("Another way."))
    fresh.prompt(before, "Question two, differently")
    users = [m["content"] for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["Question one", "Question two, differently"]


def test_fork_at_an_unknown_message_is_invalid_params(heron, fake_llm, workspace):
    client, original = chat(heron, fake_llm, workspace)
    with pytest.raises(RpcError) as err:
        fork(client, original, workspace, _meta={"heron": {"messageId": "nope"}})
    assert err.value.code == -32602
    with pytest.raises(RpcError) as err:
        fork(client, "sess_unknown", workspace)
    assert err.value.code == -32602


def test_a_fork_keeps_the_sessions_own_trust_answer_for_the_same_project_only(
    heron, fake_llm, workspace, tmp_path
):
    client = heron()
    original = client.new_session(workspace)
    client.prompt(original, "/trust session")  # trusted for this session only, not remembered
    status = lambda answer: answer["_meta"]["workspace_trust"]["status"]  # noqa: E731
    params = {"sessionId": original, "cwd": workspace, "mcpServers": []}
    assert status(client.request("session/fork", params)) == "session"
    # From the store, after a restart: the saved answer still comes along.
    assert status(heron().request("session/fork", params)) == "session"
    # Forked into another folder (another project), nothing of it counts there.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = client.request("session/fork", {**params, "cwd": str(elsewhere)})
    assert status(moved) == "untrusted"
