"""agent.rewind.marks: a message's place in the history, from the step marks in the transcript."""

from __future__ import annotations

from typing import Any

from agent.rewind.marks import (
    Cut,
    compaction_mark,
    cut_at_message,
    cut_before,
    step_mark,
    user_messages,
)


def user(text: str, ident: str) -> dict[str, Any]:
    content = {"type": "text", "text": text}
    return {"sessionUpdate": "user_message_chunk", "messageId": ident, "content": content}


def agent(text: str, ident: str) -> dict[str, Any]:
    content = {"type": "text", "text": text}
    return {"sessionUpdate": "agent_message_chunk", "messageId": ident, "content": content}


def mark(history: int, undo: tuple[int, int] = (1, 0)) -> dict[str, Any]:
    found = step_mark([{"role": "user"}] * history, undo)
    assert found is not None
    return found


TRANSCRIPT = [
    user("one", "u1"),
    mark(1),
    agent("answer one", "a1"),
    mark(2, (2, 0)),
    user("two", "u2"),
    mark(3, (2, 0)),
    agent("answer two", "a2"),
    mark(4, (3, 0)),
]


def test_no_mark_while_a_call_waits_for_its_result():
    waiting = [{"role": "assistant", "tool_calls": [{"id": "c"}]}]
    assert step_mark(waiting, (1, 0)) is None


def test_the_user_messages_in_order():
    found = user_messages(TRANSCRIPT)
    assert [(m.number, m.message_id, m.index, m.text) for m in found] == [
        (1, "u1", 0, "one"),
        (2, "u2", 4, "two"),
    ]


def test_before_a_message_is_the_last_mark_before_it():
    assert cut_before(TRANSCRIPT, 0) == Cut(0, 0, (1, 0))
    assert cut_before(TRANSCRIPT, 4) == Cut(4, 2, (2, 0))


def test_a_mark_with_conversation_after_it_is_no_place_to_go_back_to():
    without = [user("one", "u1"), agent("answer", "a1"), user("two", "u2")]  # saved before marks
    assert cut_before(without, 2) is None


def test_a_fork_at_an_answer_goes_through_it_and_at_a_question_before_it():
    assert cut_at_message(TRANSCRIPT, "a1") == Cut(4, 2, (2, 0))
    assert cut_at_message(TRANSCRIPT, "u2") == Cut(4, 2, (2, 0))
    assert cut_at_message(TRANSCRIPT, "nope") == "unknown"


def test_compaction_moves_the_history_it_kept_and_loses_what_it_summarized():
    compacted = [*TRANSCRIPT, compaction_mark(cut=3, shift=-2)]
    assert cut_before(compacted, 4) is None  # history 2 was summarized away
    # The last mark (4 messages) is carried through the compaction: 4 - 2.
    later = [*compacted, user("three", "u3")]
    assert cut_before(later, len(later) - 1) == Cut(8, 2, (3, 0))
