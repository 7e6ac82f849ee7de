"""Tests of the harness itself: the fake OpenAI server (through the real `openai`
package, as the agent uses it) and the ACP schema validator."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from acp_schema import validate_agent_message, validate_client_payload
from fake_openai import Call, FakeOpenAI, disconnect, error, stall, text, tool_calls


@pytest.fixture
def client(fake_llm: FakeOpenAI) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake_llm.base_url, api_key="x", max_retries=0) as c:
        yield c


def stream(client: openai.OpenAI, **extra: Any) -> openai.Stream[Any]:
    messages = [{"role": "user", "content": "hi"}]
    return client.chat.completions.create(
        model="fake-model", messages=messages, stream=True, **extra
    )


def test_text_chunks_arrive_in_order(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_llm.script(text("Hel", "lo", " world"))
    chunks = list(stream(client))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello world"
    assert [c.choices[0].delta.content for c in chunks[1:-1]] == ["Hel", "lo", " world"]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[0].model == "fake-model"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_deltas_come_first(
    fake_llm: FakeOpenAI, client: openai.OpenAI, field: str
) -> None:
    fake_llm.script(text("answer", reasoning=["think ", "hard"], reasoning_field=field))
    deltas = [c.choices[0].delta for c in stream(client)]
    # Not part of the OpenAI types: the SDK keeps unknown fields as extras.
    thoughts = [(d.model_extra or {}).get(field) for d in deltas]
    assert [t for t in thoughts if t] == ["think ", "hard"]
    assert [d.content for d in deltas if d.content] == ["answer"]
    assert thoughts.index("hard") < [d.content for d in deltas].index("answer")


def test_tool_call_deltas_reassemble(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    args = {"path": "src/app.py", "note": 'ünïcode "quoted"'}
    fake_llm.script(
        tool_calls(Call("read_file", args, id="call_1"), Call("broken", '{"x": '), split=4)
    )
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in stream(client):
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for tc in choice.delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += tc.id or ""
            call["name"] += (tc.function and tc.function.name) or ""
            call["arguments"] += (tc.function and tc.function.arguments) or ""
    assert finish == "tool_calls"
    assert calls[0]["id"] == "call_1"
    assert calls[0]["name"] == "read_file"
    assert json.loads(calls[0]["arguments"]) == args
    assert calls[1]["name"] == "broken"
    assert calls[1]["arguments"] == '{"x": '  # sent verbatim, invalid JSON and all
    assert calls[1]["id"].startswith("call_")


def test_usage_chunk_when_requested(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    fake_llm.script(text("a", usage=usage), text("b"))
    chunks = list(stream(client, stream_options={"include_usage": True}))
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 7
    assert all(c.usage is None for c in stream(client))


@pytest.mark.parametrize(
    ("status", "exc"),
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_error_status_raises(
    fake_llm: FakeOpenAI, client: openai.OpenAI, status: int, exc: type[Exception]
) -> None:
    fake_llm.script(error(status, "nope", headers={"retry-after": "0"}))
    with pytest.raises(exc, match="nope"):
        stream(client)


def test_empty_script_fails_loudly(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError, match="no scripted response left"):
        stream(client)


def test_non_streaming_request_is_rejected(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_llm.script(text("kept"))
    with pytest.raises(openai.BadRequestError, match="streaming is required"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert fake_llm.pending == 1


def test_disconnect_raises_mid_stream(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_llm.script(disconnect(text("one", "two", "three"), chunks=2))
    received = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream(client):
            received.append(chunk.choices[0].delta.content)
    assert received == ["", "one"]


def test_stall_detects_client_hangup(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_llm.script(stall(text("partial")))
    s = stream(client)
    it = iter(s)
    assert next(it).choices[0].delta.role == "assistant"
    assert next(it).choices[0].delta.content == "partial"
    assert not fake_llm.client_gone.is_set()
    s.close()  # what an agent does on session/cancel
    assert fake_llm.client_gone.wait(5)
    assert fake_llm.disconnects == 1


def test_close_is_prompt_with_stalled_stream() -> None:
    fake = FakeOpenAI()
    slow = openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0)
    fake.script(stall())
    s = stream(slow)
    started = time.monotonic()
    fake.close()
    assert time.monotonic() - started < 20  # the stall lasts until the client goes
    with pytest.raises(openai.APIConnectionError):
        list(s)
    slow.close()


def test_callable_response_and_recording(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_llm.script(lambda body: text(f"you said {body['messages'][-1]['content']}"))
    content = "".join(c.choices[0].delta.content or "" for c in stream(client, temperature=0))
    assert content == "you said hi"
    (req,) = fake_llm.wait_for_requests(1)
    assert req.path == "/v1/chat/completions"
    assert req.body["stream"] is True and req.body["temperature"] == 0
    assert req.headers["authorization"] == "Bearer x"
    fake_llm.models = ["fake-model", "fake-model-mini"]
    assert [m.id for m in client.models.list()] == ["fake-model", "fake-model-mini"]
    assert fake_llm.other_requests[0].path == "/v1/models"
    assert len(fake_llm.requests) == 1


def test_delay_spaces_chunks(fake_llm: FakeOpenAI, client: openai.OpenAI) -> None:
    fake_llm.script(text("a", "b", delay=0.1))
    started = time.monotonic()
    list(stream(client))
    assert time.monotonic() - started >= 0.3  # 4 gaps between role, a, b, finish, [DONE]


# ---------------------------------------------------------------- ACP schema validation


def _prompt_response(result: Any) -> list[str]:
    return validate_agent_message(
        {"jsonrpc": "2.0", "id": 0, "result": result}, {0: "session/prompt"}.get
    )


def _update(update: dict[str, Any]) -> list[str]:
    msg = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": update},
    }
    return validate_agent_message(msg, lambda _id: None)


def test_valid_prompt_response_passes() -> None:
    assert _prompt_response({"stopReason": "end_turn"}) == []


def test_bogus_stop_reason_fails() -> None:
    (problem,) = _prompt_response({"stopReason": "bogus"})
    assert "stopReason" in problem and "bogus" in problem


def test_tool_call_without_title_fails() -> None:
    assert _update({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.py"}) == []
    (problem,) = _update({"sessionUpdate": "tool_call", "toolCallId": "t1"})
    assert "'title' is a required property" in problem


def test_unknown_session_update_fails() -> None:
    (problem,) = _update({"sessionUpdate": "telepathy"})
    assert "telepathy" in problem


def test_message_framing_rules() -> None:
    known = {0: "initialize"}.get
    assert validate_agent_message({"jsonrpc": "2.0", "id": None, "result": {}}, known)
    assert validate_agent_message({"jsonrpc": "2.0", "id": 0}, known)
    assert validate_agent_message({"jsonrpc": "2.0", "id": 9, "error": {"code": 1}}, known)
    assert validate_agent_message({"jsonrpc": "2.0", "method": "fs/nope", "id": 1}, known)
    parse_error = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    assert validate_agent_message(parse_error, known) == []
    assert validate_agent_message({"jsonrpc": "2.0", "method": "_heron/x"}, known) == []


def test_client_payload_validation() -> None:
    ok = {"outcome": {"outcome": "selected", "optionId": "allow"}}
    assert validate_client_payload("RequestPermissionResponse", ok) == []
    assert validate_client_payload("RequestPermissionResponse", {"outcome": {"outcome": "maybe"}})
