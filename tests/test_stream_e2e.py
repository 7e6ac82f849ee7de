"""Streaming at the speed of the wire: long answers arrive whole and in order, characters are
never split, and deltas that arrive faster than the editor reads are merged, never lost.

Notifications may carry several deltas merged (README): what an editor must get is the same
text, in the same order, in valid chunks. Most tests drive the real `heron` through the test
harness; two start it with stdout on a regular file and on a socket, the ways of writing
stdout that are not a pipe.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from acp_schema import validate_agent_message
from conftest import _heron_executable, heron_env
from fake_openai import FakeOpenAI, raw, text

SURROGATE = re.compile("[\ud800-\udfff]")


def chunks(updates: list[dict[str, Any]], kind: str = "agent_message_chunk") -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == kind]


def conversation(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(kind, text) of the chunks, consecutive ones of a kind joined: what an editor shows."""
    shown: list[tuple[str, str]] = []
    for update in updates:
        kind = update["sessionUpdate"]
        if not kind.endswith("_chunk"):
            continue
        if shown and shown[-1][0] == kind:
            shown[-1] = (kind, shown[-1][1] + update["content"]["text"])
        else:
            shown.append((kind, update["content"]["text"]))
    return shown


def stop(client) -> None:
    client.close_stdin()
    assert client.wait_exit(10) == 0


def test_a_20000_delta_answer_arrives_whole_in_order_and_replays_the_same(
    heron, fake_llm, workspace
):
    words = [f"{i} " for i in range(20_000)]  # every delta different, so order shows
    thoughts = [f"t{i} " for i in range(2_000)]
    fake_llm.script(text(*words, reasoning=thoughts), text("Next."))
    live = heron()
    session_id = live.new_session(workspace)
    turn = live.prompt(session_id, "Count", timeout=120)
    assert turn["stopReason"] == "end_turn"
    assert "".join(chunks(turn["updates"], "agent_thought_chunk")) == "".join(thoughts)
    assert "".join(chunks(turn["updates"])) == "".join(words)
    second = live.prompt(session_id, "Again")
    history = fake_llm.requests[1].body["messages"]
    assert history[2] == {"role": "assistant", "content": "".join(words)}
    stop(live)

    fresh = heron()
    load = fresh.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    assert set(load.result(timeout=60)) == {"configOptions", "modes", "_meta"}
    user = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": ""}}
    seen = [
        {**user, "content": {"type": "text", "text": "Count"}},
        *turn["updates"],
        {**user, "content": {"type": "text", "text": "Again"}},
        *second["updates"],
    ]
    assert conversation(load.updates()) == conversation(seen)
    assert conversation(load.updates())[1:3] == [
        ("agent_thought_chunk", "".join(thoughts)),
        ("agent_message_chunk", "".join(words)),
    ]


def test_deltas_queued_behind_a_slow_editor_are_merged_not_lost(heron, fake_llm, workspace):
    words = [f"{i} " for i in range(20_000)]
    fake_llm.script(text(*words))
    client = heron()
    session_id = client.new_session(workspace)
    with client.pause_reading():  # the editor is busy: the pipe fills, Heron has to queue
        pending = client.prompt_async(session_id, "Count")
        deadline = time.monotonic() + 30
        while not fake_llm.send_seconds and time.monotonic() < deadline:
            time.sleep(0.05)  # until the whole answer has gone to Heron, which must queue it
    assert pending.result(timeout=120)["stopReason"] == "end_turn"
    received = chunks(pending.updates())
    assert "".join(received) == "".join(words)
    # Sent one by one, 20,000 notifications would still be waiting in the pipe.
    assert len(received) < 5_000, f"{len(received)} notifications for 20,000 deltas"


# Two, three and four UTF-8 bytes, and characters outside the BMP (a surrogate pair in JSON).
SAMPLE = "héllo wörld · 中文字符 · 😀🎉 · 𝄞 ∑ café ½\n"


def _deltas(text_: str) -> list[str]:
    """`text_` cut at UTF-16 code units every 1, 2, 3 or 5 units: some deltas end with half
    of a surrogate pair, as a model writing JSON escapes may send them."""
    units = text_.encode("utf-16-le")
    pieces, at, step = [], 0, 0
    while at < len(units):
        size = (1, 2, 3, 5)[step % 4] * 2
        pieces.append(units[at : at + size].decode("utf-16-le", "surrogatepass"))
        at, step = at + size, step + 1
    return pieces


def _event(field: str, piece: str, index: int) -> str:
    # Lone surrogate halves can only travel as \u escapes; other pieces alternate between
    # escapes and raw UTF-8, which the network may cut anywhere.
    ascii_only = bool(SURROGATE.search(piece)) or index % 2 == 0
    content = json.dumps(piece, ensure_ascii=ascii_only)
    return f'data: {{"choices":[{{"index":0,"delta":{{"{field}":{content}}}}}]}}\n\n'


def _multibyte_body(thought: str, answer: str) -> bytes:
    events = [_event("reasoning_content", p, i) for i, p in enumerate(_deltas(thought))]
    events += [_event("content", p, i) for i, p in enumerate(_deltas(answer))]
    events.append('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
    events.append("data: [DONE]\n\n")
    return "".join(events).encode()


@pytest.mark.parametrize("network", ["characters cut across reads", "one read"])
def test_multibyte_characters_split_across_deltas_and_reads_arrive_intact(
    heron, fake_llm, workspace, network
):
    thought, answer = SAMPLE * 3, SAMPLE * 12
    body = _multibyte_body(thought, answer)
    cuts: list[int] = []
    if network != "one read":
        # Right after the first byte of every multi-byte character: each one straddles two
        # network reads.
        cuts = [i for i in range(1, len(body)) if body[i - 1] >= 0xC0]
        assert len(cuts) > 100
    fake_llm.script(raw(body, cuts=cuts, delay=0.002 if cuts else 0.0))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "Write", timeout=60)
    assert turn["stopReason"] == "end_turn"
    for kind, expected in (("agent_thought_chunk", thought), ("agent_message_chunk", answer)):
        received = chunks(turn["updates"], kind)
        assert "".join(received) == expected
        # No chunk starts or ends inside a character: no lone surrogate half, no U+FFFD
        # standing in for a cut UTF-8 sequence.
        broken = [c for c in received if SURROGATE.search(c) or "\ufffd" in c]
        assert not broken, broken


# -- stdout that is not a pipe -------------------------------------------------------------


class _Editor:
    """Just enough of an editor over raw byte streams; checks every message it reads."""

    def __init__(self, write: Any) -> None:
        self.write = write
        self.sent: dict[int, str] = {}
        self.problems: list[str] = []
        self.messages: list[dict[str, Any]] = []

    def request(self, rid: int, method: str, params: dict[str, Any]) -> None:
        self.sent[rid] = method
        line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.write(json.dumps(line).encode() + b"\n")

    def take(self, line: bytes) -> dict[str, Any]:
        message = json.loads(line.decode("utf-8"))
        self.problems += validate_agent_message(message, self.sent.get)
        self.messages.append(message)
        return message

    def answer(self, rid: int) -> dict[str, Any]:
        return next(m for m in self.messages if m.get("id") == rid and "method" not in m)

    def text(self) -> str:
        return "".join(
            m["params"]["update"]["content"]["text"]
            for m in self.messages
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )


def _prompt(session_id: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": "Count"}]}


def test_stdout_on_a_regular_file_gets_everything(
    fake_llm: FakeOpenAI, heron_home: Path, workspace: str, tmp_path: Path
):
    words = [f"{i} " for i in range(2_000)]
    fake_llm.script(text(*words))
    out = tmp_path / "out.jsonl"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [_heron_executable()],
            stdin=subprocess.PIPE,
            stdout=sink,
            stderr=subprocess.DEVNULL,
            env=heron_env(fake_llm, heron_home, {"HERON_LOG_LEVEL": "warning"}),
            cwd=tmp_path,
        )
    assert proc.stdin is not None

    def send(data: bytes) -> None:
        proc.stdin.write(data)  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    editor = _Editor(send)

    def wait_answer(rid: int) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            editor.messages = []
            for line in out.read_bytes().splitlines(keepends=True):
                if line.endswith(b"\n"):
                    editor.messages.append(json.loads(line))
            if any(m.get("id") == rid and "method" not in m for m in editor.messages):
                return editor.answer(rid)
            time.sleep(0.05)
        raise TimeoutError(f"no answer to {rid}")

    try:
        editor.request(1, "initialize", {"protocolVersion": 1})
        wait_answer(1)
        editor.request(2, "session/new", {"cwd": workspace, "mcpServers": []})
        session_id = wait_answer(2)["result"]["sessionId"]
        editor.request(3, "session/prompt", _prompt(session_id))
        assert wait_answer(3)["result"] == {"stopReason": "end_turn"}
        proc.stdin.close()
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
    editor.messages = []
    for line in out.read_bytes().splitlines(keepends=True):
        assert line.endswith(b"\n")
        editor.take(line)
    assert not editor.problems, editor.problems
    assert editor.text() == "".join(words)


def test_one_socket_for_stdin_and_stdout_keeps_both_working(
    fake_llm: FakeOpenAI, heron_home: Path, workspace: str, tmp_path: Path
):
    # What `socat EXEC:heron` hands over: stdin and stdout are the same socket, so non-blocking
    # writes must not make the socket non-blocking for the reading side too.
    words = [f"{i} " for i in range(20_000)]
    fake_llm.script(text(*words))
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [_heron_executable()],
        stdin=theirs,
        stdout=theirs,
        stderr=subprocess.DEVNULL,
        env=heron_env(fake_llm, heron_home, {"HERON_LOG_LEVEL": "warning"}),
        cwd=tmp_path,
    )
    theirs.close()
    ours.settimeout(60)
    reader = ours.makefile("rb")
    editor = _Editor(ours.sendall)

    def read_until_answer(rid: int) -> dict[str, Any]:
        while True:
            line = reader.readline()
            assert line.endswith(b"\n"), f"stdout ended: {line!r}"
            message = editor.take(line)
            if message.get("id") == rid and "method" not in message:
                return message

    try:
        editor.request(1, "initialize", {"protocolVersion": 1})
        read_until_answer(1)
        editor.request(2, "session/new", {"cwd": workspace, "mcpServers": []})
        session_id = read_until_answer(2)["result"]["sessionId"]
        editor.request(3, "session/prompt", _prompt(session_id))
        # Not reading while the answer streams: the socket's buffer fills, Heron waits for room.
        deadline = time.monotonic() + 60
        while not fake_llm.stream_starts:
            assert time.monotonic() < deadline, "the answer never started"
            time.sleep(0.05)
        assert read_until_answer(3)["result"] == {"stopReason": "end_turn"}
        assert editor.text() == "".join(words)
        # stdin still reads (a shared non-blocking socket would have ended it)
        editor.request(4, "session/new", {"cwd": workspace, "mcpServers": []})
        assert read_until_answer(4)["result"]["sessionId"]
        ours.shutdown(socket.SHUT_WR)
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
        reader.close()
        ours.close()
    assert not editor.problems, editor.problems
