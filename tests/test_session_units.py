"""A session's transcript and its one way out for updates (`Session.notify`), on their own.
End to end: test_stream_e2e.py (merging), test_sessions_e2e.py (replay, nothing after close),
test_commands_e2e.py (the command list after the session/new answer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.acp.params import ClientCapabilities
from agent.config import Settings
from agent.session import Session
from agent.store.transcript import Transcript


def chunk(text: str, kind: str = "agent_message_chunk") -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def test_the_transcript_merges_chunks_of_one_kind_and_keeps_a_calls_last_snapshot():
    transcript = Transcript()
    for update in (
        chunk("a"),
        chunk("b"),
        chunk("t", "agent_thought_chunk"),
        {"sessionUpdate": "tool_call", "toolCallId": "c", "status": "pending"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [1]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [2]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"},
        chunk("c"),
    ):
        transcript.record(update)
    assert transcript.entries == [
        chunk("ab"),
        chunk("t", "agent_thought_chunk"),
        {"sessionUpdate": "tool_call", "toolCallId": "c", "status": "pending"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [2]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"},
        chunk("c"),
    ]
    transcript.replace([chunk("x")])
    transcript.record(chunk("y"))
    assert transcript.entries == [chunk("xy")]


class FakeConnection:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.after: list[Any] = []

    def notify(self, method: str, params: dict[str, Any]) -> None:
        assert method == "session/update"
        self.sent.append(params["update"])

    def after_answer(self, callback: Any) -> None:
        self.after.append(callback)


def open_session(connection: FakeConnection) -> Session:
    return Session(
        session_id="s1",
        cwd=Path("/"),
        settings=Settings(),
        connection=connection,  # type: ignore[arg-type]
        client_capabilities=ClientCapabilities(),
        mcp_servers=[],
    )


def test_what_heron_sends_by_itself_waits_for_the_session_new_answer_latest_of_each_kind():
    connection = FakeConnection()
    session = open_session(connection)
    session.hold_until_answered()
    commands = {"sessionUpdate": "available_commands_update", "availableCommands": []}
    session.notify({"sessionUpdate": "config_option_update", "configOptions": [1]})
    session.notify(commands)
    session.notify({"sessionUpdate": "config_option_update", "configOptions": [2]})
    assert connection.sent == []
    for callback in connection.after:  # the answer is out
        callback()
    assert connection.sent == [
        commands,
        {"sessionUpdate": "config_option_update", "configOptions": [2]},
    ]
    session.notify(chunk("a"), record=True)
    assert connection.sent[-1] == chunk("a")


def test_a_closed_session_sends_nothing_but_keeps_the_conversation():
    connection = FakeConnection()
    session = open_session(connection)
    session.notify(chunk("a"), record=True)
    session.closed = True
    session.notify(chunk("b"), record=True)
    session.notify({"sessionUpdate": "session_info_update", "title": "t"})
    assert connection.sent == [chunk("a")]
    assert session.transcript.entries == [chunk("ab")]
