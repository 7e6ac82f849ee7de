"""Issue 16, what the ACP conformance kit checks about sessions: their state comes with
them (before a load or resume answer, nothing after it but what a prompt causes), nothing
about a session after it is closed or deleted. The real `heron` over its pipes; every message
schema-checked by the harness.
"""

from __future__ import annotations

from typing import Any

import pytest
from acp_client import DEFAULT_CAPABILITIES, RpcError
from fake_openai import Call, text, tool_calls

STATE = {"available_commands_update", "session_info_update", "usage_update"}


def stop(client) -> None:
    client.close_stdin()
    assert client.wait_exit(10) == 0


def kinds(updates: list[dict[str, Any]]) -> set[str]:
    return {u["sessionUpdate"] for u in updates}


def stored_session(heron, fake_llm, workspace: str) -> str:
    """A session with one prompt (so a title and a history), saved by a process now gone."""
    fake_llm.script(text("Hi there."))
    first = heron()
    session_id = first.new_session(workspace)
    first.prompt(session_id, "Say hello")
    stop(first)
    return session_id


@pytest.mark.parametrize("where", ["another process", "the same connection"])
@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_restored_session_state_comes_before_the_answer_and_nothing_after(
    heron, fake_llm, workspace, method, where
):
    if where == "another process":
        session_id = stored_session(heron, fake_llm, workspace)
        client = heron()
    else:  # what the conformance kit does: new, prompt, then load on the same connection
        fake_llm.script(text("Hi there."))
        client = heron()
        session_id = client.new_session(workspace)
        client.prompt(session_id, "Say hello")
    known = len(client.updates(session_id))
    params: dict[str, Any] = {"sessionId": session_id, "cwd": workspace}
    if method == "session/load":
        params["mcpServers"] = []  # required there; the kit resumes without it
    pending = client.request_async(method, params)
    pending.result()
    before = pending.updates()
    assert kinds(before) >= STATE, kinds(before)
    [title] = [u for u in before if u["sessionUpdate"] == "session_info_update"]
    assert title["title"] == "Say hello"
    [usage] = [u for u in before if u["sessionUpdate"] == "usage_update"]
    assert usage["used"] > 0 and usage["size"] > 0  # the context meter
    if method == "session/resume":
        assert kinds(before) == STATE  # no replay
    # A round trip later nothing more has come about the session...
    client.request("session/list", {})
    assert client.updates(session_id)[known:] == before
    # ... and a prompt brings only its own updates.
    fake_llm.script(text("Again."))
    turn = client.prompt(session_id, "Once more")
    assert "available_commands_update" not in kinds(turn["updates"])
    assert client.updates(session_id)[known:] == before + turn["updates"]


@pytest.mark.parametrize("method", ["session/close", "session/delete"])
def test_nothing_about_a_session_after_it_is_closed(heron, workspace, method):
    client = heron()
    gone = client.new_session(workspace)
    closing = client.request_async(method, {"sessionId": gone})
    closing.result()
    after_close = len(client.notifications)
    # A session made after the close gets its command list; the closed one's, due first
    # (it follows the session/new answer by the same delay), never comes.
    other = client.new_session(workspace)
    client.wait_for_update(
        lambda u: u["sessionUpdate"] == "available_commands_update", session_id=other
    )
    late = [
        n["params"]["update"]["sessionUpdate"]
        for n in client.notifications[after_close:]
        if n["params"]["sessionId"] == gone
    ]
    assert late == []


def test_nothing_after_a_loaded_session_is_closed(heron, fake_llm, workspace):
    session_id = stored_session(heron, fake_llm, workspace)
    client = heron()
    client.request("session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []})
    client.request("session/close", {"sessionId": session_id})
    after_close = len(client.notifications)
    other = client.new_session(workspace)
    client.wait_for_update(
        lambda u: u["sessionUpdate"] == "available_commands_update", session_id=other
    )
    assert not [
        n for n in client.notifications[after_close:] if n["params"]["sessionId"] == session_id
    ]


# -- additional directories ------------------------------------------------------------------


def asked_ids(client) -> list[str]:
    return [
        r.params["toolCall"]["toolCallId"]
        for r in client.agent_requests
        if r.method == "session/request_permission"
    ]


def test_additional_directories_are_advertised(heron):
    caps = heron(initialize=False).initialize()["agentCapabilities"]
    assert caps["sessionCapabilities"]["additionalDirectories"] == {}


def test_additional_directories_are_part_of_the_workspace(heron, fake_llm, workspace, tmp_path):
    extra = tmp_path / "extra"
    (extra / ".git").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    fake_llm.script(
        tool_calls(
            Call("write_file", {"path": str(extra / "new.txt"), "content": "in\n"}, id="in"),
            Call("write_file", {"path": str(extra / ".git" / "x"), "content": "g\n"}, id="git"),
            Call("write_file", {"path": str(outside / "o.txt"), "content": "o\n"}, id="out"),
        ),
        tool_calls(
            Call("grep", {"pattern": "in", "path": str(extra)}, id="grep"),
            Call("read_file", {"path": str(extra / "new.txt")}, id="read"),
        ),
        text("done"),
    )
    client = heron("--mode", "accept-edits")
    result = client.request(
        "session/new",
        {"cwd": workspace, "mcpServers": [], "additionalDirectories": [str(extra)]},
    )
    session_id = result["sessionId"]
    client.prompt(session_id, "write them")
    # Inside the additional directory an edit needs no question; its .git/ is protected as
    # the cwd's is, and a folder that is not in the workspace still asks.
    assert asked_ids(client) == ["git", "out"]
    assert (extra / "new.txt").read_text() == "in\n"
    # The search and file tools work there, unasked like in the cwd.
    results = {
        m["tool_call_id"]: m["content"]
        for m in fake_llm.requests[2].body["messages"]
        if m["role"] == "tool"
    }
    assert "new.txt" in results["grep"] and "in" in results["read"]
    system = fake_llm.requests[0].body["messages"][0]["content"]
    assert str(extra) in system

    # Saved with the session: session/list returns the list.
    [info] = [
        s for s in client.request("session/list", {})["sessions"] if s["sessionId"] == session_id
    ]
    assert info["additionalDirectories"] == [str(extra)]


@pytest.mark.parametrize("method", ["session/new", "session/load", "session/resume"])
@pytest.mark.parametrize("bad", ["relative/dir", "{missing}", "{file}"])
def test_bad_additional_directories_are_invalid_params(heron, workspace, tmp_path, method, bad):
    (tmp_path / "file").write_text("x")
    bad = bad.format(missing=tmp_path / "missing", file=tmp_path / "file")
    client = heron()
    params: dict[str, Any] = {"cwd": workspace, "mcpServers": [], "additionalDirectories": [bad]}
    if method != "session/new":
        params["sessionId"] = client.new_session(workspace)
    with pytest.raises(RpcError) as caught:
        client.request(method, params)
    assert caught.value.code == -32602
    assert "additionalDirectories" in caught.value.message


def test_load_takes_the_requested_directories(heron, fake_llm, workspace, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    session_id = stored_session(heron, fake_llm, workspace)
    fake_llm.script(
        tool_calls(Call("write_file", {"path": str(extra / "a.txt"), "content": "a\n"}, id="w")),
        text("ok"),
    )
    client = heron()
    client.request(
        "session/load",
        {
            "sessionId": session_id,
            "cwd": workspace,
            "mcpServers": [],
            "additionalDirectories": [str(extra)],
            "_meta": {"heron": {"mode": "accept-edits"}},  # stored in "ask"
        },
    )
    [info] = [
        s for s in client.request("session/list", {})["sessions"] if s["sessionId"] == session_id
    ]
    assert info["additionalDirectories"] == [str(extra)]
    client.prompt(session_id, "write")
    assert asked_ids(client) == []
    assert (extra / "a.txt").read_text() == "a\n"


# -- logout ----------------------------------------------------------------------------------

TERMINAL_AUTH = {**DEFAULT_CAPABILITIES, "auth": {"terminal": True}}
NO_ENV_MODEL = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "HERON_MODEL": None}


def config_file(home) -> Any:
    path = home / ".config" / "heron" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_logout_is_advertised(heron):
    caps = heron(initialize=False).initialize(TERMINAL_AUTH)["agentCapabilities"]
    assert caps["auth"] == {"logout": {}}


@pytest.mark.parametrize("source", ["config", "environment"])
def test_logout_removes_the_stored_key_and_never_sends_it_again(
    heron, fake_llm, workspace, heron_home, source
):
    config = config_file(heron_home)
    key_line = 'api_key = "sk-stored-secret"\n' if source == "config" else ""
    config.write_text(
        f'# written by heron setup\nbase_url = "{fake_llm.base_url}"\n{key_line}'
        'model = "fake-model"\n\n[providers.local]\nbase_url = "http://127.0.0.1:9/v1"\n'
        'models = ["m"]\n'
    )
    env = dict(NO_ENV_MODEL)
    if source == "environment":
        env["OPENAI_API_KEY"] = "sk-stored-secret"
    fake_llm.script(text("one"), text("two"), text("three"))
    client = heron(env=env, client_capabilities=TERMINAL_AUTH)
    session_id = client.new_session(workspace)
    client.prompt(session_id, "hi")
    assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-stored-secret"

    chats, others = len(fake_llm.requests), len(fake_llm.other_requests)
    assert client.request("logout", {}) == {}
    kept = config.read_text()
    assert "sk-stored-secret" not in kept
    assert 'model = "fake-model"' in kept and "# written by heron setup" in kept
    assert "[providers.local]" in kept
    if source == "config":
        assert config.stat().st_mode & 0o777 == 0o600  # rewritten: it held a key

    # Neither the session that exists nor a new one (a local server needs no key) sends it.
    client.prompt(session_id, "again")
    client.prompt(client.new_session(workspace), "new")
    later = fake_llm.requests[chats:] + fake_llm.other_requests[others:]
    assert len(later) >= 2
    for request in later:
        assert "sk-stored-secret" not in request.headers.get("authorization", "")


def test_after_logout_an_endpoint_that_needs_a_key_asks_to_log_in(heron, workspace, heron_home):
    config = config_file(heron_home)
    config.write_text('api_key = "sk-stored-secret"\nmodel = "gpt-4o"\n')  # OpenAI itself
    client = heron(env=NO_ENV_MODEL, client_capabilities=TERMINAL_AUTH)
    client.new_session(workspace)
    assert client.request("logout", {}) == {}
    assert config.read_text() == 'model = "gpt-4o"\n'
    with pytest.raises(RpcError) as failure:
        client.new_session(workspace)
    assert failure.value.code == -32000


def test_logout_without_a_stored_key_succeeds(heron, workspace):
    client = heron(client_capabilities=TERMINAL_AUTH)
    assert client.request("logout", {}) == {}
    client.new_session(workspace)


# -- audio -----------------------------------------------------------------------------------

WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="  # an empty WAV file


def audio(mime: str) -> dict[str, Any]:
    return {"type": "audio", "data": WAV, "mimeType": mime}


def user_parts(request) -> list[dict[str, Any]]:
    """Every content part of the user messages of one model request."""
    parts: list[dict[str, Any]] = []
    for message in request.body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            parts += content if isinstance(content, list) else [{"type": "text", "text": content}]
    return parts


def test_audio_is_advertised(heron):
    caps = heron(initialize=False).initialize()["agentCapabilities"]
    assert caps["promptCapabilities"]["audio"] is True


@pytest.mark.parametrize(("mime", "fmt"), [("audio/wav", "wav"), ("audio/mpeg", "mp3")])
def test_audio_goes_to_the_model_as_input_audio(heron, fake_llm, workspace, mime, fmt):
    fake_llm.script(text("I hear silence."))
    client = heron()
    session_id = client.new_session(workspace)
    turn = client.prompt(session_id, [{"type": "text", "text": "What is this?"}, audio(mime)])
    assert turn["stopReason"] == "end_turn"
    assert user_parts(fake_llm.requests[0]) == [
        {"type": "text", "text": "What is this?"},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": fmt}},
    ]


def test_audio_in_another_format_is_refused_readably(heron, fake_llm, workspace):
    fake_llm.script(text("fine"))
    client = heron()
    session_id = client.new_session(workspace)
    with pytest.raises(RpcError) as failure:
        client.prompt(session_id, [audio("audio/ogg")])
    assert failure.value.code == -32602
    assert "audio/ogg" in failure.value.message and "WAV" in failure.value.message
    assert fake_llm.requests == []  # nothing was sent
    assert client.prompt(session_id, "hello")["stopReason"] == "end_turn"


def test_a_server_that_refuses_audio_ends_the_prompt_and_the_session_goes_on(
    heron, fake_llm, workspace
):
    fake_llm.rejects_audio = True
    fake_llm.script(text("Text works."))
    client = heron()
    session_id = client.new_session(workspace)
    refused = client.prompt(session_id, [{"type": "text", "text": "Listen"}, audio("audio/wav")])
    # The prompt ends (as the conformance kit wants: a result) with the reason as the answer.
    assert refused["stopReason"] == "end_turn"
    said = "".join(
        u["content"]["text"]
        for u in refused["updates"]
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "did not accept the audio" in said
    assert "HTTP 400" in said  # the server's answer, as it said it
    turn = client.prompt(session_id, "Then read this")
    assert turn["stopReason"] == "end_turn"
    later = user_parts(fake_llm.requests[-1])
    assert not [p for p in later if p["type"] == "input_audio"]
    assert {"type": "text", "text": "Listen"} in later  # the rest of that prompt stays
    # Nor is it sent again once the session is loaded elsewhere: the saved history lost it too.
    stop(client)
    fake_llm.script(text("Still fine."))
    again = heron()
    again.request("session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []})
    assert again.prompt(session_id, "And now?")["stopReason"] == "end_turn"
    assert not [p for p in user_parts(fake_llm.requests[-1]) if p["type"] == "input_audio"]
