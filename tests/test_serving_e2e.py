"""Heron keeps serving: no envelope, id, byte sequence or slow editor crashes or hangs it."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError
from conftest import _heron_executable, heron_env
from fake_openai import FakeOpenAI, stall, text


def write_raw(client: AcpClient, data: bytes) -> None:
    """Bytes as they are, untracked by the client (whose bookkeeping needs hashable ids)."""
    client._write(data)


def still_serves(client: AcpClient, workspace: str) -> None:
    assert client.new_session(workspace).startswith("sess_")
    assert client.proc is not None and client.proc.poll() is None


BAD_IDS = ['{"a":1}', "[1]", "true", "1.5", "1e400", "123456789012345678901234567890", "null"]


@pytest.mark.parametrize("bad_id", BAD_IDS)
def test_a_request_id_that_is_not_a_string_or_int64_gets_invalid_request(heron, workspace, bad_id):
    client = heron()
    line = '{"jsonrpc":"2.0","id":%s,"method":"session/new","params":{"cwd":%s,"mcpServers":[]}}'
    write_raw(client, (line % (bad_id, json.dumps(workspace))).encode() + b"\n")
    answer = client.next_response_for(None)
    assert answer["error"]["code"] == -32600
    assert "id" in answer["error"]["data"]
    still_serves(client, workspace)
    # the request did not run: no session was created for it, only the one above
    assert len([r for r in client.responses if "sessionId" in (r.get("result") or {})]) == 1


ODD_RESPONSES = [
    '{"jsonrpc":"2.0","id":{"a":1},"result":{}}',
    '{"jsonrpc":"2.0","id":[1],"error":{"code":1,"message":"x"}}',
    '{"jsonrpc":"2.0","id":true,"result":{"outcome":{"outcome":"selected","optionId":"allow_once"}}}',
    '{"jsonrpc":"2.0","id":1e400,"result":{}}',
    '{"jsonrpc":"2.0","id":12345,"error":{"code":"not a number","message":[]}}',
]


def test_odd_responses_while_heron_waits_for_an_answer_change_nothing(heron, fake_llm, workspace):
    from fake_openai import Call, tool_calls

    fake_llm.script(
        tool_calls(Call("write_file", {"path": "new.txt", "content": "x"})), text("done")
    )
    client = heron()
    client.permission_gate = threading.Event()  # hold the editor's own answer back
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "write it")
    asked = client.wait_for_agent_request("session/request_permission")
    for response in ODD_RESPONSES:  # `true` must not pass for id 1, nor {} crash the lookup
        write_raw(client, response.encode() + b"\n")
    # ... and an error whose code is not a number answers the real question: rejected.
    bad_error = {"jsonrpc": "2.0", "id": asked.id, "error": {"code": "x", "message": None}}
    write_raw(client, json.dumps(bad_error).encode() + b"\n")
    assert pending.result(timeout=10) == {"stopReason": "end_turn"}
    client.permission_gate.set()
    statuses = [u.get("status") for u in pending.updates() if u.get("status")]
    assert statuses[-1] == "failed"
    assert not (Path(workspace) / "new.txt").exists()
    still_serves(client, workspace)


@pytest.mark.parametrize(
    "params", ['{"requestId":{"a":1}}', '{"requestId":[1]}', '{"requestId":1e400}', "[1]"]
)
def test_cancel_request_with_a_request_id_of_any_type_is_harmless(heron, workspace, params):
    client = heron()
    write_raw(
        client, b'{"jsonrpc":"2.0","method":"$/cancel_request","params":%s}\n' % params.encode()
    )
    still_serves(client, workspace)


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ('{"jsonrpc":"2.0","id":"m1","method":5,"params":{}}', "method"),
        ('{"jsonrpc":"2.0","id":"m2","method":null}', "method"),
        ('{"jsonrpc":"2.0","id":"m3","method":"session/new","params":"x"}', "params"),
        ('{"jsonrpc":"2.0","id":"m4","method":"session/new","params":null}', "params"),
        ('{"jsonrpc":"1.0","id":"m5","method":"session/new","params":{}}', "jsonrpc"),
    ],
)
def test_a_malformed_request_gets_invalid_request_with_its_id(heron, workspace, line, complaint):
    client = heron()
    message = json.loads(line)
    client.send_raw(line.encode() + b"\n")
    # The id is echoed when the request is identifiable: a valid id and a string method.
    answer = client.next_response_for(None if complaint == "method" else message["id"])
    assert answer["error"]["code"] == -32600 and complaint in answer["error"]["data"]
    still_serves(client, workspace)


def test_a_batch_is_refused_whole_and_none_of_it_runs(heron, workspace):
    client = heron()
    new = {"jsonrpc": "2.0", "method": "session/new", "params": {"cwd": workspace}}
    write_raw(client, json.dumps([{**new, "id": "b1"}, {**new, "id": "b2"}]).encode() + b"\n")
    write_raw(client, b"[]\n")
    for _ in range(2):
        answer = client.next_response_for(None)
        assert answer["error"]["code"] == -32600 and "batch" in answer["error"]["data"]
    still_serves(client, workspace)
    assert not [r for r in client.responses if r.get("id") in ("b1", "b2")]


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":"u1","method":"\xff\xfe"}',  # not UTF-8 at all
        b'{"jsonrpc":"2.0","id":"u2","method":"x\xed\xa0\x80"}',  # an encoded surrogate
        b'{"jsonrpc":"2.0","id":NaN,"method":"session/new"}',  # not JSON
        b"[" * 200_000 + b"]" * 200_000,  # deeper than the parser's recursion limit
        b'{"jsonrpc":"2.0","id":1' + b"0" * 5000 + b',"method":"session/new"}',  # > 4300 digits
    ],
)
def test_a_line_that_is_not_utf8_json_gets_a_parse_error(heron, workspace, line):
    client = heron()
    write_raw(client, line + b"\n")
    assert client.next_response_for(None)["error"]["code"] == -32700
    still_serves(client, workspace)


def test_a_lone_surrogate_in_an_answer_is_replaced_not_fatal(heron, workspace):
    client = heron()
    # A cwd with a lone surrogate (valid JSON escape) is echoed in the error message.
    client.send_raw(
        b'{"jsonrpc":"2.0","id":"s1","method":"session/new",'
        b'"params":{"cwd":"/no/such\\ud800dir","mcpServers":[]}}\n',
    )
    answer = client.next_response_for("s1")
    assert answer["error"]["code"] == -32602
    assert "/no/such\ufffddir" in answer["error"]["message"]
    still_serves(client, workspace)
    assert "lone surrogates" in client.stderr


def test_a_model_answer_with_a_lone_surrogate_does_not_end_the_turn(heron, fake_llm, workspace):
    fake_llm.script(text("before \ud83d after", "\ud83d\ude00 ok"))
    client = heron()
    session_id = client.new_session(workspace)
    result = client.prompt(session_id, "hi")
    assert result["stopReason"] == "end_turn"
    said = "".join(
        u["content"]["text"]
        for u in result["updates"]
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert said == "before \ufffd after\U0001f600 ok"
    still_serves(client, workspace)


def test_session_methods_before_initialize_are_refused(heron, workspace):
    client = heron(initialize=False)
    with pytest.raises(RpcError) as err:
        client.request("session/new", {"cwd": workspace, "mcpServers": []})
    assert err.value.code == -32600 and "initialize" in err.value.message
    with pytest.raises(RpcError) as err:
        client.request("session/prompt", {"sessionId": "x", "prompt": []})
    assert err.value.code == -32600
    client.notify("session/cancel", {"sessionId": "x"})  # a notification: ignored
    client.initialize()
    still_serves(client, workspace)


def test_session_new_with_an_unusable_cwd_is_invalid_params(heron, workspace, tmp_path):
    client = heron()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for cwd in [str(a_file), "/no/such/dir", "relative", "/tmp/a\x00b", "/" + "x" * 5000]:
        with pytest.raises(RpcError) as err:
            client.request("session/new", {"cwd": cwd, "mcpServers": []})
        assert err.value.code == -32602, cwd
    still_serves(client, workspace)


def test_prompt_content_of_unknown_types_is_skipped(heron, fake_llm, workspace):
    fake_llm.script(text("fine"))
    client = heron()
    session_id = client.new_session(workspace)
    blocks = [{"type": "video", "data": 5}, {"type": "text"}, 7, {"type": "text", "text": "hi"}]
    assert client.prompt(session_id, blocks)["stopReason"] == "end_turn"
    assert fake_llm.requests[0].body["messages"][-1]["content"] == "hi"


def test_a_malformed_permission_answer_rejects_the_call(heron, fake_llm, workspace):
    from fake_openai import Call, tool_calls

    fake_llm.script(
        tool_calls(Call("write_file", {"path": "new.txt", "content": "x"})), text("done")
    )
    client = heron()
    client.handlers["session/request_permission"] = lambda params: ["garbage"]
    session_id = client.new_session(workspace)
    result = client.prompt(session_id, "write it")
    assert result["stopReason"] == "end_turn"
    statuses = [
        u.get("status") for u in result["updates"] if u["sessionUpdate"] == "tool_call_update"
    ]
    assert statuses[-1] == "failed"
    assert not (Path(workspace) / "new.txt").exists()


# -- prompt queueing and cancel --------------------------------------------------------------


def prompt_line(rid: str, session_id: str, text: str) -> bytes:
    blocks = [{"type": "text", "text": text}]
    params = {"sessionId": session_id, "prompt": blocks}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": params})


def test_of_several_prompts_sent_while_one_runs_only_the_newest_runs(heron, fake_llm, workspace):
    fake_llm.script(stall(text("thinking")), text("newest answer"))
    client = heron()
    session_id = client.new_session(workspace)
    first = client.prompt_async(session_id, "one")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    # In one write, so both arrive while "one" is still winding down.
    client.send_raw(
        (
            prompt_line("two", session_id, "two") + "\n" + prompt_line("three", session_id, "three")
        ).encode()
        + b"\n"
    )
    assert first.result(timeout=30) == {"stopReason": "cancelled"}
    assert client.next_response_for("two", timeout=30)["result"] == {"stopReason": "cancelled"}
    assert client.next_response_for("three", timeout=10)["result"] == {"stopReason": "end_turn"}
    asked = [r.body["messages"][-1] for r in fake_llm.requests]
    assert len(asked) == 2 and asked[1]["content"] == "three"  # "two" never reached the model


def test_session_cancel_also_cancels_queued_prompts_at_once(heron, fake_llm, workspace):
    fake_llm.script(stall(text("thinking")), text("should not run"))
    client = heron()
    session_id = client.new_session(workspace)
    first = client.prompt_async(session_id, "one")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    # "two" queues behind "one" (which it cancels), and the cancel arrives right behind it.
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
    client.send_raw(
        (prompt_line("two", session_id, "two") + "\n" + json.dumps(cancel)).encode() + b"\n"
    )
    # The stalled stream never ends: only the cancel can answer these (how fast is
    # scripts/bench_turn.py's business, not a test's on a loaded machine).
    assert first.result(timeout=30) == {"stopReason": "cancelled"}
    assert client.next_response_for("two", timeout=30)["result"] == {"stopReason": "cancelled"}
    assert len(fake_llm.requests) == 1


def test_cancel_right_after_the_first_prompt_of_a_process_is_prompt(heron, fake_llm, workspace):
    fake_llm.script(stall(text("thinking")))
    client = heron()
    session_id = client.new_session(workspace)  # the openai import may still be under way
    pending = client.prompt_async(session_id, "hi")
    client.cancel(session_id)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}  # the stall never ends


# -- an editor that stops reading ------------------------------------------------------------


def _request(proc: subprocess.Popen[bytes], rid: int, method: str, params: Any) -> None:
    assert proc.stdin is not None
    line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    proc.stdin.write(json.dumps(line).encode() + b"\n")
    proc.stdin.flush()


def test_an_editor_that_stops_reading_slows_the_turn_and_cannot_block_the_exit(
    fake_llm: FakeOpenAI, workspace: str, heron_home: Path, tmp_path: Path
):
    chunk = "x" * 100_000
    fake_llm.script(text("warm"), text(*[chunk] * 600))  # then 60 MB of answer
    proc = subprocess.Popen(
        [_heron_executable()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=heron_env(fake_llm, heron_home, {"HERON_LOG_LEVEL": "warning"}),
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        _request(proc, 1, "initialize", {"protocolVersion": 1})
        assert json.loads(proc.stdout.readline())["id"] == 1
        _request(proc, 2, "session/new", {"cwd": workspace, "mcpServers": []})
        session_id = json.loads(proc.stdout.readline())["result"]["sessionId"]
        # A first prompt loads what every turn needs (the ACP models, the tools, the model
        # client, ~30 MB): what grows after it is the outbox.
        warm = [{"type": "text", "text": "hi"}]
        _request(proc, 3, "session/prompt", {"sessionId": session_id, "prompt": warm})
        while json.loads(proc.stdout.readline()).get("id") != 3:
            pass
        prompt = [{"type": "text", "text": "tell me a lot"}]
        _request(proc, 4, "session/prompt", {"sessionId": session_id, "prompt": prompt})
        # ... and stdout is never read again, while the answer streams. (What the queue
        # costs in memory meanwhile: scripts/bench_memory.py.)
        deadline = time.monotonic() + 60
        while len(fake_llm.stream_starts) < 2:
            assert time.monotonic() < deadline, "the second answer never started"
            time.sleep(0.05)
        proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(timeout=60) == 0  # 60 MB unread cannot hold the exit
    finally:
        proc.kill()
        proc.wait()


def test_many_requests_at_once_are_all_answered(heron, workspace):
    client = heron()
    lines = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": f"n{i}", "method": "no/such", "params": {}}).encode()
        + b"\n"
        for i in range(2000)
    )
    client.send_raw(lines)
    for i in range(2000):
        assert client.next_response_for(f"n{i}", timeout=30)["error"]["code"] == -32601
    still_serves(client, workspace)


def test_encode_repairs_what_json_or_utf8_cannot_carry():
    from agent.acp.outbox import encode as _encode

    line = _encode({"a": float("nan"), "b": [float("inf")], "t": "x\ud83d\ude00\udc00y"})
    assert line.endswith(b"\n")
    assert json.loads(line) == {"a": None, "b": [None], "t": "x\U0001f600\ufffdy"}
