"""Small local models, as they really behave (issue 27), end to end against the fake configured
like llama.cpp's server (tests/fake_local.py): a chat template that demands alternating roles,
a window it refuses longer requests over, a model that writes on after its tool call until the
token limit.
"""

from __future__ import annotations

import itertools
import json
import re
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
    fake_llm.before_script = lambda body: (  # whenever Heron summarizes
        text("SUMMARY: the user noted things.") if is_summary_request(body) else None
    )
    fake_llm.script(text("noted " * 300), text("noted again " * 300), text("done"))
    client = heron("--context-window", "5000")
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


# ------------------------------------------------------------------ 2. text tool calls that run


def block(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def test_a_model_that_writes_on_after_its_call_is_stopped_at_the_imitated_result(
    heron, fake_llm, workspace
):
    """The stop sequence ends the answer where the model starts writing the tool's result
    itself: the call runs, nothing it made up reaches the user."""
    Path(workspace, "a.txt").write_text("alpha\n")
    fake_llm.writes_on = True
    fake_llm.script(text(block("read_file", {"path": "a.txt"})), text("It says alpha."))
    client = heron("--tool-calls", "text")
    turn = client.prompt(client.new_session(workspace), "read a.txt")
    assert turn["stopReason"] == "end_turn"
    assert list(statuses(turn["updates"]).values()) == ["completed"]
    assert chunks(turn["updates"]) == "It says alpha."
    assert all(r.body["stop"] == ["<tool_response>"] for r in fake_llm.requests)
    assert "alpha" in fake_llm.requests[1].body["messages"][-1]["content"]


def test_native_requests_carry_no_stop_sequence(heron, fake_llm, workspace):
    fake_llm.script(text("hi"))
    client = heron("--tool-calls", "native")
    client.prompt(client.new_session(workspace), "hello")
    assert "stop" not in fake_llm.requests[0].body


def test_without_the_stop_sequence_heron_stops_reading_at_the_imitated_result(
    heron, fake_llm, workspace
):
    """A server that rejects `stop` (it is dropped and remembered): the answer still ends
    where the imitation starts, and the rest is never shown."""
    Path(workspace, "a.txt").write_text("alpha\n")
    fake_llm.reject_fields = {"stop": "openai"}
    fake_llm.writes_on = True
    fake_llm.script(text(block("read_file", {"path": "a.txt"})), text("It says alpha."))
    client = heron("--tool-calls", "text")
    turn = client.prompt(client.new_session(workspace), "read a.txt")
    assert turn["stopReason"] == "end_turn"
    assert chunks(turn["updates"]) == "It says alpha."
    accepted = [r for r in fake_llm.requests if r.status == 200]
    assert all("stop" not in r.body for r in accepted)
    assistant = accepted[1].body["messages"][-2]["content"]
    assert "<tool_response>" not in assistant and "go on with the next step" not in assistant


def test_blocks_closed_before_the_token_limit_run_and_the_turn_goes_on(heron, fake_llm, workspace):
    """`finish_reason: length`: every closed block runs, the one open at the cut fails without
    a permission question, the model gets the results and the turn goes on."""
    Path(workspace, "a.txt").write_text("alpha\n")
    Path(workspace, "b.txt").write_text("beta\n")
    answer = (
        "Reading both.\n"
        + block("read_file", {"path": "a.txt"})
        + "\n"
        + block("read_file", {"path": "b.txt"})
        + '\n<tool_call>\n{"name": "write_file", "arguments": {"path": "c.txt", "content": "ga'
    )
    fake_llm.script(text(answer, finish="length"), text("Both read."))
    client = heron("--tool-calls", "text", "--mode", "ask")
    turn = client.prompt(client.new_session(workspace), "read a and b, write c")
    assert turn["stopReason"] == "end_turn", turn
    assert list(statuses(turn["updates"]).values()) == ["completed", "completed", "failed"]
    asked = [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert asked == []  # nothing was asked: the cut call cannot run
    assert not Path(workspace, "c.txt").exists()
    results = fake_llm.requests[1].body["messages"][-1]["content"]
    assert "alpha" in results and "beta" in results
    assert "output token limit inside this call" in results
    assert chunks(turn["updates"]) == "Reading both.\nBoth read."


def test_an_answer_cut_inside_its_only_call_ends_the_turn_at_the_limit(heron, fake_llm, workspace):
    answer = '<tool_call>\n{"name": "write_file", "arguments": {"path": "c.txt", "content": "g'
    fake_llm.script(text(answer, finish="length"), text("later"))
    client = heron("--tool-calls", "text", "--mode", "full-access")
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "write c")
    assert turn["stopReason"] == "max_tokens"
    assert list(statuses(turn["updates"]).values()) == ["failed"]
    assert not Path(workspace, "c.txt").exists()
    assert client.prompt(session_id, "go on")["stopReason"] == "end_turn"


def test_an_unclosed_tool_call_that_is_not_json_is_text(heron, fake_llm, workspace):
    fake_llm.script(text("I would write a <tool_call>", " here, but", " the answer is 42."))
    client = heron("--tool-calls", "text")
    turn = client.prompt(client.new_session(workspace), "what is it?")
    assert turn["stopReason"] == "end_turn"
    assert chunks(turn["updates"]) == "I would write a <tool_call> here, but the answer is 42."
    assert statuses(turn["updates"]) == {}


def test_a_block_heron_cannot_read_tells_the_model_the_format(heron, fake_llm, workspace):
    fake_llm.script(text("<tool_call>read_file README.md</tool_call>"), text("retrying"))
    client = heron("--tool-calls", "text")
    turn = client.prompt(client.new_session(workspace), "read the readme")
    assert list(statuses(turn["updates"]).values()) == ["failed"]
    told = fake_llm.requests[1].body["messages"][-1]["content"]
    assert "Heron could not read this tool call" in told
    assert '{"name": "read_file", "arguments": {"path": "README.md"}}' in told
    assert "Unknown tool" not in told


@pytest.mark.parametrize(
    "written",
    [
        "To call a tool, write:\n```\n" + block("delete_path", {"path": "a.txt"}) + "\n```\n",
        "Blocks like `" + block("delete_path", {"path": "a.txt"}).replace("\n", "") + "` act.",
    ],
)
def test_a_tool_call_in_markdown_code_is_text(heron, fake_llm, workspace, written):
    Path(workspace, "a.txt").write_text("keep me\n")
    fake_llm.script(text(written))
    client = heron("--tool-calls", "text", "--mode", "full-access")
    turn = client.prompt(client.new_session(workspace), "how do you call tools?")
    assert turn["stopReason"] == "end_turn"
    assert statuses(turn["updates"]) == {}
    assert chunks(turn["updates"]) == written
    assert Path(workspace, "a.txt").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "refusal",
    [
        error(400, "Unrecognized request argument supplied: tools"),  # OpenAI, Azure
        error(500, "tools param requires --jinja flag"),  # llama-server without jinja
        error(400, "Function calling is not enabled for this model"),
        error(422, "Tools are not supported for this model"),
    ],
)
def test_auto_recognises_a_refused_tools_parameter_and_does_not_retry_it(
    heron, fake_llm, workspace, refusal
):
    fake_llm.before_script = lambda body: refusal if "tools" in body else text("in text")
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi")
    assert turn["stopReason"] == "end_turn"
    assert chunks(turn["updates"]).endswith("in text")
    assert ["tools" in r.body for r in fake_llm.requests] == [True, False]


# ------------------------------------------------------------------ 3. refused before asked


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (Call("write_file", {"path": "a.txt", "content": "new\n"}), "you have not read it"),
        (
            Call("edit_file", {"path": "a.txt", "old_string": "gone", "new_string": "x"}),
            "was not found",
        ),
    ],
)
def test_a_change_heron_would_refuse_is_refused_before_the_permission_question(
    heron, fake_llm, workspace, call, reason
):
    """Not after the user approved the diff: the question is never asked."""
    Path(workspace, "a.txt").write_text("old\n")
    fake_llm.script(tool_calls(call), text("I will read it first."))
    client = heron("--mode", "ask")
    turn = client.prompt(client.new_session(workspace), "change a.txt")
    assert turn["stopReason"] == "end_turn"
    asked = [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert asked == []
    assert list(statuses(turn["updates"]).values()) == ["failed"]
    assert Path(workspace, "a.txt").read_text() == "old\n"
    assert reason in fake_llm.requests[1].body["messages"][-1]["content"]


# ------------------------------------------------------------------- 4. windows smaller than asked

DENSE = "x=1;y=22;z=[3,4];"  # about 1.2 characters a token as the fake counts (SmolLM2: 1.8)


def llama_server(fake_llm, window: int, tools: bool = False) -> None:
    """The fake as llama-server with a `window`-token context, told in `/props`."""
    fake_llm.window = window
    fake_llm.props = {
        "default_generation_settings": {"n_ctx": window},
        "chat_template_caps": {"supports_tools": tools},
        "total_slots": 1,
    }
    fake_llm.before_script = lambda body: (
        text("The user pasted a config and asked about it.") if is_summary_request(body) else None
    )


def is_summary_request(body: dict[str, Any]) -> bool:
    return "You summarize a coding session" in str(body["messages"][0].get("content"))


def test_a_paste_larger_than_the_window_is_cut_for_the_model_not_for_the_user(
    heron, fake_llm, workspace
):
    """A 4,096-token window and a paste of about 17,000 tokens: the model reads its start and
    end (the user is told), the request fits, and the session goes on; the transcript that
    session/load replays keeps all of it."""
    llama_server(fake_llm, 4096)
    fake_llm.script(text("hello"), text("It is a config."), text("Yes."), text("Fine."))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    paste = "BEGIN " + DENSE * 1200 + " END"
    turn = client.prompt(session_id, "what is this?\n" + paste)
    assert turn["stopReason"] == "end_turn", turn
    assert "It is a config." in chunks(turn["updates"])
    assert "the model reads its start and its end" in chunks(turn["updates"])
    refused = [r for r in fake_llm.requests if r.status != 200]
    assert len(refused) <= 1  # at most once, before Heron knew how the server counts
    answered = [r for r in fake_llm.requests if r.status == 200 and not is_summary_request(r.body)]
    sent = answered[-1].body["messages"][-1]["content"]
    assert "what is this?\nBEGIN " in sent and sent.endswith(" END")
    assert "characters left out" in sent
    # The session is not broken: the next prompts fit, summaries included.
    for prompt in ("and now?", "thanks"):
        assert client.prompt(session_id, prompt)["stopReason"] == "end_turn"
    assert [r.status for r in fake_llm.requests[-2:]] == [200, 200]
    assert all(r.status == 200 for r in fake_llm.requests if is_summary_request(r.body))
    # What the user sent stays whole in the transcript.
    client.kill()
    client = heron()
    load = client.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result(timeout=30)
    replayed = "".join(
        u["content"]["text"] for u in load.updates() if u["sessionUpdate"] == "user_message_chunk"
    )
    assert paste in replayed


def test_a_window_smaller_than_herons_own_prompt_is_said_before_the_first_request(
    heron, fake_llm, workspace
):
    llama_server(fake_llm, 2048)
    client = heron()
    with pytest.raises(RpcError) as err:
        client.prompt(client.new_session(workspace), "hi")
    message = err.value.message
    assert "context is 2,048 tokens" in message
    assert "instructions and tools need about" in message
    needed = int(re.search(r"need about ([\d,]+)", message)[1].replace(",", ""))  # type: ignore[index]
    suggested = int(re.search(r"`-c (\d+)`", message)[1])  # type: ignore[index]
    assert needed > 2048 and suggested >= 2 * needed  # a size that leaves room to talk
    assert "new session" not in message
    assert fake_llm.requests == []  # nothing was sent that could not work


@pytest.mark.parametrize("window", [4096, 32768])
def test_a_small_window_leaves_the_optional_tools_out_of_every_request(
    heron, fake_llm, workspace, window
):
    llama_server(fake_llm, window, tools=True)
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "a.txt"}, id="r")), text("read it"), text("again")
    )
    Path(workspace, "a.txt").write_text("a\n")
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "read a.txt")
    client.prompt(session_id, "and now?")
    sent = [{t["function"]["name"] for t in r.body.get("tools", [])} for r in fake_llm.requests]
    assert len(sent) == 3 and all(names == sent[0] for names in sent)  # the same every time
    assert {"read_file", "bash", "edit_file"} <= sent[0]
    optional = {"ask_user", "todo_write"}
    assert (optional & sent[0]) == (set() if window < 8192 else optional)
