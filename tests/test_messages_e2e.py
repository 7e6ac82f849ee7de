"""Messages that tell the truth: a client's refusal keeps its reason, the no-model error names
`heron setup`, titles come from the first real request, /help names the command folders, the
rules file read is the first of Zed's list, and the context meter after /compact counts what
the model is sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp_client import RpcError
from fake_openai import Call, text, tool_calls

FS_CAPS: dict[str, Any] = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
FULL = ("--mode", "full-access")
NO_MODEL = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "HERON_MODEL": None}


def tool_message(request: Any, call_id: str) -> str:
    return next(
        m["content"]
        for m in request.body["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == call_id
    )


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        # acpx: the generic JSON-RPC message, the reason in data.details
        (
            RpcError(
                -32603, "Internal error", {"details": "Permission denied for fs/write_text_file"}
            ),
            "Permission denied for fs/write_text_file",
        ),
        (RpcError(-32000, "The buffer is read-only"), "The buffer is read-only"),
        (RpcError(-32603, "Internal error", "disk quota exceeded"), "disk quota exceeded"),
    ],
    ids=["data.details", "message", "data-text"],
)
def test_an_editor_refusing_a_write_keeps_its_reason(heron, fake_llm, workspace, error, reason):
    fake_llm.script(tool_calls(Call("write_file", {"path": "new.txt", "content": "x\n"}, id="w")))
    fake_llm.script(text("noted"))
    client = heron(*FULL, client_capabilities=FS_CAPS)

    def refuse(params: dict[str, Any]) -> dict[str, Any]:
        raise error

    client.handlers["fs/write_text_file"] = refuse
    turn = client.prompt(client.new_session(workspace), "write it")
    assert turn["stopReason"] == "end_turn"
    failed = [u for u in turn["updates"] if u.get("toolCallId") == "w" and u.get("status")]
    assert failed[-1]["status"] == "failed"
    shown = json_text(failed[-1])
    told = tool_message(fake_llm.requests[1], "w")
    for said in (shown, told):
        assert reason in said
        assert "RpcError" not in said and "(code -32" not in said
    # The user reads the refusal; what to do next is for the model (issue 25).
    assert shown == f"The editor refused to write {Path(workspace, 'new.txt')}: {reason}"
    assert told.startswith(shown) and "Tell the user" in told
    assert not Path(workspace, "new.txt").exists()


def json_text(update: dict[str, Any]) -> str:
    return " ".join(
        c["content"]["text"]
        for c in update.get("content") or []
        if c.get("type") == "content" and c["content"].get("type") == "text"
    )


def test_the_no_model_error_names_heron_setup(heron, workspace):
    client = heron(env=NO_MODEL)
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as failure:
        client.prompt(session_id, "hi")
    assert "no model configured" in failure.value.message
    assert "heron setup" in failure.value.message


def titles(updates: list[dict[str, Any]]) -> list[str]:
    return [u["title"] for u in updates if u["sessionUpdate"] == "session_info_update"]


def test_a_slash_command_does_not_title_the_session_and_a_pasted_diff_is_described(
    heron, fake_llm, workspace
):
    fake_llm.script(text("Looks fine."))
    client = heron()
    session_id = client.new_session(workspace)
    assert titles(client.prompt(session_id, "/help")["updates"]) == []
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert titles(client.prompt(session_id, diff)["updates"]) == ["Diff of app.py"]
    listed = client.request("session/list", {})["sessions"]
    assert [s["title"] for s in listed] == ["Diff of app.py"]


def test_help_names_both_command_folders(heron, fake_llm, workspace):
    client = heron()
    said = "".join(
        u["content"]["text"]
        for u in client.prompt(client.new_session(workspace), "/help")["updates"]
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "`.heron/commands/`" in said
    assert "`~/.config/heron/commands/`" in said  # none there yet: named all the same
    assert fake_llm.requests == []


def system_of(fake_llm) -> str:
    return fake_llm.requests[-1].body["messages"][0]["content"]


def test_without_agents_md_the_first_rules_file_in_zeds_order_is_read(heron, fake_llm, workspace):
    ws = Path(workspace)
    (ws / "CLAUDE.md").write_text("Claude rules.")
    (ws / "GEMINI.md").write_text("Gemini rules.")
    (ws / ".github").mkdir()
    (ws / ".github" / "copilot-instructions.md").write_text("Copilot rules.")
    (ws / ".clinerules").mkdir()  # Cline's folder form: not a file, passed over
    fake_llm.script(text("a"), text("b"), text("c"))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    system = system_of(fake_llm)
    assert "Copilot rules." in system and "<.github/copilot-instructions.md>" in system
    assert "Claude rules." not in system and "Gemini rules." not in system
    assert "project rules from" in client.stderr and "copilot-instructions.md" in client.stderr

    # A session's system prompt stays as it was (prompt caches); a new session reads again.
    (ws / ".github" / "copilot-instructions.md").unlink()
    client.prompt(client.new_session(workspace), "hi")
    assert "Claude rules." in system_of(fake_llm) and "Gemini" not in system_of(fake_llm)

    (ws / "AGENTS.md").write_text("Agents rules.")
    client.prompt(client.new_session(workspace), "hi")
    assert "Agents rules." in system_of(fake_llm) and "Claude" not in system_of(fake_llm)


def test_the_context_meter_after_compact_counts_the_system_prompt_and_tools(
    heron, fake_llm, workspace
):
    fake_llm.script(text("A long answer. " * 20), text("SUMMARY: short."), text("ok"))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "Describe the project")
    compacted = client.prompt(session_id, "/compact")
    [meter] = [u for u in compacted["updates"] if u["sessionUpdate"] == "usage_update"]
    client.prompt(session_id, "Go on")
    # What the next request really sent, minus the new prompt: system, summary, tools.
    body = fake_llm.requests[-1].body
    sent = len(json.dumps(body["messages"][:-1])) + len(json.dumps(body.get("tools") or []))
    assert sent // 8 < meter["used"] < sent // 2  # ~4 characters a token, give or take
