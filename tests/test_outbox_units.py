"""Unit tests of agent.acp.outbox: which queued messages merge, and the bytes they become."""

from __future__ import annotations

import json
from typing import Any

from agent.acp.outbox import Outbox, encode


def chunk(
    text: str, kind: str = "agent_message_chunk", session: str = "s1", message: str | None = None
) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind}
    if message is not None:
        update["messageId"] = message
    update["content"] = {"type": "text", "text": text}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session, "update": update},
    }


def lines(data: bytes) -> list[dict[str, Any]]:
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def put_all(*messages: dict[str, Any]) -> tuple[Outbox, bytes]:
    outbox = Outbox()
    for message in messages:
        outbox.put(message)
    size = outbox.size
    data = outbox.take()
    assert size == len(data)  # the byte count behind drain() is exact
    assert outbox.size == 0 and not outbox
    return outbox, data


def test_consecutive_text_chunks_of_one_session_and_kind_become_one_line():
    _, data = put_all(chunk("Hel"), chunk("lo, "), chunk('"w"\n\\'))
    # Exactly what the merged message would have been, encoded alone.
    assert data == encode(chunk('Hello, "w"\n\\'))


def test_other_messages_kinds_and_sessions_are_never_merged_across():
    usage = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s1",
            "update": {"sessionUpdate": "usage_update", "used": 1, "size": 2},
        },
    }
    response = {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}
    messages = [
        chunk("a"),
        chunk("b", kind="agent_thought_chunk"),
        chunk("c"),
        chunk("d", session="s2"),
        chunk("e"),
        usage,
        chunk("f"),
        response,
        chunk("g"),
        chunk("h"),
    ]
    _, data = put_all(*messages)
    assert lines(data) == [
        chunk("a"),
        chunk("b", kind="agent_thought_chunk"),
        chunk("c"),
        chunk("d", session="s2"),
        chunk("e"),
        usage,
        chunk("f"),
        response,
        chunk("gh"),
    ]


def test_chunks_with_more_fields_or_other_content_are_kept_as_they_are():
    with_meta = chunk("x")
    with_meta["params"]["_meta"] = {"k": 1}
    image = chunk("y")
    image["params"]["update"]["content"] = {
        "type": "image",
        "data": "AA==",
        "mimeType": "image/png",
    }
    user = chunk("z", kind="user_message_chunk")
    messages = [chunk("a"), with_meta, chunk("b"), image, chunk("c"), user, user]
    _, data = put_all(*messages)
    assert lines(data) == messages


def test_what_was_taken_is_not_merged_into():
    outbox = Outbox()
    outbox.put(chunk("a"))
    first = outbox.take()
    outbox.put(chunk("b"))
    assert lines(first + outbox.take()) == [chunk("a"), chunk("b")]


def test_multibyte_text_and_lone_surrogates_merge_as_if_sent_one_by_one():
    pieces = ["héllo ", "中文", "😀", "x\ud83d", "\ude00y", "\udc00"]
    _, data = put_all(*(chunk(p) for p in pieces))
    alone = lines(b"".join(encode(chunk(p)) for p in pieces))
    one_by_one = "".join(m["params"]["update"]["content"]["text"] for m in alone)
    (merged,) = lines(data)
    assert merged["params"]["update"]["content"]["text"] == one_by_one
    assert one_by_one == "héllo 中文😀x\ufffd\ufffdy\ufffd"


def test_chunks_merge_only_within_one_message():
    _, data = put_all(
        chunk("a", message="m1"),
        chunk("b", message="m1"),
        chunk("c", message="m2"),
        chunk("d", message="m2"),
        chunk("e"),
    )
    assert lines(data) == [chunk("ab", message="m1"), chunk("cd", message="m2"), chunk("e")]


def test_a_session_id_that_needs_escaping_is_escaped_once():
    _, data = put_all(chunk("a", session='s"\\1'), chunk("b", session='s"\\1'))
    assert lines(data) == [chunk("ab", session='s"\\1')]


def test_updates_emit_spells_text_chunks_out_exactly_as_the_model_dump():

    from agent.acp.protocol import (
        AgentMessageChunk,
        AgentThoughtChunk,
        SessionNotification,
        TextContent,
        ToolCallStart,
    )
    from agent.turn.updates import Updates

    sent: list[dict[str, Any]] = []
    recorded: list[dict[str, Any]] = []

    def notify(update: dict[str, Any], record: bool = False) -> None:
        sent.append({"sessionId": "s1", "update": update})
        if record:
            recorded.append(update)

    async def window() -> int:
        return 1000

    async def drain() -> None:
        pass

    emitter = Updates(notify, list, window, drain, list)
    updates = [
        AgentMessageChunk(content=TextContent(text="a\n")),
        AgentThoughtChunk(content=TextContent(text="b")),
        ToolCallStart(tool_call_id="c1", title="t", kind="read", status="pending"),
    ]
    for update in updates:
        emitter.emit(update)
    # Each chunk got its message's id (a new message each: the kind changed in between).
    ids = [m["update"].get("messageId") for m in sent]
    assert ids[0] and ids[1] and ids[0] != ids[1] and ids[2] is None
    updates[0].message_id, updates[1].message_id = ids[0], ids[1]
    assert sent == [SessionNotification(session_id="s1", update=u).dump() for u in updates]
    assert recorded == [m["update"] for m in sent]
    # Should TextContent grow fields (annotations), Updates.emit's spelled-out dump must carry them.
    assert set(TextContent.model_fields) == {"type", "text"}
