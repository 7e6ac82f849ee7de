"""The model stream in every shape OpenAI-compatible servers send, through the real `heron`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from acp_client import RpcError
from fake_openai import (
    TOOL_CALL_STYLES,
    Call,
    error,
    raw,
    silent,
    sse,
    text,
    tool_calls,
)


def chunks(updates, kind="agent_message_chunk"):
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == kind]


def chunk(delta=None, finish=None, **extra):
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra}


def tool_updates(updates):
    return [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


@pytest.mark.parametrize("style", TOOL_CALL_STYLES)
def test_tool_calls_in_every_server_shape_run_the_named_tool(heron, fake_llm, workspace, style):
    Path(workspace, "a.txt").write_text("alpha\n")
    Path(workspace, "b.txt").write_text("beta\n")
    calls = [Call("read_file", {"path": "a.txt"}), Call("read_file", {"path": "b.txt"})]
    fake_llm.strict = True
    fake_llm.script(tool_calls(*calls, style=style, null_fields=True), text("done"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "read both")
    assert turn["stopReason"] == "end_turn", turn
    starts = [u for u in turn["updates"] if u["sessionUpdate"] == "tool_call"]
    assert [u["title"] for u in starts] == ["read_file", "read_file"]
    statuses = [u.get("status") for u in tool_updates(turn["updates"]) if u.get("status")]
    assert statuses.count("completed") == 2 and "failed" not in statuses
    follow_up = fake_llm.requests[1].body["messages"]
    assistant = next(m for m in follow_up if m["role"] == "assistant")
    assert assistant["content"] == ""  # not null: strict servers answer 500 to null
    sent = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in assistant["tool_calls"]
    ]
    assert sent == [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})]
    results = [m["content"] for m in follow_up if m["role"] == "tool"]
    assert "alpha" in results[0] and "beta" in results[1]


def test_comments_null_fields_and_extra_fields_do_not_disturb_the_text(heron, fake_llm, workspace):
    fake_llm.script(
        text("Hel", "lo", comment="OPENROUTER PROCESSING", null_fields=True),
        raw(
            sse(
                ": ping - 2026-11-23 12:39:09\n\n",
                chunk({"role": "assistant", "content": None}, system_fingerprint="b1"),
                chunk({"content": "Hi", "role": None}, logprobs=None),
                chunk({}, "stop"),
                {"choices": [], "usage": {"prompt_tokens": 3}, "timings": {"prompt_n": 3}},
                "data: [DONE]\n\n",
            )
        ),
    )
    client = heron()
    session_id = client.new_session(workspace)
    # (Deltas that arrive together may be merged into one notification.)
    assert "".join(chunks(client.prompt(session_id, "hi")["updates"])) == "Hello"
    assert chunks(client.prompt(session_id, "again")["updates"]) == ["Hi"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # Ends without a finish reason and without [DONE]: cut off, not end_turn.
        (sse(chunk({"content": "Half an ans"})), "cut off"),
        # A 200 answer whose stream is empty (llama-cpp-python over its context size).
        (b"", "context size"),
        (sse(": ping\n\n"), "context size"),
        # A 200 answer that is not an event stream at all.
        (b"<html>Bad gateway</html>", "not with an event stream"),
        # A malformed SSE line after the stream began, quoted.
        (sse(chunk({"content": "x"})) + b"garbage line here\n\n", "garbage line here"),
        (sse(chunk({"content": "x"})) + b"data: {not json\n\n", "{not json"),
        # An error object inside the stream: the server's reason, not "cannot reach".
        (sse({"error": {"message": "Upstream overloaded", "code": 502}}), "Upstream overloaded"),
        (sse("event: error\n", {"message": "template failed"}), "template failed"),
        # vLLM's error shape (block/goose#8031).
        (sse({"object": "error", "message": "vLLM says no", "code": 400}), "vLLM says no"),
        # OpenRouter: an error after text began, with finish_reason "error".
        (
            sse(
                chunk({"content": "x"}),
                {
                    "error": {"code": "server_error", "message": "Provider disconnected"},
                    "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
                },
            ),
            "Provider disconnected",
        ),
    ],
)
def test_broken_streams_are_readable_failures(heron, fake_llm, workspace, body, expected):
    fake_llm.script(raw(body, content_type="text/html" if body.startswith(b"<") else None))
    fake_llm.script(text("still here"))
    client = heron()
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "hi")
    assert expected in err.value.message
    assert "Cannot reach" not in err.value.message
    assert chunks(client.prompt(session_id, "again")["updates"]) == ["still here"]


def test_a_non_streamed_json_answer_is_still_understood(heron, fake_llm, workspace):
    answer = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "whole"},
                "finish_reason": "stop",
            }
        ]
    }
    fake_llm.script(raw(json.dumps(answer), content_type="application/json"))
    client = heron()
    assert chunks(client.prompt(client.new_session(workspace), "hi")["updates"]) == ["whole"]


def test_a_server_that_never_answers_fails_within_request_timeout_in_total(
    heron, fake_llm, workspace, tmp_path
):
    config = tmp_path / "timeout.toml"
    config.write_text("request_timeout = 2\nmax_retries = 3\n")
    fake_llm.script(text("warm"), *[silent() for _ in range(5)])
    client = heron("--config", str(config))
    session_id = client.new_session(workspace)
    client.prompt(session_id, "warm up")  # openai imported, client made
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "hi", timeout=60)
    # The 2 s cover the retries too: no time is left for a second attempt (2 s per retry
    # would have sent all 4).
    assert len(fake_llm.requests) == 2
    assert "sent nothing for 2 s" in err.value.message


def test_a_surrogate_pair_split_across_deltas_is_joined(heron, fake_llm, workspace):
    # "\ud83d" then "\ude00": the two halves of 😀, as a model can stream them.
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"smile \\ud83d"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"\\ude00!"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":" lone \\udc00"},'
        b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    fake_llm.strict = True
    fake_llm.script(raw(body), text("ok"))
    client = heron()
    session_id = client.new_session(workspace)
    assert "".join(chunks(client.prompt(session_id, "hi")["updates"])) == "smile 😀! lone \ufffd"
    assert chunks(client.prompt(session_id, "again")["updates"]) == ["ok"]
    history = fake_llm.requests[1].body["messages"]
    assert history[2] == {"role": "assistant", "content": "smile 😀! lone \ufffd"}


def test_a_lone_surrogate_in_tool_arguments_does_not_poison_the_session(heron, fake_llm, workspace):
    args = '{"path": "x\ud800.txt"}'  # a lone surrogate in the arguments text
    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": args},
    }
    body = sse(chunk({"tool_calls": [call]}), chunk({}, "tool_calls"), "data: [DONE]\n\n")
    fake_llm.strict = True
    fake_llm.script(raw(body), text("recovered"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "read it")
    assert turn["stopReason"] == "end_turn"
    assert chunks(turn["updates"]) == ["recovered"]
    sent = fake_llm.requests[1].body["messages"]
    arguments = next(m for m in sent if m["role"] == "assistant")["tool_calls"][0]["function"]
    assert json.loads(arguments["arguments"]) == {"path": "x\ufffd.txt"}


def test_an_empty_answer_tells_the_user(heron, fake_llm, workspace):
    fake_llm.script(text())
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi")
    assert turn["stopReason"] == "end_turn"
    assert any("empty answer" in c and "chat template" in c for c in chunks(turn["updates"]))


def test_max_tokens_is_sent_only_when_set(heron, fake_llm, workspace):
    fake_llm.script(text("a"), text("b"))
    client = heron("--max-tokens", "64")
    client.prompt(client.new_session(workspace), "hi")
    other = heron(env={"HERON_MAX_TOKENS": None})
    other.prompt(other.new_session(workspace), "hi")
    bodies = [r.body for r in fake_llm.requests]
    assert bodies[0]["max_tokens"] == 64
    assert "max_tokens" not in bodies[1]


def test_a_rejected_optional_field_is_dropped_and_remembered(heron, fake_llm, workspace):
    fake_llm.script(
        error(400, "Unrecognized request argument supplied: stream_options"),
        text("a"),
        text("b"),
    )
    client = heron()
    session_id = client.new_session(workspace)
    assert chunks(client.prompt(session_id, "hi")["updates"]) == ["a"]
    assert chunks(client.prompt(session_id, "again")["updates"]) == ["b"]
    bodies = [r.body for r in fake_llm.requests]
    assert "stream_options" in bodies[0]
    assert "stream_options" not in bodies[1] and "stream_options" not in bodies[2]


def test_context_errors_in_each_servers_words_are_recognised(heron, fake_llm, workspace):
    fake_llm.script(
        error(400, "maximum context length is 8192 tokens", code="context_length_exceeded"),
        error(
            400,
            "request (25256 tokens) exceeds the available context size (8192 tokens)",
            type="exceed_context_size_error",
        ),
    )
    client = heron()
    session_id = client.new_session(workspace)
    for _ in range(2):
        with pytest.raises(RpcError) as err:
            client.prompt(session_id, "hi")
        assert "no longer fits the model's context window" in err.value.message


def test_a_log_file_that_cannot_be_opened_falls_back_to_stderr(heron, fake_llm, workspace):
    fake_llm.script(text("fine"))
    client = heron("--log-file", "/nonexistent/dir/heron.log")
    assert chunks(client.prompt(client.new_session(workspace), "hi")["updates"]) == ["fine"]
    assert "cannot open log file /nonexistent/dir/heron.log" in client.stderr


def test_debug_logs_each_request_body_and_response_status_without_the_key(
    heron, fake_llm, workspace
):
    fake_llm.script(text("fine"))
    client = heron(env={"OPENAI_API_KEY": "sk-secret-123"})
    client.prompt(client.new_session(workspace), "tell me")
    deadline = time.monotonic() + 5
    while "response: HTTP 200" not in client.stderr and time.monotonic() < deadline:
        time.sleep(0.05)
    log = client.stderr
    assert '"content": "tell me"' in log and "response: HTTP 200" in log
    assert "sk-secret-123" not in log


def test_a_server_whose_template_cannot_take_tools_is_reported_once_per_session(
    heron, fake_llm, workspace
):
    # With tool_calls = "native" (in `auto` Heron switches to text: test_local_models_e2e).
    fake_llm.props = {"chat_template_caps": {"supports_tools": False}}
    fake_llm.script(text("one"), text("two"), text("three"))
    client = heron("--tool-calls", "native")
    session_id = client.new_session(workspace)
    said = []
    for prompt in ("a", "b", "c"):
        said += chunks(client.prompt(session_id, prompt)["updates"])
    notices = [c for c in said if "cannot take tools" in c]
    assert len(notices) == 1 and "--jinja" in notices[0]
    assert [r.path for r in fake_llm.other_requests].count("/props") == 1


def test_a_server_that_supports_tools_gets_no_notice(heron, fake_llm, workspace):
    fake_llm.props = {"chat_template_caps": {"supports_tools": True}}
    fake_llm.script(text("one"), text("two"))
    client = heron()
    session_id = client.new_session(workspace)
    said = chunks(client.prompt(session_id, "a")["updates"])
    said += chunks(client.prompt(session_id, "b")["updates"])
    assert said == ["one", "two"]
