"""Issue 16, what the ACP conformance kit checks about sessions: their state comes with
them (before a load or resume answer, nothing after it but what a prompt causes), nothing
about a session after it is closed or deleted. The real `heron` over its pipes; every message
schema-checked by the harness.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_openai import text

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
