"""Replays of what real OpenAI-compatible servers sent (tests/data/real-servers/README.md).

The scripted fake serves the captured bytes unchanged, so Heron meets each server's exact wire
format: llama-cpp-python's repeated tool-call names and `: ping` comments, llama-server's usage
chunk with `choices: []` and `timings`, and their error bodies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from acp_client import RpcError
from fake_openai import Raw, text

CAPTURES = Path(__file__).parent / "data" / "real-servers"
LLAMA_CPP_PYTHON = CAPTURES / "llama-cpp-python-0.3.36"
LLAMA_SERVER = CAPTURES / "llama-server-0c1e570"


def replay(path: Path, status: int = 200) -> Raw:
    """The captured answer: `.sse` files as an event stream, `.json` files as an error body."""
    if path.suffix == ".sse":
        return Raw(path.read_bytes(), status, "text/event-stream; charset=utf-8")
    status = int(path.name.split("-")[1]) if path.name.startswith("error-") else status
    return Raw(path.read_bytes(), status, "application/json")


def chunks(updates, kind="agent_message_chunk"):
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == kind]


def test_llama_cpp_python_tool_call_runs_and_the_follow_up_is_accepted(heron, fake_llm, workspace):
    fake_llm.strict = True  # like llama-cpp-python: null assistant content is a 500
    fake_llm.script(replay(LLAMA_CPP_PYTHON / "tool-call-stream.sse"), text("listed"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "list files")
    assert turn["stopReason"] == "end_turn", turn
    start = next(u for u in turn["updates"] if u["sessionUpdate"] == "tool_call")
    assert start["title"] == "list_directory"
    follow_up = fake_llm.requests[1].body["messages"]
    assistant = next(m for m in follow_up if m["role"] == "assistant")
    assert assistant["content"] == ""
    function = assistant["tool_calls"][0]["function"]
    assert function["name"] == "list_directory"  # not list_directorylist_directory…
    assert json.loads(function["arguments"]) == {
        "path": "./user/p5_forced-1/directory/p5-forced-1.py"
    }
    tool_result = next(m for m in follow_up if m["role"] == "tool")["content"]
    assert "Unknown tool" not in tool_result
    assert chunks(turn["updates"]) == ["listed"]


def test_llama_server_text_stream_with_usage_chunk(heron, fake_llm, workspace):
    fake_llm.script(replay(LLAMA_SERVER / "text-stream-with-usage.sse"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "who are you")
    assert "".join(chunks(turn["updates"])).startswith("You are Heron,")
    assert turn["stopReason"] == "max_tokens"  # the capture ends with finish_reason "length"


@pytest.mark.parametrize(
    "capture",
    [
        LLAMA_CPP_PYTHON / "error-400-context-length-nonstream.json",
        LLAMA_SERVER / "error-400-context-size.json",
    ],
)
def test_context_size_errors_of_real_servers(heron, fake_llm, workspace, capture):
    fake_llm.script(replay(capture))
    client = heron()
    with pytest.raises(RpcError) as err:
        client.prompt(client.new_session(workspace), "a long prompt")
    assert "no longer fits the model's context window" in err.value.message
    assert "8192" in err.value.message


def test_llama_cpp_python_empty_200_stream_names_the_likely_cause(heron, fake_llm, workspace):
    # Over its context size with stream: true, llama-cpp-python answers 200 and sends nothing.
    fake_llm.script(Raw(b"", 200, "text/event-stream; charset=utf-8"))
    client = heron()
    with pytest.raises(RpcError) as err:
        client.prompt(client.new_session(workspace), "a long prompt")
    assert "context size" in err.value.message


def test_a_pydantic_dump_500_is_trimmed_to_the_servers_message(heron, fake_llm, workspace):
    fake_llm.script(*[replay(LLAMA_CPP_PYTHON / "error-500-assistant-content-null.json")] * 5)
    client = heron("--config", str(_no_retries(workspace)))
    with pytest.raises(RpcError) as err:
        client.prompt(client.new_session(workspace), "hi")
    message = err.value.message
    assert "HTTP 500" in message and "validation errors" in message
    assert len(message) < 400
    assert "/models/server/lib" not in message and "site-packages" not in message


def _no_retries(workspace: str) -> Path:
    config = Path(workspace).parent / "no-retries.toml"
    config.write_text("max_retries = 0\n")
    return config


# ------------------------------------------------ llama.cpp build 11549 through xllamacpp (27)

XLLAMACPP = CAPTURES / "xllamacpp-11549"


def props(name: str) -> dict:
    return json.loads((XLLAMACPP / name).read_text())


def said(updates) -> str:
    return "".join(chunks(updates))


def test_smollm2_text_tool_call_runs_and_its_imitated_result_is_never_shown(
    heron, fake_llm, workspace
):
    """SmolLM2's own template cannot take tools (`/props`): `auto` writes them in text. The
    captured call, one token per delta, runs; the captured answer after its result begins by
    imitating a tool result: Heron ends the answer there and shows none of it."""
    Path(workspace, "README.md").write_text("# Greeter\nA tiny project.\n")
    fake_llm.props = props("props-smollm2-own-template.json")
    fake_llm.script(
        replay(XLLAMACPP / "textcall-read_file.smollm2.sse"),
        replay(XLLAMACPP / "textcall-read_file-followup.smollm2.sse"),
    )
    client = heron()
    turn = client.prompt(client.new_session(workspace), "what does the readme say?")
    assert turn["stopReason"] == "end_turn"
    start = next(u for u in turn["updates"] if u["sessionUpdate"] == "tool_call")
    assert start["title"] == "read_file"
    shown = said(turn["updates"])
    assert "Greeter" not in shown and "very simple example" not in shown
    assert "began to write a tool's result itself" in shown
    first, follow_up = (r.body for r in fake_llm.requests)
    assert "tools" not in first and first["stop"] == ["<tool_response>"]
    assert "# Greeter" in follow_up["messages"][-1]["content"]
    sizes = [u["size"] for u in turn["updates"] if u["sessionUpdate"] == "usage_update"]
    assert sizes and set(sizes) == {8192}  # the window /props names


def test_smollm2_with_the_qwen25_template_gets_native_tools(heron, fake_llm, workspace):
    fake_llm.props = props("props-smollm2-qwen25-template.json")
    fake_llm.script(replay(XLLAMACPP / "sse-ping-comments-then-text.smollm2.sse"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "where is the code?")
    assert "tools" in fake_llm.requests[0].body and "stop" not in fake_llm.requests[0].body
    # SSE comments first, then a text answer that is a code fence: shown as it is.
    assert said(turn["updates"]) == "```python\n# src\nutil.py\n```"


def test_a_server_without_jinja_refuses_tools_once_and_auto_goes_on_in_text(
    heron, fake_llm, workspace
):
    """HTTP 500 "tools param requires --jinja flag" will not change on retry: one refused
    request, not four, then the same prompt in text mode."""
    fake_llm.script(
        replay(XLLAMACPP / "error-500-tools-param-requires-jinja.json"),
        *[replay(XLLAMACPP / "error-500-tools-param-requires-jinja.json")] * 3,
    )
    fake_llm.before_script = lambda body: None if "tools" in body else text("in text now")
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi")
    assert turn["stopReason"] == "end_turn"
    assert said(turn["updates"]).endswith("in text now")
    assert "refused the tools parameter" in said(turn["updates"])
    assert ["tools" in r.body for r in fake_llm.requests] == [True, False]


def test_the_window_in_v1_models_metadata(heron, fake_llm, workspace):
    fake_llm.models_body = (XLLAMACPP / "v1-models-smollm2-ctx4096.json").read_bytes()
    fake_llm.script(text("hello"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi")
    assert [u["size"] for u in turn["updates"] if u["sessionUpdate"] == "usage_update"] == [4096]


def test_gemmas_alternation_error_is_readable_and_the_session_goes_on(heron, fake_llm, workspace):
    fake_llm.script(replay(XLLAMACPP / "error-400-gemma-roles-must-alternate.json"), text("ok"))
    client = heron()
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "hi")
    assert "Conversation roles must alternate" in err.value.message
    assert len(err.value.message) < 400
    assert client.prompt(session_id, "again")["stopReason"] == "end_turn"
    assert [m["role"] for m in fake_llm.requests[-1].body["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
    ]


def test_a_first_request_refused_at_2048_tokens_says_the_window_is_too_small(
    heron, fake_llm, workspace
):
    """The server did not say its window up front; its refusal of Heron's very first request
    names both sizes, which show Heron's own part cannot fit: said plainly, once."""
    fake_llm.script(replay(XLLAMACPP / "error-400-exceed-context-2048-first-request.json"))
    client = heron()
    with pytest.raises(RpcError) as err:
        client.prompt(client.new_session(workspace), "hi")
    message = err.value.message
    assert "context is 2,048 tokens" in message and "-c 8192" in message
    # Counted at the server's own rate (its count of the refused request), for the tools a
    # 2,048-token window gets (the optional ones left out): still more than the window.
    needed = re.search(r"instructions and tools need about ([\d,]+)", message)
    assert needed and int(needed[1].replace(",", "")) > 2048
    assert len(fake_llm.requests) == 1  # not retried: nothing Heron can cut would fit


def test_a_paste_refused_at_4096_tokens_is_cut_to_the_count_the_server_named(
    heron, fake_llm, workspace
):
    """The captured refusal: 8,088 tokens for a 4,096-token window. Heron cuts the paste by
    the server's count (not characters) and the retry fits the window."""
    fake_llm.script(
        replay(XLLAMACPP / "error-400-exceed-context-4096.json"), text("It is a long log.")
    )
    # About 24,000 characters: with Heron's ~11,000 the request the capture refused (8,088).
    paste = "BEGIN\n" + "2026-11-27 07:17:01 INFO worker 3 finished job 1234 in 52 ms\n" * 380
    client = heron()
    turn = client.prompt(client.new_session(workspace), "what does this log say?\n" + paste)
    assert turn["stopReason"] == "end_turn", turn
    assert said(turn["updates"]).endswith("It is a long log.")
    assert "the model reads its start and its end" in said(turn["updates"])
    first, retry = fake_llm.requests
    assert first.status == 200 and retry.status == 200  # the capture answered the first
    assert retry.prompt_tokens <= 4096 * 0.85, retry.prompt_tokens  # as the fake counts
    assert retry.body["messages"][-1]["content"].startswith("what does this log say?\nBEGIN")
