"""Issue 16, what the ACP conformance kit checks about sessions: their state comes with
them (before a load or resume answer, nothing after it but what a prompt causes), nothing
about a session after it is closed or deleted. The real `heron` over its pipes; every message
schema-checked by the harness.
"""

from __future__ import annotations

from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import Call, text, tool_calls

STATE = {"available_commands_update", "session_info_update", "usage_update"}


def stop(client) -> None:
    client.close_stdin()
    assert client.wait_exit(10) == 0


def kinds(updates: list[dict[str, Any]]) -> set[str]:
    return {u["sessionUpdate"] for u in updates}


def stored_session(heron, fake_llm, workspace: str) -> str:
    """A session with one prompt (so a title and a history), saved by a process now gone."""
    fake_llm.script(text("Hi there."))
    first = heron()
    session_id = first.new_session(workspace)
    first.prompt(session_id, "Say hello")
    stop(first)
    return session_id


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_restored_session_state_comes_before_the_answer_and_nothing_after(
    heron, fake_llm, workspace, method
):
    session_id = stored_session(heron, fake_llm, workspace)
    client = heron()
    pending = client.request_async(
        method, {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    pending.result()
    before = pending.updates()
    assert kinds(before) >= STATE, kinds(before)
    [title] = [u for u in before if u["sessionUpdate"] == "session_info_update"]
    assert title["title"] == "Say hello"
    [usage] = [u for u in before if u["sessionUpdate"] == "usage_update"]
    assert usage["used"] > 0 and usage["size"] > 0  # the context meter
    if method == "session/resume":
        assert kinds(before) == STATE  # no replay
    # A round trip later nothing more has come about the session...
    client.request("session/list", {})
    assert client.updates(session_id) == before
    # ... and a prompt brings only its own updates.
    fake_llm.script(text("Again."))
    turn = client.prompt(session_id, "Once more")
    assert "available_commands_update" not in kinds(turn["updates"])
    assert client.updates(session_id) == before + turn["updates"]


@pytest.mark.parametrize("method", ["session/close", "session/delete"])
def test_nothing_about_a_session_after_it_is_closed(heron, workspace, method):
    client = heron()
    gone = client.new_session(workspace)
    closing = client.request_async(method, {"sessionId": gone})
    closing.result()
    after_close = len(client.notifications)
    # A session made after the close gets its command list; the closed one's, due first
    # (it follows the session/new answer by the same delay), never comes.
    other = client.new_session(workspace)
    client.wait_for_update(
        lambda u: u["sessionUpdate"] == "available_commands_update", session_id=other
    )
    late = [
        n["params"]["update"]["sessionUpdate"]
        for n in client.notifications[after_close:]
        if n["params"]["sessionId"] == gone
    ]
    assert late == []


def test_nothing_after_a_loaded_session_is_closed(heron, fake_llm, workspace):
    session_id = stored_session(heron, fake_llm, workspace)
    client = heron()
    client.request("session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []})
    client.request("session/close", {"sessionId": session_id})
    after_close = len(client.notifications)
    other = client.new_session(workspace)
    client.wait_for_update(
        lambda u: u["sessionUpdate"] == "available_commands_update", session_id=other
    )
    assert not [
        n for n in client.notifications[after_close:] if n["params"]["sessionId"] == session_id
    ]


# -- additional directories ------------------------------------------------------------------


def asked_ids(client) -> list[str]:
    return [
        r.params["toolCall"]["toolCallId"]
        for r in client.agent_requests
        if r.method == "session/request_permission"
    ]


def test_additional_directories_are_advertised(heron):
    caps = heron(initialize=False).initialize()["agentCapabilities"]
    assert caps["sessionCapabilities"]["additionalDirectories"] == {}


def test_additional_directories_are_part_of_the_workspace(heron, fake_llm, workspace, tmp_path):
    extra = tmp_path / "extra"
    (extra / ".git").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    fake_llm.script(
        tool_calls(
            Call("write_file", {"path": str(extra / "new.txt"), "content": "in\n"}, id="in"),
            Call("write_file", {"path": str(extra / ".git" / "x"), "content": "g\n"}, id="git"),
            Call("write_file", {"path": str(outside / "o.txt"), "content": "o\n"}, id="out"),
        ),
        text("done"),
    )
    client = heron("--mode", "accept-edits")
    result = client.request(
        "session/new",
        {"cwd": workspace, "mcpServers": [], "additionalDirectories": [str(extra)]},
    )
    session_id = result["sessionId"]
    client.prompt(session_id, "write them")
    # Inside the additional directory an edit needs no question; its .git/ is protected as
    # the cwd's is, and a folder that is not in the workspace still asks.
    assert asked_ids(client) == ["git", "out"]
    assert (extra / "new.txt").read_text() == "in\n"
    system = fake_llm.requests[0].body["messages"][0]["content"]
    assert str(extra) in system

    # Saved with the session: session/list returns the list.
    [info] = [
        s for s in client.request("session/list", {})["sessions"] if s["sessionId"] == session_id
    ]
    assert info["additionalDirectories"] == [str(extra)]


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/resume"])
@pytest.mark.parametrize("bad", ["relative/dir", "{missing}", "{file}"])
def test_bad_additional_directories_are_invalid_params(heron, workspace, tmp_path, method, bad):
    (tmp_path / "file").write_text("x")
    bad = bad.format(missing=tmp_path / "missing", file=tmp_path / "file")
    client = heron()
    params: dict[str, Any] = {"cwd": workspace, "mcpServers": [], "additionalDirectories": [bad]}
    if method != "session/new":
        params["sessionId"] = client.new_session(workspace)
    with pytest.raises(RpcError) as caught:
        client.request(method, params)
    assert caught.value.code == -32602
    assert "additionalDirectories" in caught.value.message


def test_load_takes_the_requested_directories(heron, fake_llm, workspace, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    session_id = stored_session(heron, fake_llm, workspace)
    fake_llm.script(
        tool_calls(Call("write_file", {"path": str(extra / "a.txt"), "content": "a\n"}, id="w")),
        text("ok"),
    )
    client = heron()
    client.request(
        "session/load",
        {
            "sessionId": session_id,
            "cwd": workspace,
            "mcpServers": [],
            "additionalDirectories": [str(extra)],
            "_meta": {"heron": {"mode": "accept-edits"}},  # stored in "ask"
        },
    )
    [info] = [
        s for s in client.request("session/list", {})["sessions"] if s["sessionId"] == session_id
    ]
    assert info["additionalDirectories"] == [str(extra)]
    client.prompt(session_id, "write")
    assert asked_ids(client) == []
    assert (extra / "a.txt").read_text() == "a\n"
