"""Prompt turns: the model's stream reaches the editor as session/update notifications."""

from __future__ import annotations

import pytest
from acp_client import RpcError
from fake_openai import disconnect, error, stall, text


def chunks(updates, kind):
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == kind]


def test_a_streamed_turn_reaches_the_editor_chunk_by_chunk(heron, fake_llm, workspace):
    # Deltas a pause apart each get their own notification (those that arrive together may
    # be merged: see test_stream_e2e.py).
    fake_llm.script(text("Hel", "lo, ", "world", reasoning=["Let me ", "think."], delay=0.1))
    client = heron()
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, "Say hello")
    assert turn["stopReason"] == "end_turn"
    assert chunks(turn["updates"], "agent_message_chunk") == ["Hel", "lo, ", "world"]
    assert chunks(turn["updates"], "agent_thought_chunk") == ["Let me ", "think."]
    body = fake_llm.requests[0].body
    assert body["model"] == "fake-model" and body["stream"] is True
    assert body["messages"][0]["role"] == "system"
    assert workspace in body["messages"][0]["content"]
    assert body["messages"][-1] == {"role": "user", "content": "Say hello"}


def test_reasoning_field_named_reasoning_is_a_thought_too(heron, fake_llm, workspace):
    fake_llm.script(text("ok", reasoning=["hmm"], reasoning_field="reasoning"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi")
    assert chunks(turn["updates"], "agent_thought_chunk") == ["hmm"]


@pytest.mark.parametrize(
    ("finish", "stop_reason"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal")],
)
def test_finish_reasons_map_to_stop_reasons(heron, fake_llm, workspace, finish, stop_reason):
    fake_llm.script(text("partial", finish=finish))
    client = heron()
    assert client.prompt(client.new_session(workspace), "go")["stopReason"] == stop_reason


def test_a_conversation_keeps_its_history(heron, fake_llm, workspace):
    fake_llm.script(text("Nice to meet you, Ada."), text("Your name is Ada."))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "My name is Ada.")
    client.prompt(session_id, "What is my name?")
    second = fake_llm.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[1]["content"] == "My name is Ada."
    assert second[2]["content"] == "Nice to meet you, Ada."
    assert second[3]["content"] == "What is my name?"
    # sessions do not share history
    other = client.new_session(workspace)
    fake_llm.script(text("Hi."))
    client.prompt(other, "Who am I?")
    assert [m["role"] for m in fake_llm.requests[2].body["messages"]] == ["system", "user"]


def test_cancel_mid_stream_stops_the_model_and_answers_cancelled(heron, fake_llm, workspace):
    fake_llm.script(stall(text("Thinking about it")))
    client = heron()
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "Write a novel")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    client.cancel(session_id)
    assert pending.result(timeout=30) == {"stopReason": "cancelled"}
    assert fake_llm.client_gone.wait(5), "the model stream was not closed on cancel"
    seen = len(client.updates(session_id))
    client.round_trip()
    assert len(client.updates(session_id)) == seen  # nothing after the answer
    # the session still works, and remembers the partial answer
    fake_llm.script(text("Done."))
    assert client.prompt(session_id, "Shorter, please")["stopReason"] == "end_turn"
    roles = [m["role"] for m in fake_llm.requests[-1].body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


def test_a_new_prompt_while_one_runs_cancels_the_old_one(heron, fake_llm, workspace):
    fake_llm.script(stall(text("slow")), text("fast"))
    client = heron()
    session_id = client.new_session(workspace)
    first = client.prompt_async(session_id, "slow one")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    second = client.prompt_async(session_id, "new one")
    assert first.result(timeout=30) == {"stopReason": "cancelled"}
    assert second.result(timeout=10) == {"stopReason": "end_turn"}


def test_transient_errors_are_retried(heron, fake_llm, workspace):
    fake_llm.script(error(429, "slow down"), error(503, "busy"), text("made it"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi", timeout=30)
    assert turn["stopReason"] == "end_turn"
    assert chunks(turn["updates"], "agent_message_chunk") == ["made it"]
    assert len(fake_llm.requests) == 3


def test_a_stream_dropped_before_any_output_is_retried(heron, fake_llm, workspace):
    fake_llm.script(disconnect(text("never seen"), chunks=0), text("second try"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi")
    assert chunks(turn["updates"], "agent_message_chunk") == ["second try"]


def test_a_final_model_failure_is_a_readable_error_and_the_session_survives(
    heron, fake_llm, workspace
):
    fake_llm.script(error(401, "Incorrect API key provided"))
    client = heron()
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "hi")
    assert "API key" in err.value.message and "Traceback" not in err.value.message
    fake_llm.script(text("back"))
    assert client.prompt(session_id, "again")["stopReason"] == "end_turn"


def test_a_stream_broken_mid_answer_is_reported(heron, fake_llm, workspace):
    fake_llm.script(disconnect(text("a", "b", "c", "d"), chunks=3))
    client = heron()
    with pytest.raises(RpcError) as err:
        client.prompt(client.new_session(workspace), "hi")
    assert "broke off" in err.value.message


def test_without_configuration_heron_starts_and_a_prompt_says_what_to_set(heron, workspace):
    client = heron(env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "hi")
    assert "OPENAI_API_KEY" in err.value.message and "OPENAI_BASE_URL" in err.value.message


def test_config_file_flags_and_env_precedence(heron, fake_llm, workspace, tmp_path):
    config = tmp_path / "heron.toml"
    config.write_text(f'model = "from-file"\nbase_url = "{fake_llm.base_url}"\n')
    fake_llm.script(text("a"), text("b"), text("c"))
    env = {"OPENAI_BASE_URL": None, "HERON_MODEL": None, "HERON_CONFIG": str(config)}
    client = heron(env=env)
    client.prompt(client.new_session(workspace), "x")
    client2 = heron(env={**env, "HERON_MODEL": "from-env"})
    client2.prompt(client2.new_session(workspace), "x")
    client3 = heron("--model", "from-flag", env={**env, "HERON_MODEL": "from-env"})
    client3.prompt(client3.new_session(workspace), "x")
    assert [r.body["model"] for r in fake_llm.requests] == ["from-file", "from-env", "from-flag"]


def test_agents_md_is_part_of_the_system_prompt(heron, fake_llm, workspace):
    (__import__("pathlib").Path(workspace) / "AGENTS.md").write_text("Always answer in French.")
    fake_llm.script(text("Bonjour"))
    client = heron()
    client.prompt(client.new_session(workspace), "hi")
    assert "Always answer in French." in fake_llm.requests[0].body["messages"][0]["content"]


def test_resource_link_embedded_resource_and_image_reach_the_model(heron, fake_llm, workspace):
    from pathlib import Path

    Path(workspace, "notes.txt").write_text("linked file body")
    fake_llm.script(text("seen"))
    client = heron()
    blocks = [
        {"type": "text", "text": "Look at these"},
        {"type": "resource_link", "uri": f"file://{workspace}/notes.txt", "name": "notes.txt"},
        {
            "type": "resource",
            "resource": {
                "uri": "file:///tmp/x.py",
                "text": "embedded body",
                "mimeType": "text/x-python",
            },
        },
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    ]
    assert client.prompt(client.new_session(workspace), blocks)["stopReason"] == "end_turn"
    content = fake_llm.requests[0].body["messages"][-1]["content"]
    texts = " ".join(p.get("text", "") for p in content)
    assert "linked file body" in texts and "embedded body" in texts
    assert {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    } in content


def test_stdin_closing_mid_turn_ends_everything_quickly(heron, fake_llm, workspace):
    fake_llm.script(stall(text("working")))
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt_async(session_id, "long job")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    client.close_stdin()
    assert client.wait_exit(timeout=30) == 0  # the stalled turn would hold it forever


def test_a_silent_model_times_out_with_a_readable_error(heron, fake_llm, workspace, tmp_path):
    config = tmp_path / "timeout.toml"
    config.write_text("request_timeout = 1\nmax_retries = 0\n")
    fake_llm.script(stall(text("I was saying")))
    client = heron("--config", str(config))
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "hi", timeout=20)
    assert "sent nothing for 1 s" in err.value.message


def test_an_unreachable_server_is_a_readable_error(heron, workspace, tmp_path):
    config = tmp_path / "unreachable.toml"
    config.write_text("max_retries = 0\n")
    client = heron("--config", str(config), "--base-url", "http://127.0.0.1:9/v1")
    with pytest.raises(RpcError) as err:
        client.prompt(client.new_session(workspace), "hi", timeout=20)
    assert "Cannot reach the model server at http://127.0.0.1:9/v1" in err.value.message


def test_cancel_request_on_a_running_prompt_answers_request_cancelled(heron, fake_llm, workspace):
    fake_llm.script(stall(text("slow")), text("after"))
    client = heron()
    session_id = client.new_session(workspace)
    pending = client.prompt_async(session_id, "long")
    client.wait_for_update(lambda u: u["sessionUpdate"] == "agent_message_chunk")
    client.notify("$/cancel_request", {"requestId": pending.id})
    assert pending.wait(timeout=5)["error"]["code"] == -32800
    assert client.prompt(session_id, "again")["stopReason"] == "end_turn"


def test_inline_think_tags_are_shown_as_thoughts(heron, fake_llm, workspace):
    fake_llm.script(text("<think>The user", " wants a greeting.</thi", "nk>\n\nHi ", "there"))
    client = heron()
    turn = client.prompt(client.new_session(workspace), "hi")
    assert "".join(chunks(turn["updates"], "agent_thought_chunk")) == "The user wants a greeting."
    assert "".join(chunks(turn["updates"], "agent_message_chunk")) == "Hi there"
