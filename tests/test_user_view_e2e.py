"""What the user sees (issue 25): a failure looks like a failure, the user reads words written
for them (never the model's instructions or a JSON-RPC code), and the context meter of a
restored session counts what its next request carries.

A failed command is `failed`, not `completed` with the exit code in its content: Zed marks a
`failed` call with a red cross (its terminal card too, dashed, "Exited with code N"), acpx
prints `(failed)` in red, Toad a "failed" pill; `completed` reads as success in all three.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import Call, text, tool_calls
from test_permissions_e2e import REJECTED
from test_tools_e2e import (
    FULL,
    NO_CAPS,
    TERMINAL_CAPS,
    last,
    run_turn,
    statuses,
    texts,
    tool_result,
)

FAILING = "for i in $(seq 1 30); do echo line$i; done; exit 2"
WHOLE = "".join(f"line{i}\n" for i in range(1, 31))


@pytest.mark.parametrize("caps", [NO_CAPS, TERMINAL_CAPS], ids=["local", "client-terminal"])
def test_a_failing_command_fails_with_its_exit_code_and_last_lines(
    heron, fake_llm, workspace, caps
):
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(
            Call("bash", {"command": FAILING}, id="bad"), Call("bash", {"command": "true"}, id="ok")
        ),
        text("noted"),
        caps=caps,
    )
    assert statuses(turn["updates"], "bad")[-1] == "failed"
    assert statuses(turn["updates"], "ok")[-1] == "completed"
    shown = texts(last(turn["updates"], "bad"))
    assert shown.startswith("Exit code 2\n")  # first: clients that cut long content keep it
    assert "line30" in shown and "line21" in shown
    if caps is TERMINAL_CAPS:  # beside the terminal: only the last ten lines
        assert "line20\n" not in shown
        assert last(turn["updates"], "bad")["content"][0]["type"] == "terminal"
    # The model reads the whole result, as before.
    assert tool_result(fake_llm.requests[1], "bad") == f"Exit code 2\n{WHOLE}"
    assert last(turn["updates"], "bad")["rawOutput"]["exitCode"] == 2


def test_the_user_reads_their_rejection_and_the_model_its_instructions(heron, fake_llm, workspace):
    _, turn = run_turn(
        heron,
        fake_llm,
        workspace,
        tool_calls(Call("bash", {"command": "touch x"}, id="b")),
        text("understood"),
        args=("--mode", "ask"),
        permission="reject_once",
    )
    assert statuses(turn["updates"], "b") == ["pending", "failed"]
    assert texts(last(turn["updates"], "b")) == "You rejected this command; it was not run."
    assert tool_result(fake_llm.requests[1], "b") == REJECTED  # "Do not retry it; …"


def refusing(error: RpcError):
    def handler(params: dict[str, Any]) -> dict[str, Any]:
        raise error

    return handler


ACPX_REFUSAL = RpcError(-32603, "Internal error", {"details": "terminals are turned off"})


def test_an_editor_refusing_the_terminal_is_shown_in_its_words(heron, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("bash", {"command": "ls"}, id="b")), text("noted"))
    client = heron(*FULL, client_capabilities=TERMINAL_CAPS)
    client.handlers["terminal/create"] = refusing(ACPX_REFUSAL)
    turn = client.prompt(client.new_session(workspace), "go")
    assert turn["stopReason"] == "end_turn"
    assert statuses(turn["updates"], "b")[-1] == "failed"
    shown = texts(last(turn["updates"], "b"))
    assert shown == "The editor refused to run the command: terminals are turned off"
    told = tool_result(fake_llm.requests[1], "b")
    assert told.startswith(shown) and "Tell the user" in told  # the model's next step
    for said in (shown, told):
        assert "RpcError" not in said and "code -32" not in said and "Internal error" not in said
    assert "Traceback" not in client.stderr  # an answer, not a crash of the tool


def test_an_editor_failing_the_permission_question_is_not_a_rejection(heron, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("bash", {"command": "touch x"}, id="b")), text("noted"))
    client = heron("--mode", "ask")
    client.handlers["session/request_permission"] = refusing(
        RpcError(-32603, "Internal error", {"details": "no window to ask in"})
    )
    turn = client.prompt(client.new_session(workspace), "go")
    shown = texts(last(turn["updates"], "b"))
    assert (
        shown == "Not run: the editor could not show the permission question (no window to ask in)."
    )
    told = tool_result(fake_llm.requests[1], "b")
    assert "could not ask the user" in told and "Rejected by the user" not in told


# ---------------------------------------------------------------------- the meter after a restore


def next_request_size(fake_llm: Any) -> int:
    """The characters of the last request, without its newest message (the new prompt)."""
    body = fake_llm.requests[-1].body
    return len(json.dumps(body["messages"][:-1])) + len(json.dumps(body.get("tools") or []))


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_the_meter_of_a_restored_session_counts_its_next_request(
    heron, fake_llm, workspace, method
):
    fake_llm.script(text("A short answer."), text("ok"))
    first = heron()
    session_id = first.new_session(workspace)
    first.prompt(session_id, "hi")
    first.close_stdin()
    assert first.wait_exit(10) == 0

    again = heron()
    restored = again.request_async(
        method, {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    restored.result()
    [meter] = [u for u in restored.updates() if u["sessionUpdate"] == "usage_update"]
    again.prompt(session_id, "Go on")
    sent = next_request_size(fake_llm)  # system prompt, tools, the conversation so far
    assert sent // 8 < meter["used"] < sent // 2  # ~4 characters a token, give or take
    assert meter["used"] > 1000  # the system prompt and the tools, not the two messages alone
