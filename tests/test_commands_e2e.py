"""Slash commands, end to end: the real `heron` over its pipes, against the fake model.

The command list (`available_commands_update`) must come right after the `session/new` answer
(Zed drops it before), before the answer to a load or resume (the client knows the session
then, and learns its state with it), and again when command files change; each built-in does
what it says; the user's command files become prompts; and unknown `/words` reach the model
as typed. Every message is schema-checked by the harness.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from acp_client import RpcError
from conftest import trust_folder
from fake_openai import Call, text, tool_calls

from agent.sandbox import available as sandbox_available
from agent.sandbox.landlock import abi_version

BUILTINS = ["help", "compact", "init", "undo", "rewind", "model", "mode", "trust", "rules"]


@pytest.fixture(autouse=True)
def trusted_workspace(heron_home, workspace):
    """These tests are about commands: the project is trusted (tests/test_trust_e2e.py tests
    what an untrusted one does)."""
    trust_folder(heron_home, workspace)


def is_commands(update: dict[str, Any]) -> bool:
    return update["sessionUpdate"] == "available_commands_update"


def listings(client, session_id: str) -> list[list[dict[str, Any]]]:
    """Every command list sent for the session, in order."""
    return [u["availableCommands"] for u in client.updates(session_id) if is_commands(u)]


def wait_for_listing(client, session_id: str, count: int = 1, timeout: float = 10) -> list[dict]:
    """The `count`-th command list of the session (waiting for it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = listings(client, session_id)
        if len(found) >= count:
            return found[count - 1]
        time.sleep(0.02)
    raise AssertionError(f"no command list #{count}; got {listings(client, session_id)}")


def by_name(listing: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in listing}


def said(result: dict[str, Any]) -> str:
    """The agent's text in one turn."""
    return "".join(
        u["content"]["text"]
        for u in result["updates"]
        if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["type"] == "text"
    )


def last_user_content(fake_llm) -> Any:
    return fake_llm.requests[-1].body["messages"][-1]["content"]


def project_commands(workspace: str) -> Path:
    folder = Path(workspace, ".heron", "commands")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def user_commands(home: Path) -> Path:
    folder = home / ".config" / "heron" / "commands"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def stop(client) -> None:
    client.close_stdin()
    assert client.wait_exit(10) == 0


# -- the list, after the answer --------------------------------------------------------------


def test_commands_are_listed_right_after_the_session_new_answer(heron, workspace):
    client = heron()
    pending = client.request_async("session/new", {"cwd": workspace, "mcpServers": []})
    session_id = pending.result()["sessionId"]
    # Nothing before the answer (the harness also flags updates for a session not yet known).
    assert not [u for u in pending.updates() if is_commands(u)]
    listing = wait_for_listing(client, session_id)
    assert [entry["name"] for entry in listing] == BUILTINS
    entries = by_name(listing)
    assert all(entry["description"] for entry in listing)
    assert "input" in entries["compact"] and "input" in entries["model"]
    assert "input" in entries["mode"] and "full-access" in entries["mode"]["input"]["hint"]
    assert "input" not in entries["help"] and "input" not in entries["init"]
    client.round_trip()
    assert len(listings(client, session_id)) == 1  # sent once, not repeated


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_commands_are_listed_before_the_load_and_resume_answer(heron, fake_llm, workspace, method):
    fake_llm.script(text("Hi."))
    first = heron()
    session_id = first.new_session(workspace)
    first.prompt(session_id, "Hello")
    stop(first)
    project_commands(workspace).joinpath("deploy.md").write_text("Deploy the app.\n")

    second = heron()
    params = {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    pending = second.request_async(method, params)
    assert set(pending.result()) == {
        "configOptions",
        "modes",
        "_meta",
    }  # the pickers (agent.options)
    # The client knows the session: its command list comes with it (issue 16), once.
    [listing] = [u["availableCommands"] for u in pending.updates() if is_commands(u)]
    assert [entry["name"] for entry in listing] == [*BUILTINS, "deploy"]


# -- built-ins -------------------------------------------------------------------------------


def test_help_lists_every_command_without_asking_the_model(heron, fake_llm, workspace):
    project_commands(workspace).joinpath("review.md").write_text(
        "---\ndescription: Review the diff\nhint: what to look at\n---\nReview $ARGUMENTS\n"
    )
    client = heron()
    session_id = client.new_session(workspace)
    result = client.prompt(session_id, "/help")
    assert result["stopReason"] == "end_turn"
    help_text = said(result)
    for name in BUILTINS:
        assert f"`/{name}" in help_text
    assert "`/compact <optional: what the summary should focus on>`" in help_text
    assert "`/review <what to look at>` — Review the diff" in help_text
    assert ".heron/commands/" in help_text
    assert fake_llm.requests == []


def test_commands_that_only_answer_work_without_a_model_configured(heron, workspace):
    client = heron(env={"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None})
    session_id = client.new_session(workspace)
    assert "/compact" in said(client.prompt(session_id, "/help"))
    with pytest.raises(RpcError) as err:
        client.prompt(session_id, "/init")
    assert "no model configured" in err.value.message


def test_compact_summarizes_the_whole_history_steered_by_the_focus_text(heron, fake_llm, workspace):
    fake_llm.script(
        text("The schema has three tables."),
        text("SUMMARY: three tables, users first."),
        text("Next step noted."),
    )
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "Describe the database schema")
    result = client.prompt(session_id, "/compact the database schema")
    assert result["stopReason"] == "end_turn"
    assert "Compacted the conversation: 2 messages" in said(result)
    assert "the database schema" in said(result)
    usage = [u for u in result["updates"] if u["sessionUpdate"] == "usage_update"]
    assert usage, "the context meter follows the compaction"

    summarizer = fake_llm.requests[1].body
    assert "tools" not in summarizer
    request = summarizer["messages"][-1]["content"]
    assert "Describe the database schema" in request
    assert request.endswith("The user asks the summary to focus on: the database schema")

    client.prompt(session_id, "Go on")
    messages = fake_llm.requests[2].body["messages"]
    # One user message: templates that demand alternating roles refuse two in a row.
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"].endswith("SUMMARY: three tables, users first.\n\nGo on")


def test_compact_with_nothing_to_compact_says_so(heron, fake_llm, workspace):
    client = heron()
    session_id = client.new_session(workspace)
    result = client.prompt(session_id, "/compact")
    assert result["stopReason"] == "end_turn"
    assert "Nothing to compact" in said(result)
    assert fake_llm.requests == []


def test_init_runs_a_model_turn_with_the_init_prompt_and_the_transcript_shows_init(
    heron, fake_llm, workspace
):
    agents = {"path": "AGENTS.md", "content": "# Project\n"}
    fake_llm.script(
        tool_calls(Call("write_file", agents, id="w1")),
        text("Wrote AGENTS.md."),
    )
    client = heron()
    session_id = client.new_session(workspace)
    result = client.prompt(session_id, "/init keep it short")
    assert result["stopReason"] == "end_turn"
    request = fake_llm.requests[0].body
    prompt = request["messages"][-1]["content"]
    assert "create or update the file AGENTS.md" in prompt
    assert prompt.endswith("The user adds: keep it short")
    assert request["tools"], "a normal turn, with the tools"
    # Through the normal permissions: the write asked (the default mode is `ask`).
    asked = [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert len(asked) == 1
    assert Path(workspace, "AGENTS.md").read_text() == "# Project\n"
    stop(client)

    again = heron()
    load = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    users = [u for u in load.updates() if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == ["/init keep it short"]


def test_a_printing_command_is_replayed_by_load(heron, fake_llm, workspace):
    client = heron()
    session_id = client.new_session(workspace)
    client.prompt(session_id, "/mode")
    stop(client)
    again = heron()
    load = again.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    replay = load.updates()
    assert replay[0] == {
        "sessionUpdate": "user_message_chunk",
        "messageId": replay[0]["messageId"],
        "content": {"type": "text", "text": "/mode"},
    }
    assert "The permission mode is `ask`" in replay[1]["content"]["text"]


def test_undo_with_nothing_to_undo_says_so_without_the_model(heron, fake_llm, workspace):
    client = heron()
    session_id = client.new_session(workspace)
    result = client.prompt(session_id, "/undo")
    assert result["stopReason"] == "end_turn"
    assert said(result).startswith("Nothing to undo")
    assert fake_llm.requests == []


def test_model_lists_and_switches_the_model_of_the_next_request(heron, fake_llm, workspace):
    fake_llm.models = ["fake-model", "other-model"]
    fake_llm.script(text("Switched."))
    client = heron()
    session_id = client.new_session(workspace)
    shown = said(client.prompt(session_id, "/model"))
    assert "The model is `fake-model`" in shown and "`/model NAME`" in shown
    assert said(client.prompt(session_id, "/model other-model")) == (
        "The model is now `other-model`."
    )
    unknown = said(client.prompt(session_id, "/model two words"))
    assert unknown.startswith("Unknown value 'two words' for model") and "other-model" in unknown
    client.prompt(session_id, "Hello")
    assert fake_llm.requests[0].body["model"] == "other-model"


def test_mode_lists_and_switches_the_permission_mode(heron, fake_llm, workspace):
    fake_llm.script(
        tool_calls(Call("write_file", {"path": "new.txt", "content": "x\n"}, id="w1")),
        text("Written."),
    )
    client = heron()
    session_id = client.new_session(workspace)
    shown = said(client.prompt(session_id, "/mode"))
    assert "- `ask` (current)" in shown
    for mode in ("read-only", "accept-edits", "full-access"):
        assert f"- `{mode}` — " in shown
    bad = said(client.prompt(session_id, "/mode everything"))
    assert bad.startswith("Unknown value 'everything' for mode") and "full-access" in bad
    # One line: the mode, what it lets run and what it stops.
    auto = said(client.prompt(session_id, "/mode auto"))
    assert auto.startswith("The permission mode is now `auto`: ") and "\n" not in auto
    assert "sandbox" in auto and "ask" in auto
    if not sandbox_available():
        assert "commands ask" in auto
    assert said(client.prompt(session_id, "/mode full-access")) == (
        "The permission mode is now `full-access`: Everything runs without asking."
    )
    client.prompt(session_id, "Write new.txt")
    assert not [r for r in client.agent_requests if r.method == "session/request_permission"]
    assert Path(workspace, "new.txt").read_text() == "x\n"


@pytest.mark.skipif(abi_version() < 6, reason="Landlock alone confines from ABI 6 only")
def test_mode_auto_says_when_this_sessions_folders_leave_no_sandbox(heron, heron_home):
    """The machine has Landlock alone, but the session's folder holds the home folder, whose
    dotfiles Landlock cannot keep read-only: /mode auto says commands ask, and why."""
    client = heron(env={"HERON_SANDBOX": "landlock"})
    session_id = client.new_session(str(heron_home))
    auto = said(client.prompt(session_id, "/mode auto"))
    assert "commands ask" in auto and "home folder" in auto, auto


# -- the user's commands ---------------------------------------------------------------------


def test_a_project_command_with_front_matter_and_arguments(heron, fake_llm, workspace):
    Path(workspace, "notes.md").write_text("remember the tests\n")
    project_commands(workspace).joinpath("review.md").write_text(
        "---\n"
        'description: "Review a file: bugs first"\n'
        "hint: 'path to review'\n"
        "---\n"
        "Review $ARGUMENTS with care.\nThen review $ARGUMENTS again.\n"
    )
    fake_llm.script(text("Reviewed."))
    client = heron()
    session_id = client.new_session(workspace)
    entry = by_name(wait_for_listing(client, session_id))["review"]
    assert entry == {
        "name": "review",
        "description": "Review a file: bugs first",
        "input": {"hint": "path to review"},
    }
    link = {"type": "resource_link", "uri": f"file://{workspace}/notes.md", "name": "notes.md"}
    result = client.prompt(session_id, [{"type": "text", "text": "/review src/app.py"}, link])
    assert result["stopReason"] == "end_turn"
    content = last_user_content(fake_llm)
    assert content.startswith("Review src/app.py with care.\nThen review src/app.py again.")
    assert "remember the tests" in content  # the attached file came along
    assert "/review" not in content


def test_the_users_command_beats_the_projects_and_user_commands_are_listed(
    heron, fake_llm, workspace, heron_home
):
    """A cloned repository's command files cannot replace the user's own (issue 21)."""
    project_commands(workspace).joinpath("fix.md").write_text("Project fix: $ARGUMENTS\n")
    project_commands(workspace).joinpath("lint.md").write_text("Project lint.\n")
    user_commands(heron_home).joinpath("fix.md").write_text("User fix: $ARGUMENTS\n")
    user_commands(heron_home).joinpath("explain.md").write_text(
        "---\ndescription: Explain code\n---\nExplain this.\n"
    )
    fake_llm.script(text("Fixed."), text("Explained."))
    client = heron()
    session_id = client.new_session(workspace)
    listing = wait_for_listing(client, session_id)
    assert [entry["name"] for entry in listing] == [*BUILTINS, "explain", "fix", "lint"]
    assert by_name(listing)["fix"]["description"] == "User fix: $ARGUMENTS"
    assert by_name(listing)["fix"]["input"] == {"hint": "arguments"}
    client.prompt(session_id, "/fix the bug")
    assert last_user_content(fake_llm) == "User fix: the bug"
    client.prompt(session_id, "/explain   main.py  ")  # no $ARGUMENTS: the text follows
    assert last_user_content(fake_llm) == "Explain this.\n\nmain.py"


def test_changed_command_files_are_read_again_and_listed_again(
    heron, fake_llm, workspace, heron_home
):
    folder = project_commands(workspace)
    fake_llm.script(text("One."), text("Two."), text("Three."))
    client = heron()
    session_id = client.new_session(workspace)
    assert [e["name"] for e in wait_for_listing(client, session_id, 1)] == BUILTINS

    # Added: usable by the very prompt that follows, and listed again.
    folder.joinpath("hello.md").write_text("---\ndescription: Say hello\n---\nSay hello.\n")
    client.prompt(session_id, "/hello")
    assert last_user_content(fake_llm) == "Say hello."
    assert by_name(wait_for_listing(client, session_id, 2))["hello"]["description"] == ("Say hello")

    # Changed in place (same folder, new content): read again.
    folder.joinpath("hello.md").write_text(
        "---\ndescription: Greet warmly\nhint: who\n---\nGreet $ARGUMENTS warmly.\n"
    )
    client.prompt(session_id, "/hello Ada")
    assert last_user_content(fake_llm) == "Greet Ada warmly."
    changed = by_name(wait_for_listing(client, session_id, 3))["hello"]
    assert changed == {"name": "hello", "description": "Greet warmly", "input": {"hint": "who"}}

    # Removed: no longer a command, so the text goes to the model as typed.
    folder.joinpath("hello.md").unlink()
    client.prompt(session_id, "/hello Ada")
    assert last_user_content(fake_llm) == "/hello Ada"
    assert "hello" not in by_name(wait_for_listing(client, session_id, 4))

    # A prompt that changes nothing sends no new list.
    client.prompt(session_id, "/help")
    client.round_trip()
    assert len(listings(client, session_id)) == 4


def test_a_command_file_the_turn_writes_is_listed_when_the_turn_ends(heron, fake_llm, workspace):
    command = {"path": ".heron/commands/ship.md", "content": "Ship it.\n"}
    fake_llm.script(tool_calls(Call("write_file", command, id="w1")), text("Added /ship."))
    client = heron("--mode", "full-access")
    session_id = client.new_session(workspace)
    wait_for_listing(client, session_id, 1)
    client.prompt(session_id, "Add a ship command")
    assert "ship" in by_name(wait_for_listing(client, session_id, 2))


def test_unknown_slash_words_go_to_the_model_as_typed(heron, fake_llm, workspace):
    fake_llm.script(text("a"), text("b"), text("c"), text("d"))
    client = heron()
    session_id = client.new_session(workspace)
    for prompt in ("/nosuch do it", "/helpful", "please /help", "/help/"):
        result = client.prompt(session_id, prompt)
        assert result["stopReason"] == "end_turn"
        assert last_user_content(fake_llm) == prompt
    assert len(fake_llm.requests) == 4
    client.prompt(session_id, "/help")  # while the known name is a command
    assert len(fake_llm.requests) == 4


# -- hostile command folders -----------------------------------------------------------------


def test_hostile_command_files_are_skipped_and_heron_keeps_serving(
    heron, fake_llm, workspace, tmp_path
):
    folder = project_commands(workspace)
    folder.joinpath("good.md").write_text("---\ndescription: Fine\n---\nAll good.\n")
    folder.joinpath("huge.md").write_bytes(b"x" * (2 * 1024 * 1024))
    folder.joinpath("latin.md").write_bytes(b"---\ndescription: caf\xe9\n---\nBody \xff\n")
    os.mkfifo(folder / "fifo.md")  # opening it for reading would block forever
    secret = tmp_path / "secret.md"
    secret.write_text("the secret outside the project\n")
    (folder / "leak.md").symlink_to(secret)
    (folder / "loop.md").symlink_to(folder / "loop.md")
    (folder / "dangling.md").symlink_to(tmp_path / "nothing-here.md")
    folder.joinpath("dir.md").mkdir()
    folder.joinpath("bad name.md").write_text("spaces\n")
    folder.joinpath("-dash.md").write_text("dash\n")
    folder.joinpath(".hidden.md").write_text("hidden\n")
    folder.joinpath("notes.txt").write_text("not markdown\n")
    folder.joinpath("ctl.md").write_text("---\ndescription: a\x1b[31mred\nhint: x\ty\n---\nok\n")
    folder.joinpath("open.md").write_text("---\ndescription: never closed\nBody.\n")
    for i in range(250):
        folder.joinpath(f"zz{i:03}.md").write_text(f"Command {i}\n")

    fake_llm.script(text("Fine."))
    client = heron()
    session_id = client.new_session(workspace)
    listing = by_name(wait_for_listing(client, session_id, timeout=60))
    names = set(listing)
    assert {"good", "latin", "ctl", "open"} <= names
    assert not names & {"huge", "fifo", "leak", "loop", "dangling", "dir", "bad name", "-dash"}
    assert not names & {".hidden", "notes"}
    assert listing["latin"]["description"] == "caf\ufffd"
    assert listing["ctl"] == {"name": "ctl", "description": "a [31mred", "input": {"hint": "x y"}}
    assert listing["open"]["description"]  # never closed: not front matter, all body
    # At most 200 command files per folder, the first by name (skipped ones count).
    assert "zz189" in names and "zz190" not in names

    # Skipped commands are plain text for the model; the secret never leaves.
    client.prompt(session_id, "/leak")
    assert last_user_content(fake_llm) == "/leak"
    assert "the secret outside" not in str(fake_llm.requests[0].body)
    result = client.prompt(session_id, "/help")
    assert "`/good` — Fine" in said(result)


def test_a_command_folder_that_is_a_file_is_ignored(heron, workspace, heron_home):
    Path(workspace, ".heron").mkdir()
    Path(workspace, ".heron", "commands").write_text("not a folder\n")
    config = heron_home / ".config" / "heron"
    config.mkdir(parents=True, exist_ok=True)
    (config / "commands").symlink_to("/dev/null")  # a device, not a folder
    client = heron()
    session_id = client.new_session(workspace)
    assert [e["name"] for e in wait_for_listing(client, session_id)] == BUILTINS
    assert "/help" in said(client.prompt(session_id, "/help"))


# -- MCP prompts -----------------------------------------------------------------------------


def wait_for_command(client, session_id: str, name: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for listing in reversed(listings(client, session_id)):
            if name in by_name(listing):
                return by_name(listing)[name]
        time.sleep(0.05)
    raise AssertionError(f"/{name} never listed; got {listings(client, session_id)}")


def test_mcp_prompts_become_commands_as_the_server_starts_and_changes(
    heron, fake_llm, workspace, tmp_path
):
    from test_mcp_e2e import stdio

    markers = tmp_path / "markers"
    markers.mkdir()
    fake_llm.script(
        text("Reviewed."),
        tool_calls(Call("mcp__tools__add_prompt", {}, id="a1")),
        text("Added."),
        text("Later done."),
    )
    client = heron("--mode", "full-access", env={"HERON_MCP_STARTUP_TIMEOUT": "30"})
    session_id = client.new_session(workspace, [stdio(markers)])
    # Listed once the server is up, after the first list (the server starts in the background).
    assert wait_for_command(client, session_id, "tools.review") == {
        "name": "tools.review",
        "description": "Review code for one kind of problem",
        "input": {"hint": "code [focus]"},
    }
    assert "tools.broken" in by_name(listings(client, session_id)[-1])

    client.prompt(session_id, '/tools.review "x = 1" style')
    assert last_user_content(fake_llm) == "Review this code, looking for style:\nx = 1"

    missing = client.prompt(session_id, "/tools.review")
    assert said(missing) == "`/tools.review` needs code: `/tools.review code [focus]`."
    failed = client.prompt(session_id, "/tools.broken")
    assert said(failed).startswith("The prompt could not be fetched: MCP server 'tools'")
    assert len(fake_llm.requests) == 1

    # prompts/list_changed: the new prompt is listed, then usable.
    client.prompt(session_id, "Add a prompt")
    assert wait_for_command(client, session_id, "tools.later")["description"] == "Added later"
    client.prompt(session_id, "/tools.later")
    assert last_user_content(fake_llm) == "Later prompt."
