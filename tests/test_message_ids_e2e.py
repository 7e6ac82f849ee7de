"""Issue 28 §1 and §6 through the real `heron`: message ids on every chunk (kept by a load),
the tool's `name` on its calls, Heron's notes as `notice` updates and compactions as
`compaction_update`s for clients that opt in (text for the others), and a close that lands
while the model streams a tool call."""

from __future__ import annotations

from typing import Any

from fake_openai import Call, stall, text, tool_calls

CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
NOTICES: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "session": {"notices": {}, "compaction": {}},
}


def runs(updates: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(kind, message id, text) of each run of chunks of one message, in order."""
    out: list[tuple[str, str, str]] = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind not in CHUNKS:
            out.append((kind, "", ""))
            continue
        piece = u["content"].get("text", "")
        if out and out[-1][0] == kind and out[-1][1] == u["messageId"]:
            out[-1] = (kind, u["messageId"], out[-1][2] + piece)
        else:
            out.append((kind, u["messageId"], piece))
    return out


def load(client: Any, session_id: str, workspace: str) -> list[dict[str, Any]]:
    pending = client.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    pending.result()
    return [u for u in pending.updates() if u["sessionUpdate"] in (*CHUNKS, "tool_call")]


def test_each_message_has_its_own_id_kept_by_load(heron, fake_llm, workspace):
    fake_llm.script(
        tool_calls(Call("list_directory", {"path": "."}, id="ls"), text="Let me look. "),
        text("It ", "is ", "empty.", reasoning=["Thinking ", "hard."]),
        text("Second ", "answer."),
    )
    client = heron()
    session_id = client.new_session(workspace)
    first = client.prompt(session_id, "What is here?")["updates"]
    second = client.prompt(session_id, "And now?")["updates"]
    shown = runs([u for u in first if u["sessionUpdate"] in (*CHUNKS, "tool_call")])
    kinds = [kind for kind, _, _ in shown]
    # text, the tool call, a thought, the answer: the call and the change of kind part them
    assert kinds == [
        "agent_message_chunk",
        "tool_call",
        "agent_thought_chunk",
        "agent_message_chunk",
    ]
    ids = [ident for kind, ident, _ in shown if kind in CHUNKS]
    assert len(set(ids)) == len(ids) == 3
    assert [t for k, _, t in shown if k in CHUNKS] == [
        "Let me look. ",
        "Thinking hard.",
        "It is empty.",
    ]
    call = next(u for u in first if u["sessionUpdate"] == "tool_call")
    assert call["name"] == "list_directory" and call["title"] == "list_directory"
    (answer,) = runs([u for u in second if u["sessionUpdate"] in CHUNKS])
    assert answer[2] == "Second answer." and answer[1] not in ids

    replay = load(heron(), session_id, workspace)
    replayed = [r for r in runs(replay) if r[0] in CHUNKS]
    users = [r for r in replayed if r[0] == "user_message_chunk"]
    assert [t for _, _, t in users] == ["What is here?", "And now?"]
    assert len({ident for _, ident, _ in users}) == 2
    # The agent's messages come back with the very ids they were streamed with.
    assert [r for r in replayed if r[0] != "user_message_chunk"] == [
        r for r in [*shown, answer] if r[0] in CHUNKS
    ]
    # A second load gives the same ids again.
    assert runs(load(heron(), session_id, workspace)) == runs(replay)


def test_a_note_between_two_answers_is_a_message_of_its_own(heron, fake_llm, workspace):
    # Auto mode without a sandbox: the note says commands ask; it sits between two texts.
    fake_llm.script(
        tool_calls(Call("bash", {"command": "true"}, id="b1"), text="Running it."),
        text("Done."),
    )
    client = heron("--mode", "auto", env={"HERON_SANDBOX": "off"})
    session_id = client.new_session(workspace)
    updates = client.prompt(session_id, "Run true")["updates"]
    texts = [r for r in runs(updates) if r[0] == "agent_message_chunk"]
    assert texts[0][2] == "Running it."
    assert any("sandbox is not available" in t for _, _, t in texts)
    assert texts[-1][2] == "Done."
    assert len({ident for _, ident, _ in texts}) == len(texts)


def test_notes_go_as_notices_to_clients_that_show_them_and_as_text_on_load(
    heron, fake_llm, workspace
):
    fake_llm.script(tool_calls(Call("bash", {"command": "true"}, id="b1")), text("Done."))
    client = heron("--mode", "auto", env={"HERON_SANDBOX": "off"}, client_capabilities=NOTICES)
    session_id = client.new_session(workspace)
    updates = client.prompt(session_id, "Run true")["updates"]
    notices = [u for u in updates if u["sessionUpdate"] == "notice"]
    assert len(notices) == 1 and notices[0]["severity"] == "warning"
    assert "sandbox" in notices[0]["title"] and "ask" in notices[0]["description"]
    texts = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] in CHUNKS)
    assert "sandbox" not in texts  # told once, as a notice only
    # A notice is a live event: a client with notices is not sent it again; one without
    # notices is shown its text.
    again = heron(client_capabilities=NOTICES)
    pending = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    pending.result()
    assert not [u for u in pending.updates() if u["sessionUpdate"] == "notice"]
    plain = [r for r in runs(load(heron(), session_id, workspace)) if r[0] in CHUNKS]
    assert any("sandbox is not available" in t for _, _, t in plain)


def test_compaction_is_a_compaction_update_for_clients_that_opt_in(heron, fake_llm, workspace):
    fake_llm.script(text("one"), text("The user said hello."))
    client = heron(client_capabilities=NOTICES)
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hello")
    updates = client.prompt(session_id, "/compact")["updates"]
    compactions = [u for u in updates if u["sessionUpdate"] == "compaction_update"]
    assert [u["status"] for u in compactions] == ["in_progress", "completed"]
    assert compactions[0]["compactionId"] == compactions[1]["compactionId"]
    assert compactions[1]["summary"] == [{"type": "text", "text": "The user said hello."}]
    assert not [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    # Replayed as it was to such a client, as words to the others.
    again = heron(client_capabilities=NOTICES)
    pending = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    pending.result()
    statuses = [u["status"] for u in pending.updates() if u["sessionUpdate"] == "compaction_update"]
    assert statuses == ["in_progress", "completed"]
    plain = [t for k, _, t in runs(load(heron(), session_id, workspace)) if k in CHUNKS]
    assert any(t.startswith("Compacted the conversation") for t in plain)


def test_a_failed_compaction_says_why(heron, fake_llm, workspace):
    client = heron(client_capabilities=NOTICES)
    session_id = client.new_session(workspace)
    updates = client.prompt(session_id, "/compact")["updates"]
    # Nothing to compact yet: said in words, no compaction started.
    assert "Nothing to compact" in "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def test_close_while_a_tool_call_streams_fails_the_announced_calls_first(
    heron, fake_llm, workspace
):
    fake_llm.script(stall(tool_calls(Call("read_file", {"path": "a.txt"}, id="r1"))))
    client = heron()
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "Read a.txt")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "tool_call", timeout=30)
    close = client.request_async("session/close", {"sessionId": session_id})
    assert close.result(30) == {}
    assert pending.result(30) == {"stopReason": "cancelled"}
    # Before the close was answered, the call was ended: failed, saying why.
    before_answer = close.updates()
    ended = [
        u
        for u in before_answer
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"
    ]
    assert len(ended) == 1 and ended[0]["toolCallId"] == "r1"
    assert "session was closed" in ended[0]["content"][0]["content"]["text"]
