"""Local model servers, first class (issue 19), end to end against the scripted fake.

- the real context size: named by an overflow error, or said up front (llama-server `/props`,
  `/v1/models` metadata, Ollama `/api/show`), and compaction that fits it;
- tools without native tool calling: `<tool_call>` blocks in the text (`tool_calls` setting),
  and `auto` switching to them when the server shows it cannot take `tools`;
- requests a prompt cache can reuse: each starts with the previous one, byte for byte;
- `heron exec` taking the same settings.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fake_local
import pytest
from acp_client import RpcError
from conftest import _heron_executable, heron_env
from fake_openai import Call, Raw, text, tool_calls

CAPTURES = Path(__file__).parent / "data" / "real-servers"
JSON = "application/json"
LLAMA_SERVER = CAPTURES / "llama-server-0c1e570"
LLAMA_CPP_PYTHON = CAPTURES / "llama-cpp-python-0.3.36"
COMPACT_AT = 0.8  # agent.context.compaction: a request must fit under this share of the window
CHARS_PER_TOKEN = 4  # agent.context.usage's estimate


def capture(path: Path) -> Raw:
    status = int(path.name.split("-")[1])
    return Raw(path.read_bytes(), status, "application/json")


def tokens(request: Any) -> int:
    """The request's estimated size in tokens, as Heron estimates it (messages and tools)."""
    body = request.body
    size = sum(len(json.dumps(m, ensure_ascii=False)) for m in body["messages"])
    size += len(json.dumps(body.get("tools") or [], ensure_ascii=False))
    return size // CHARS_PER_TOKEN


def is_summary_request(request: Any) -> bool:
    return "You summarize a coding session" in request.body["messages"][0]["content"]


def chunks(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]


def usage_sizes(updates: list[dict[str, Any]]) -> list[int]:
    return [u["size"] for u in updates if u["sessionUpdate"] == "usage_update"]


# ------------------------------------------------------------------ 1. the real context size


def refused_for_its_length(path: Path) -> Callable[[dict[str, Any]], Raw]:
    """The captured overflow error, in that server's words, with the numbers of the request
    it refuses (the fake's own count): a server names the prompt it was sent."""
    captured = path.read_text()

    def answer(body: dict[str, Any]) -> Raw:
        counted = fake_local.count_tokens(fake_local.rendered(body))
        return Raw(re.sub(r"\b25(256|014)\b", str(counted), captured).encode(), 400, JSON)

    return answer


def summaries(body: dict[str, Any]) -> Any:
    """The fake's answer to Heron's summary requests, apart from the scripted ones."""
    return text("summary of the work so far") if "You summarize" in str(body["messages"]) else None


@pytest.mark.parametrize(
    "overflow",
    [
        LLAMA_SERVER / "error-400-context-size.json",
        LLAMA_CPP_PYTHON / "error-400-context-length-nonstream.json",
    ],
)
def test_an_overflow_names_the_size_and_the_retry_fits_it(heron, fake_llm, workspace, overflow):
    """The error names 8192 tokens and what the request took: the retry (and the next turn)
    fit under COMPACT_AT of 8192, not of the 128000 Heron assumed."""
    long = "word " * 2400  # 12000 characters, about 2400 tokens as the fake counts
    fake_llm.before_script = summaries
    fake_llm.script(
        text("ok one"),
        text("ok two"),
        refused_for_its_length(overflow),
        text("ok three"),
        text("ok four"),
    )
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "one " + long)
    client.prompt(session_id, "two " + long)
    turn = client.prompt(session_id, "three " + long)
    assert turn["stopReason"] == "end_turn"
    assert "ok three" in "".join(chunks(turn["updates"]))
    assert usage_sizes(turn["updates"])[-1] == 8192
    main = [r for r in fake_llm.requests if not is_summary_request(r)]
    assert main[2].prompt_tokens > 8192  # refused
    retry = main[3]
    assert retry.prompt_tokens <= COMPACT_AT * 8192, retry.prompt_tokens
    assert "three word" in json.dumps(retry.body["messages"])  # the request itself stays
    # Remembered: the next turn is compacted before it is sent, without another overflow.
    turn = client.prompt(session_id, "four " + long)
    assert "ok four" in "".join(chunks(turn["updates"]))
    last = fake_llm.requests[-1]
    assert is_summary_request(fake_llm.requests[-2])
    assert last.prompt_tokens <= COMPACT_AT * 8192, last.prompt_tokens
    assert usage_sizes(turn["updates"])[-1] == 8192


@pytest.mark.parametrize(
    ("setup", "args", "size"),
    [
        ("props", (), 4096),  # llama-server GET /props default_generation_settings.n_ctx
        ("models", (), 8192),  # llama-server /v1/models data[].meta.n_ctx (captured)
        ("ollama", (), 6144),  # Ollama /api/show parameters num_ctx
        ("props", ("--context-window", "5000"), 5000),  # the setting wins
    ],
)
def test_the_size_the_server_says_up_front_is_used(heron, fake_llm, workspace, setup, args, size):
    if setup == "props":
        # llama.cpp tools/server: GET /props answers default_generation_settings (n_ctx among
        # them) and chat_template_caps.
        fake_llm.props = {
            "default_generation_settings": {"n_ctx": 4096},
            "chat_template_caps": {"supports_tools": True},
        }
    elif setup == "models":
        fake_llm.models_body = (LLAMA_SERVER / "models.json").read_bytes()
    else:
        fake_llm.ollama_show = {"parameters": 'num_ctx 6144\nstop "<end_of_turn>"'}
    fake_llm.script(text("hello"))
    client = heron(*args)
    turn = client.prompt(client.new_session(workspace), "hi")
    assert usage_sizes(turn["updates"]) == [size]


def test_a_huge_write_is_shortened_in_the_history_not_summarized(heron, fake_llm, workspace):
    content = "x" * 600_000
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "big.txt", "content": content})),
        text("written"),
    )
    client = heron("--mode", "full-access")
    turn = client.prompt(client.new_session(workspace), "write a big file")
    assert turn["stopReason"] == "end_turn"
    assert Path(workspace, "big.txt").read_text() == content
    assert len(fake_llm.requests) == 2  # no summary was asked for
    follow_up = fake_llm.requests[1]
    call = next(m for m in follow_up.body["messages"] if m.get("tool_calls"))
    arguments = json.loads(call["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"path": "big.txt", "content": "[600 kB written to big.txt]"}
    assert tokens(follow_up) <= COMPACT_AT * 128_000


def test_the_results_the_model_has_not_seen_are_never_summarized(heron, fake_llm, workspace):
    lines = [f"line {i:04d} " + "y" * 70 for i in range(300)] + ["THE-LAST-LINE"]
    Path(workspace, "big.txt").write_text("\n".join(lines) + "\n")
    fake_llm.script(
        text("noted"),
        tool_calls(Call("read_file", {"path": "big.txt"}, id="r1")),
        text("summary"),
        text("read it"),
    )
    client = heron("--context-window", "8192", "--mode", "full-access")
    session_id = client.new_session(workspace)
    client.prompt(session_id, "remember: " + "note " * 1500)
    turn = client.prompt(session_id, "read big.txt")
    assert turn["stopReason"] == "end_turn"
    follow_up = fake_llm.requests[-1]
    assert not is_summary_request(follow_up)
    results = [m for m in follow_up.body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["r1"]
    assert "line 0000" in results[0]["content"] and "THE-LAST-LINE" in results[0]["content"]
    assert tokens(follow_up) <= COMPACT_AT * 8192
    summarized = [r for r in fake_llm.requests if is_summary_request(r)]
    assert all("THE-LAST-LINE" not in json.dumps(r.body) for r in summarized)


def test_text_then_done_without_a_finish_reason_is_cut_off(heron, fake_llm, workspace):
    # llama-cpp-python ends an answer like this when a second request reaches it.
    body = "".join(
        f"data: {json.dumps({'choices': [{'index': 0, 'delta': d, 'finish_reason': None}]})}\n\n"
        for d in ({"role": "assistant", "content": ""}, {"content": "Half an "}, {"content": "ans"})
    )
    fake_llm.script(Raw((body + "data: [DONE]\n\n").encode()), text("again"))
    client = heron()
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "tell me")
    assert "cut off" in err.value.message and "finish reason" in err.value.message
    shown = "".join(chunks(client.updates(session_id)))
    assert "Half an ans" in shown  # what the user saw stays
    client.prompt(session_id, "go on")
    assistant = [m for m in fake_llm.requests[1].body["messages"] if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": "Half an ans"}]


# ------------------------------------------------------------- 2. tool calls written as text


def tool_starts(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "tool_call"]


def final_statuses(updates: list[dict[str, Any]]) -> dict[str, str]:
    statuses: dict[str, str] = {}
    for u in updates:
        if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u:
            statuses[u["toolCallId"]] = u["status"]
    return statuses


def test_text_mode_runs_tool_call_blocks_through_the_same_path(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("alpha\n")
    Path(workspace, "b.txt").write_text("beta\n")
    fake_llm.script(
        tool_calls(
            Call("read_file", {"path": "a.txt"}),
            Call("read_file", {"path": "b.txt"}),
            Call("read_file", '{"path": "c.txt"'),  # broken JSON
            text="Let me look.",
            style="text",
        ),
        text("done"),
    )
    client = heron("--tool-calls", "text")
    turn = client.prompt(client.new_session(workspace), "read them")
    assert turn["stopReason"] == "end_turn"
    first = fake_llm.requests[0].body
    assert "tools" not in first
    system = first["messages"][0]["content"]
    assert "<tool_call>" in system and '"name":"read_file"' in system
    shown = "".join(chunks(turn["updates"]))
    assert shown == "Let me look.\ndone"  # the markup is never shown
    starts = tool_starts(turn["updates"])
    assert [s["title"] for s in starts] == ["read_file"] * 3
    statuses = final_statuses(turn["updates"])
    assert [statuses[s["toolCallId"]] for s in starts] == ["completed", "completed", "failed"]
    follow_up = fake_llm.requests[1].body["messages"]
    assert "tools" not in fake_llm.requests[1].body
    assert [m["role"] for m in follow_up] == ["system", "user", "assistant", "user"]
    assert follow_up[2]["content"].startswith("Let me look.\n<tool_call>\n")
    results = follow_up[3]["content"]
    assert results.count("<tool_response>") == 3
    assert "alpha" in results and "beta" in results and "not valid JSON" in results


def test_auto_switches_to_text_when_the_server_refuses_tools(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("alpha\n")
    fake_llm.reject_fields = {"tools": "openai"}  # "Unsupported parameter: 'tools' …" (400)
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "a.txt"}), style="text"),
        text("done"),
        text("second session"),
    )
    client = heron()
    turn = client.prompt(client.new_session(workspace), "read a.txt")
    assert turn["stopReason"] == "end_turn"
    assert "tools" in fake_llm.requests[0].body  # refused, then:
    assert all("tools" not in r.body for r in fake_llm.requests[1:])
    notices = [c for c in chunks(turn["updates"]) if "<tool_call> blocks" in c]
    assert len(notices) == 1 and "refused the tools parameter" in notices[0]
    assert list(final_statuses(turn["updates"]).values()) == ["completed"]
    # Remembered for the endpoint and model: another session starts in text mode (told why).
    turn = client.prompt(client.new_session(workspace), "hi")
    assert "tools" not in fake_llm.requests[-1].body
    notices = [c for c in chunks(turn["updates"]) if "<tool_call> blocks" in c]
    assert len(notices) == 1 and "refused the tools parameter" in notices[0]
    assert len(fake_llm.requests) == 4


def test_auto_uses_text_when_props_say_the_template_cannot_take_tools(heron, fake_llm, workspace):
    fake_llm.props = {"chat_template_caps": {"supports_tools": False}}
    fake_llm.script(tool_calls(Call("list_directory", {"path": "."}), style="text"), text("ok"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "list")
    assert all("tools" not in r.body for r in fake_llm.requests)
    assert list(final_statuses(turn["updates"]).values()) == ["completed"]
    notices = [c for c in chunks(turn["updates"]) if "<tool_call> blocks" in c]
    assert len(notices) == 1 and "chat template cannot take tools" in notices[0]


def test_auto_switches_when_the_model_writes_its_calls_as_text(heron, fake_llm, workspace):
    """With `tools` sent, a block written as text never runs in that answer (issue 24: text
    that only looks like a call, a quoted file, must not act); it fails saying why, the user
    is told of the switch, and the model's next block, in text mode, runs."""
    Path(workspace, "a.txt").write_text("alpha\n")
    block = tool_calls(Call("read_file", {"path": "a.txt"}), style="text")
    fake_llm.script(block, block, text("done"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "read a.txt")
    assert "tools" in fake_llm.requests[0].body
    assert list(final_statuses(turn["updates"]).values()) == ["failed", "completed"]
    assert not any('"arguments"' in c for c in chunks(turn["updates"]))  # no markup shown
    notices = [c for c in chunks(turn["updates"]) if "<tool_call> blocks" in c]
    assert len(notices) == 1 and "wrote its tool calls as text" in notices[0]
    assert "tools" not in fake_llm.requests[1].body
    assert "written as text while the tools were offered natively" in json.dumps(
        fake_llm.requests[1].body["messages"][-1]
    )
    assert "alpha" in fake_llm.requests[2].body["messages"][-1]["content"]


def test_native_mode_sends_tools_even_to_a_template_without_them(heron, fake_llm, workspace):
    fake_llm.props = {"chat_template_caps": {"supports_tools": False}}
    fake_llm.script(text("plain"))
    client = heron("--tool-calls", "native")
    client.prompt(client.new_session(workspace), "hi")
    assert "tools" in fake_llm.requests[0].body


# ------------------------------------------------------------------- 3. cache-friendly requests


@pytest.mark.parametrize("mode", ["native", "text"])
def test_each_request_starts_with_the_previous_one(heron, fake_llm, workspace, mode):
    Path(workspace, "AGENTS.md").write_text("Use tabs.\n")
    Path(workspace, "a.txt").write_text("alpha\n")
    fake_llm.text_tool_calls = mode == "text"
    for i in range(3):
        fake_llm.script(
            tool_calls(Call("read_file", {"path": "a.txt"}), Call("list_directory", {"path": "."})),
            text(f"answer {i}"),
        )
    client = heron("--mode", "full-access")
    session_id = client.new_session(workspace)
    for i in range(3):
        assert client.prompt(session_id, f"question {i}")["stopReason"] == "end_turn"
    bodies = [r.body for r in fake_llm.requests]
    assert len(bodies) == 6
    for previous, current in itertools.pairwise(bodies):
        before = [json.dumps(m) for m in previous["messages"]]
        after = [json.dumps(m) for m in current["messages"]]
        assert after[: len(before)] == before
        assert json.dumps(previous.get("tools")) == json.dumps(current.get("tools"))


# ------------------------------------------------------------------------------ 4. heron exec


def test_exec_takes_max_tokens_context_window_and_tool_calls(fake_llm, workspace, heron_home):
    fake_llm.script(text("hello"))
    done = subprocess.run(
        [
            *(_heron_executable(), "exec", "--cwd", workspace, "--json", "--max-tokens", "77"),
            *("--context-window", "4321", "--tool-calls", "text", "hi"),
        ],
        capture_output=True,
        text=True,
        env=heron_env(fake_llm, heron_home, None),
        cwd=heron_home,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    body = fake_llm.requests[0].body
    assert body["max_tokens"] == 77 and "tools" not in body
    sizes = [
        json.loads(line)["update"]["size"]
        for line in done.stdout.splitlines()
        if '"usage_update"' in line
    ]
    assert sizes == [4321]
