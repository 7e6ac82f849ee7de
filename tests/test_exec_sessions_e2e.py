"""Stored sessions from a terminal: `heron exec --continue` / `--session ID` and `heron sessions`.

The real `heron` against the fake model; the sessions are stored by the agent `heron exec`
starts, in the test's own data directory (XDG_DATA_HOME under the test's HOME).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from acp_schema import validate_client_payload
from conftest import _heron_executable, heron_env
from fake_openai import Call, text, tool_calls

SESSION_ID = re.compile(r"sess_[0-9a-f]{32}")


@pytest.fixture
def heron_cli(fake_llm, heron_home):
    """``heron_cli(*args, cwd=..., input="", env=None)``: `heron *args`, finished."""

    def run(
        *args: str, cwd: str | Path, input: str = "", env: dict[str, str | None] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [_heron_executable(), *args],
            input=input,
            capture_output=True,
            text=True,
            env=heron_env(fake_llm, heron_home, env),
            cwd=cwd,
            timeout=60,
        )

    return run


@pytest.fixture
def other_folder(tmp_path: Path) -> str:
    folder = tmp_path / "other"
    folder.mkdir()
    return str(folder)


def exec_json(heron_cli, workspace: str, *args: str, **kw: Any) -> tuple[list[Any], Any]:
    """`heron exec --json`: (the update lines, the final line); asserts it ended well."""
    done = heron_cli("exec", "--cwd", workspace, "--json", *args, cwd=workspace, **kw)
    assert done.returncode == 0, done.stderr
    *updates, final = [json.loads(line) for line in done.stdout.splitlines()]
    return updates, final


def conversation(request: Any) -> list[tuple[str, Any]]:
    """(role, content) of a model request's messages after the system prompt."""
    return [(m["role"], m.get("content")) for m in request.body["messages"][1:]]


# ------------------------------------------------------------------------- exec --continue


def test_continue_takes_up_the_latest_session_of_the_folder(
    heron_cli, fake_llm, workspace, other_folder
):
    fake_llm.script(text("Noted: 42."), text("Elsewhere."), text("It was 42."))
    first = heron_cli("exec", "Remember the number 42.", cwd=workspace)
    assert first.returncode == 0, first.stderr
    started = SESSION_ID.search(first.stderr)
    assert started, first.stderr  # the trace names the session, to continue it later
    # A newer session in another folder is not the one continued here.
    assert heron_cli("exec", "Something else.", cwd=other_folder).returncode == 0

    again = heron_cli("exec", "--continue", "Which number?", cwd=workspace)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "It was 42.\n"  # only the new answer: nothing old is replayed
    assert f"continuing session {started.group()}: Remember the number 42." in again.stderr
    assert conversation(fake_llm.requests[2]) == [
        ("user", "Remember the number 42."),
        ("assistant", "Noted: 42."),
        ("user", "Which number?"),
    ]


def test_json_names_the_session_and_session_id_continues_it_in_its_folder(
    heron_cli, fake_llm, workspace, other_folder
):
    Path(workspace, "here.txt").write_text("x\n")
    fake_llm.script(
        text("First."),
        tool_calls(Call("list_directory", {"path": "."}, id="ls")),
        text("Listed."),
    )
    updates, final = exec_json(heron_cli, workspace, "Start.")
    session_id = final["sessionId"]
    assert final == {"stopReason": "end_turn", "sessionId": session_id}
    assert validate_client_payload("PromptResponse", final) == []
    assert {u["sessionId"] for u in updates} == {session_id}

    # From another folder, without --cwd: the session runs where it was started.
    done = heron_cli("exec", "--json", "--session", session_id, "List it.", cwd=other_folder)
    assert done.returncode == 0, done.stderr
    *updates, final = [json.loads(line) for line in done.stdout.splitlines()]
    assert final == {"stopReason": "end_turn", "sessionId": session_id}
    assert {u["sessionId"] for u in updates} == {session_id}
    kinds = [u["update"]["sessionUpdate"] for u in updates]
    assert "user_message_chunk" not in kinds  # no replay of the stored conversation
    assert "First." not in done.stdout
    listing = [m for m in fake_llm.requests[2].body["messages"] if m["role"] == "tool"]
    assert "here.txt" in listing[0]["content"]
    assert conversation(fake_llm.requests[1])[:2] == [("user", "Start."), ("assistant", "First.")]


def test_a_session_continued_twice_keeps_the_whole_conversation(heron_cli, fake_llm, workspace):
    fake_llm.script(text("one"), text("two"), text("three"))
    _, final = exec_json(heron_cli, workspace, "a")
    exec_json(heron_cli, workspace, "--continue", "b")
    _, last = exec_json(heron_cli, workspace, "--session", final["sessionId"], "c")
    assert last["sessionId"] == final["sessionId"]
    assert conversation(fake_llm.requests[2]) == [
        ("user", "a"),
        ("assistant", "one"),
        ("user", "b"),
        ("assistant", "two"),
        ("user", "c"),
    ]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--session", "sess_nope"), "unknown session: 'sess_nope'"),
        (("--continue",), "no stored session in"),
        (("--continue", "--session", "x"), "not allowed with argument"),
    ],
)
def test_nothing_to_continue_is_a_usage_error(heron_cli, fake_llm, workspace, args, complaint):
    done = heron_cli("exec", *args, "go on", cwd=workspace)
    assert done.returncode == 2, done.stderr
    assert complaint in done.stderr
    assert "Traceback" not in done.stderr
    assert fake_llm.requests == []


def test_unknown_session_in_an_existing_store_exits_2(heron_cli, fake_llm, workspace):
    fake_llm.script(text("ok"))
    exec_json(heron_cli, workspace, "make a store")
    done = heron_cli("exec", "--session", "sess_" + "0" * 32, "go on", cwd=workspace)
    assert done.returncode == 2
    assert "unknown session" in done.stderr and "heron sessions" in done.stderr
    assert len(fake_llm.requests) == 1


def test_session_with_another_cwd_is_refused(heron_cli, fake_llm, workspace, other_folder):
    fake_llm.script(text("ok"))
    _, final = exec_json(heron_cli, workspace, "start")
    done = heron_cli(
        "exec", "--session", final["sessionId"], "--cwd", other_folder, "go", cwd=workspace
    )
    assert done.returncode == 2
    assert f"belongs to {workspace}" in done.stderr
    assert len(fake_llm.requests) == 1


def test_a_continued_session_runs_in_this_run_s_mode_not_the_stored_one(
    heron_cli, fake_llm, workspace
):
    # Started with --yes (stored as full-access); continued without it and with no one to
    # ask: the command must be refused, not run with the old full access.
    fake_llm.script(
        text("ready"),
        tool_calls(Call("bash", {"command": "touch ran"}, id="b")),
        text("could not"),
        tool_calls(Call("bash", {"command": "touch ran2"}, id="b2")),
        text("did it"),
    )
    exec_json(heron_cli, workspace, "--yes", "get ready")
    done = heron_cli("exec", "--continue", "run it", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert not Path(workspace, "ran").exists()
    assert "refused Run `touch ran`" in done.stderr
    # ... and the other way round: --yes on the continued run gives full access for it.
    done = heron_cli("exec", "--continue", "--yes", "run it", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert Path(workspace, "ran2").exists()


def test_exec_continues_a_session_an_editor_started(heron, heron_cli, fake_llm, workspace):
    fake_llm.script(text("from the editor"), text("from the terminal"))
    client = heron("--mode", "read-only")
    session_id = client.new_session(workspace)
    assert client.prompt(session_id, "hello editor")["stopReason"] == "end_turn"
    client.close_stdin()
    assert client.wait_exit() == 0

    done = heron_cli("exec", "--continue", "hello terminal", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "from the terminal\n"
    assert f"continuing session {session_id}" in done.stderr
    assert conversation(fake_llm.requests[1])[:2] == [
        ("user", "hello editor"),
        ("assistant", "from the editor"),
    ]


def test_continue_skips_an_editor_thread_that_was_never_prompted(
    heron, heron_cli, fake_llm, workspace
):
    fake_llm.script(text("Noted: 42."), text("It was 42."))
    editor = heron()
    talked = editor.new_session(workspace)
    assert editor.prompt(talked, "Remember the number 42.")["stopReason"] == "end_turn"
    editor.new_session(workspace)  # a new thread, opened and left empty: newer, yet no talk
    editor.close_stdin()
    assert editor.wait_exit(10) == 0

    again = heron_cli("exec", "--continue", "Which number?", cwd=workspace)
    assert again.returncode == 0, again.stderr
    assert f"continuing session {talked}" in again.stderr
    assert conversation(fake_llm.requests[-1])[0] == ("user", "Remember the number 42.")


def said(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"]
        for u in updates
        if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["type"] == "text"
    )


def test_an_editor_thread_continued_by_exec_keeps_both_processes_turns(
    heron, heron_cli, fake_llm, workspace
):
    fake_llm.script(text("E1"), text("X1"), text("E2"), text("E3"), text("X2"))
    editor = heron()
    session_id = editor.new_session(workspace)
    assert editor.prompt(session_id, "editor one")["stopReason"] == "end_turn"
    # The thread stays open in the editor while a terminal continues it.
    done = heron_cli("exec", "--session", session_id, "terminal one", cwd=workspace)
    assert done.returncode == 0, done.stderr
    turns = [editor.prompt(session_id, f"editor {n}")["updates"] for n in ("two", "three")]
    notices = [said(updates).count("another Heron process") for updates in turns]
    assert sum(notices) == 1  # told once, in the chat
    assert said(turns[1]).endswith("E3")
    editor.close_stdin()
    assert editor.wait_exit(10) == 0
    assert "a write failed" not in editor.stderr

    # Nothing either process saved was written over: the terminal's turn, then the editor's.
    done = heron_cli("exec", "--session", session_id, "terminal two", cwd=workspace)
    assert done.returncode == 0, done.stderr
    users = [c for r, c in conversation(fake_llm.requests[-1]) if r == "user"]
    assert users == ["editor one", "terminal one", "editor two", "editor three", "terminal two"]
    fresh = heron()
    load = fresh.request_async(
        "session/load", {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    )
    load.result()
    shown = [
        u["content"]["text"]
        for u in load.updates()
        if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
        and u["content"]["type"] == "text"
    ]
    # (The note is a message of its own, before E2 or E3.)
    notice = re.compile(r"Note: another Heron process.*?\n\n", re.DOTALL)
    assert [notice.sub("", t) for t in shown if notice.sub("", t)] == [
        "editor one",
        "E1",
        "terminal one",
        "X1",
        "editor two",
        "E2",
        "editor three",
        "E3",
        "terminal two",
        "X2",
    ]


def test_continue_finds_an_editor_s_session_in_a_folder_reached_through_a_symlink(
    heron, heron_cli, fake_llm, workspace, tmp_path
):
    link = tmp_path / "link"
    link.symlink_to(workspace)
    fake_llm.script(text("from the editor"), text("by --cwd"), text("by $PWD"))
    client = heron()
    session_id = client.new_session(str(link))  # stored under the name the editor used
    assert client.prompt(session_id, "hello")["stopReason"] == "end_turn"
    client.close_stdin()
    assert client.wait_exit() == 0
    done = heron_cli("exec", "--continue", "--cwd", str(link), "again", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"continuing session {session_id}" in done.stderr
    # A shell in the link: its $PWD names the folder as the editor did.
    done = heron_cli("exec", "--continue", "more", cwd=link, env={"PWD": str(link)})
    assert done.returncode == 0, done.stderr
    assert f"continuing session {session_id}" in done.stderr


# ------------------------------------------------------------------------- heron sessions


def test_sessions_on_an_empty_store_says_so_and_exits_0(heron_cli, heron_home, workspace):
    done = heron_cli("sessions", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert "No stored sessions yet" in done.stdout
    as_json = heron_cli("sessions", "--json", cwd=workspace)
    assert as_json.returncode == 0
    assert as_json.stdout == ""  # scripts get an empty list
    assert "No stored sessions" in as_json.stderr
    assert not list(heron_home.rglob("sessions.db"))  # a listing creates no store


def test_sessions_lists_newest_first_with_id_updated_title_and_cwd(
    heron_cli, fake_llm, workspace, other_folder
):
    fake_llm.script(text("1"), text("2"), text("3"))
    _, first = exec_json(heron_cli, workspace, "Fix the failing test")
    _, second = exec_json(heron_cli, other_folder, "Write the docs")
    exec_json(heron_cli, workspace, "--continue", "and more")  # the first is newest again

    done = heron_cli("sessions", cwd=workspace)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["ID", "UPDATED", "TITLE", "CWD"]
    assert [row.split()[0] for row in rows] == [first["sessionId"], second["sessionId"]]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d\s+Fix the failing test\s+" + workspace, rows[0])
    assert rows[1].endswith(other_folder) and "Write the docs" in rows[1]

    listed = heron_cli("sessions", "--json", cwd=workspace)
    infos = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [i["sessionId"] for i in infos] == [first["sessionId"], second["sessionId"]]
    for info in infos:
        assert validate_client_payload("SessionInfo", info) == [], info
    assert infos[0]["title"] == "Fix the failing test" and infos[0]["cwd"] == workspace

    only_here = heron_cli("sessions", "--json", "--cwd", workspace, cwd=other_folder)
    assert [json.loads(line)["sessionId"] for line in only_here.stdout.splitlines()] == [
        first["sessionId"]
    ]
    newest = heron_cli("sessions", "--json", "--limit", "1", cwd=workspace)
    assert len(newest.stdout.splitlines()) == 1


def test_sessions_and_exec_follow_the_data_directory(
    heron_cli, fake_llm, workspace, tmp_path, heron_home
):
    store = tmp_path / "elsewhere"
    fake_llm.script(text("ok"), text("again"))
    _, final = exec_json(heron_cli, workspace, "kept apart", env={"HERON_DATA_DIR": str(store)})
    assert (store / "sessions.db").is_file()
    assert "No stored sessions" in heron_cli("sessions", cwd=workspace).stdout
    by_flag = heron_cli("sessions", "--json", "--data-dir", str(store), cwd=workspace)
    assert json.loads(by_flag.stdout)["sessionId"] == final["sessionId"]
    # exec's --data-dir reaches the agent it starts too: the session is found and continued.
    done = heron_cli("exec", "--data-dir", str(store), "--continue", "more", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert conversation(fake_llm.requests[1])[0] == ("user", "kept apart")
    assert not list(heron_home.rglob("sessions.db"))


def test_a_title_cannot_drive_the_terminal(heron_cli, fake_llm, workspace):
    fake_llm.script(text("ok"))
    exec_json(heron_cli, workspace, "\x1b]0;pwned\x07\x1b[2Jhello \u202eevil")
    done = heron_cli("sessions", cwd=workspace)
    assert done.returncode == 0
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\u202e" not in done.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2Jhello \\u202eevil" in done.stdout  # shown, not obeyed


def test_an_unreadable_store_is_a_readable_error(heron_cli, fake_llm, workspace, heron_home):
    store = heron_home / ".local" / "share" / "heron" / "sessions.db"
    store.parent.mkdir(parents=True)
    store.write_bytes(b"this is not a database" * 100)
    for args in (("sessions",), ("exec", "--continue", "go")):
        done = heron_cli(*args, cwd=workspace)
        assert done.returncode == 1, done.stderr
        assert f"cannot read the session store {store}" in done.stderr
        assert "Traceback" not in done.stderr
    assert fake_llm.requests == []


def loaded_mode(heron, workspace: str, session_id: str) -> str:
    """The mode an editor (default settings) gets when it reopens the session."""
    client = heron()
    params = {"sessionId": session_id, "cwd": workspace, "mcpServers": []}
    answer = client.request("session/load", params)
    mode = next(o for o in answer["configOptions"] if o["id"] == "mode")["currentValue"]
    assert answer["modes"]["currentModeId"] == mode
    return mode


@pytest.mark.parametrize("flags", [("--yes",), ("--mode", "accept-edits")])
def test_exec_s_mode_is_for_that_run_only_an_editor_reopens_the_session_in_the_default(
    heron, heron_cli, fake_llm, workspace, flags
):
    fake_llm.script(text("done"))
    _, final = exec_json(heron_cli, workspace, *flags, "do it")
    assert loaded_mode(heron, workspace, final["sessionId"]) == "ask"


def test_exec_continue_yes_leaves_the_session_in_the_mode_it_had_before(
    heron, heron_cli, fake_llm, workspace
):
    fake_llm.script(text("from the editor"), text("from the terminal"))
    client = heron()
    session_id = client.new_session(workspace)
    client.request("session/set_mode", {"sessionId": session_id, "modeId": "read-only"})
    assert client.prompt(session_id, "hello editor")["stopReason"] == "end_turn"
    client.close_stdin()
    assert client.wait_exit() == 0

    done = heron_cli("exec", "--continue", "--yes", "hello terminal", cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert loaded_mode(heron, workspace, session_id) == "read-only"
