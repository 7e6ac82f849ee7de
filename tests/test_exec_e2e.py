"""`heron exec`: one prompt turn from a terminal or a script, end to end.

The real `heron` executable against the scripted fake model; the interactive parts (permission
questions, Ctrl-C) through a pseudo-terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from acp_schema import validate_client_payload
from conftest import _heron_executable, heron_env
from fake_openai import Call, error, text, tool_calls

from agent.sandbox import available as sandbox_available

ANSI = re.compile(r"\x1b\[[0-9;]*m")

# Updates about the session rather than the turn (token usage, title) may come last.
_SESSION_STATE = {"usage_update", "session_info_update"}


@pytest.fixture
def run_exec(fake_llm, workspace, heron_home):
    """``run_exec(*args, input=None, env=None)``: `heron exec --cwd <workspace> *args`."""

    def run(
        *args: str, input: str | None = None, env: dict[str, str | None] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [_heron_executable(), "exec", "--cwd", workspace, *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=heron_env(fake_llm, heron_home, env),
            cwd=heron_home,
            timeout=60,
        )

    return run


def last_user_message(fake_llm: Any) -> Any:
    return fake_llm.requests[-1].body["messages"][1]["content"]


# ------------------------------------------------------------------------------ output


def test_the_answer_goes_to_stdout_and_the_trace_to_stderr(run_exec, fake_llm, workspace):
    Path(workspace, "notes.txt").write_text("remember the milk\n")
    fake_llm.script(
        tool_calls(Call("read_file", {"path": "notes.txt"})),
        text("You should ", "buy milk.", reasoning=["The note says milk."]),
    )
    done = run_exec("What does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "You should buy milk.\n"
    assert "✓ Read notes.txt" in done.stderr
    assert "The note says milk." in done.stderr
    assert "\x1b[" not in done.stderr  # not a terminal: no colours
    assert last_user_message(fake_llm) == "What does notes.txt say?"


def test_an_edit_is_traced_with_its_diff_summary(run_exec, fake_llm, workspace):
    path = Path(workspace, "app.py")
    path.write_text("a = 1\nb = 2\n")
    edit = {"path": "app.py", "old_string": "a = 1\n", "new_string": "a = 10\nc = 3\n"}
    fake_llm.script(tool_calls(Call("edit_file", edit)), text("Edited."))
    done = run_exec("--mode", "accept-edits", "change a")
    assert done.returncode == 0, done.stderr
    assert path.read_text() == "a = 10\nc = 3\nb = 2\n"
    assert "✓ Edit app.py +2 -1" in done.stderr


def test_json_prints_schema_valid_updates_then_the_stop_reason(run_exec, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("x\n")
    read = tool_calls(Call("read_file", {"path": "a.txt"}))
    fake_llm.script(read, text("Done", reasoning=["hm"]))
    done = run_exec("--json", "read it")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    *updates, final = lines
    # The session id too, so that a script can continue it (`heron exec --session ID`).
    assert final == {"stopReason": "end_turn", "sessionId": updates[0]["sessionId"]}
    assert validate_client_payload("PromptResponse", final) == []
    for params in updates:
        assert validate_client_payload("SessionNotification", params) == [], params
    kinds = [u["update"]["sessionUpdate"] for u in updates]
    assert {"tool_call", "tool_call_update", "agent_thought_chunk"} <= set(kinds)
    turn = [u for u in updates if u["update"]["sessionUpdate"] not in _SESSION_STATE]
    assert turn[-1]["update"]["sessionUpdate"] == "agent_message_chunk"
    assert turn[-1]["update"]["content"]["text"] == "Done"
    assert len({u["sessionId"] for u in updates}) == 1


def test_the_prompt_can_come_from_stdin(run_exec, fake_llm):
    fake_llm.script(text("ok"))
    done = run_exec("-", input="Explain\nthis, over two lines\n")
    assert done.returncode == 0, done.stderr
    assert last_user_message(fake_llm) == "Explain\nthis, over two lines\n"


# ------------------------------------------------------------------------------ exit codes


@pytest.mark.parametrize(
    ("finish", "complaint"),
    [("length", "output token limit"), ("content_filter", "refused")],
)
def test_an_early_stop_exits_3(run_exec, fake_llm, finish, complaint):
    fake_llm.script(text("partial", finish=finish))
    done = run_exec("go")
    assert done.returncode == 3
    assert done.stdout == "partial\n"
    assert complaint in done.stderr


def test_running_out_of_model_requests_exits_3(run_exec, fake_llm):
    fake_llm.script(tool_calls(Call("list_directory", {"path": "."})), text("never"))
    done = run_exec("--max-turn-requests", "1", "--json", "go")
    assert done.returncode == 3
    assert json.loads(done.stdout.splitlines()[-1])["stopReason"] == "max_turn_requests"
    assert "--max-turn-requests" in done.stderr


@pytest.mark.parametrize("json_mode", [False, True])
def test_a_model_error_exits_1_with_a_readable_message(run_exec, fake_llm, json_mode):
    fake_llm.script(error(401, "Incorrect API key provided: sk-test"))
    done = run_exec(*(["--json"] if json_mode else []), "go")
    assert done.returncode == 1
    assert "Incorrect API key" in done.stderr
    assert "Traceback" not in done.stderr
    if json_mode:  # scripts get the error as the last JSON line
        assert "Incorrect API key" in json.loads(done.stdout.splitlines()[-1])["error"]["message"]
    else:
        assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "env", "complaint"),
    [
        ((), None, "the following arguments are required: prompt"),
        (("",), None, "the prompt is empty"),
        (("--cwd", "/nonexistent/dir", "go"), None, "not a directory"),
        (("--yes", "--mode", "ask", "go"), None, "contradicts"),
        (("--base-url", "localhost:11434/v1", "go"), None, "http://localhost:11434/v1"),
        (("go",), {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None}, "heron setup"),
    ],
)
def test_usage_and_configuration_errors_exit_2(run_exec, fake_llm, args, env, complaint):
    done = run_exec(*args, env=env)
    assert done.returncode == 2, done.stderr
    assert complaint in done.stderr
    assert "Traceback" not in done.stderr
    assert fake_llm.requests == []


# ------------------------------------------------------------------------------ permissions


def test_without_a_terminal_a_question_is_refused_and_the_trace_names_the_flag(
    run_exec, fake_llm, workspace
):
    fake_llm.script(
        tool_calls(Call("bash", {"command": "touch ran"}, id="cmd")),
        tool_calls(Call("write_file", {"path": "new.txt", "content": "hi\n"}, id="wr")),
        text("I could not."),
    )
    done = run_exec("--mode", "ask", "do things")
    assert done.returncode == 0, done.stderr
    assert not Path(workspace, "ran").exists()
    assert not Path(workspace, "new.txt").exists()
    assert "refused Run `touch ran`" in done.stderr
    hint = done.stderr.split("refused Run")[1].splitlines()[0]
    assert "--yes" in hint
    if sandbox_available():  # the sandboxed mode is offered before full access
        assert "--mode auto (sandboxed) or --yes (full access)" in hint
    assert "--mode accept-edits" in done.stderr.split("refused Create")[1].splitlines()[0]
    # The model was told the call was rejected.
    tool_messages = [m for m in fake_llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert "Rejected" in tool_messages[0]["content"]


def test_a_failing_command_is_traced_as_failed_with_its_exit_code_and_last_lines(
    run_exec, fake_llm, workspace
):
    command = "for i in $(seq 1 30); do echo line$i; done; exit 2"
    fake_llm.script(tool_calls(Call("bash", {"command": command}, id="b")), text("It failed."))
    done = run_exec("--yes", "run it")
    assert done.returncode == 0, done.stderr  # the turn ended well; the command did not
    lines = done.stderr.splitlines()
    [failed] = [i for i, line in enumerate(lines) if line.startswith("✗ Run")]
    assert lines[failed].endswith(": Exit code 2")
    assert lines[failed + 1 : failed + 6] == [f"  │ line{i}" for i in range(26, 31)]
    assert "✓ Run" not in done.stderr
    # The model read all of it.
    told = next(m for m in fake_llm.requests[1].body["messages"] if m["role"] == "tool")
    assert told["content"].startswith("Exit code 2\nline1\n") and "line30" in told["content"]


def test_yes_runs_everything_unasked(run_exec, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("bash", {"command": "touch ran"})), text("Done."))
    done = run_exec("--yes", "--mode", "full-access", "do it")
    assert done.returncode == 0, done.stderr
    assert Path(workspace, "ran").exists()
    assert "✓ Run `touch ran`" in done.stderr


def test_an_untrusted_folder_stays_inert_with_one_line_and_trust_uses_it(
    run_exec, fake_llm, workspace
):
    commands = Path(workspace, ".heron", "commands")
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("Review the project.\n")
    fake_llm.script(text("Plain."), text("Reviewed."))
    done = run_exec("/review")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "is not trusted" in line]
    assert len(notes) == 1 and ".heron/commands/review.md" in notes[0] and "--trust" in notes[0]
    assert fake_llm.requests[0].body["messages"][-1]["content"] == "/review"  # not a command

    done = run_exec("--trust", "/review")
    assert done.returncode == 0, done.stderr
    assert "is not trusted" not in done.stderr
    assert fake_llm.requests[1].body["messages"][-1]["content"] == "Review the project."
    fake_llm.script(text("Plain again."))
    done = run_exec("--continue", "/review")  # --trust was for that run only
    assert "is not trusted" in done.stderr
    assert fake_llm.requests[2].body["messages"][-1]["content"] == "/review"


# ------------------------------------------------------------------------------ a terminal


class Terminal:
    """A process on a pseudo-terminal: what it shows is read, what we type is written."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
            try:
                os.chdir(cwd)
                # As a shell on a terminal would start it: Ctrl-C interrupts. (A test run
                # started in the background of a non-interactive shell inherits SIGINT
                # ignored, and so would the program, which Python then leaves ignored.)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = ""
        self.status: int | None = None

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.output)

    def _read(self, timeout: float) -> str:
        """Read what is there: "data", "idle" (nothing within timeout) or "eof"."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return "idle"
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: every process on the terminal has gone
            data = b""
        self.output += data.decode("utf-8", "replace")
        return "data" if data else "eof"

    def expect(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            if time.monotonic() > deadline or self._read(0.1) == "eof":
                raise AssertionError(f"{text!r} never appeared; the screen:\n{self.screen}")

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def interrupt(self) -> None:
        """Ctrl-C as a person presses it: once the program sits in its read. A SIGINT that
        lands between a prompt being printed and the read starting is only seen by CPython
        when the read returns, a window a loaded test machine can hit."""
        self.wait_reading()
        self.type("\x03")

    def wait_reading(self, fd: int | None = 0, timeout: float = 20) -> None:
        """Poll until the program's main thread is blocked in read(2) of `fd` (None: of any
        file) (Linux /proc). Only a read of the terminal will do for a Ctrl-C: one that lands
        while Python reads a module during an import is lost the same way."""
        number = {"x86_64": "0 ", "aarch64": "63 "}.get(platform.machine())
        if number and fd is not None:
            number += f"{fd:#x} "
        deadline = time.monotonic() + timeout
        while number and not _syscall(self.pid).startswith(number):
            assert time.monotonic() < deadline, f"never read its input; the screen:\n{self.screen}"
            self._read(0.02)

    def wait(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.05)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                while self._read(0.05) == "data":  # what it wrote last
                    pass
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
        raise AssertionError(f"still running after {timeout}s; the screen:\n{self.screen}")

    def close(self) -> None:
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def terminal(fake_llm, workspace, heron_home):
    """``terminal(*args)``: a `heron` command line on a pseudo-terminal."""
    opened: list[Terminal] = []

    def start(*args: str, env: dict[str, str | None] | None = None) -> Terminal:
        term = Terminal(
            [_heron_executable(), *args],
            heron_env(fake_llm, heron_home, {"TERM": "xterm", "NO_COLOR": None, **(env or {})}),
            workspace,
        )
        opened.append(term)
        return term

    yield start
    for term in opened:
        term.close()


@pytest.mark.parametrize(("answer", "runs"), [("y", True), ("n", False)])
def test_a_question_is_asked_on_the_terminal(terminal, fake_llm, workspace, answer, runs):
    fake_llm.script(tool_calls(Call("bash", {"command": "touch ran"})), text("Finished."))
    term = terminal("exec", "--mode", "ask", "make a file")
    term.expect("Heron wants to: Run `touch ran`")
    term.expect("$ touch ran")
    term.expect("Allow? [y/a/n/r]")
    assert not Path(workspace, "ran").exists()  # nothing runs before the answer
    term.type(answer + "\r")
    assert term.wait() == 0, term.screen
    assert Path(workspace, "ran").exists() is runs
    assert "Finished." in term.screen
    assert "\x1b[" in term.output  # a terminal: colours


def test_a_question_lists_what_always_would_cover(terminal, fake_llm, workspace):
    command = "touch a.txt && tail a.txt"
    fake_llm.script(tool_calls(Call("bash", {"command": command})), text("Finished."))
    term = terminal("exec", "--mode", "ask", "go")
    term.expect("Allow? [y/a/n/r]")
    assert "[a] Always allow these 2 commands (each as listed)" in term.screen
    assert '"Always" covers each of these:' in term.screen
    assert "- exactly `touch a.txt`" in term.screen
    assert "- `tail` (safe options, paths in the workspace)" in term.screen
    term.type("n\r")
    assert term.wait() == 0, term.screen
    assert not Path(workspace, "a.txt").exists()


def test_a_question_shows_control_characters_instead_of_obeying_them(terminal, fake_llm, workspace):
    # A carriage return and "erase line" would make this command read as `ls`.
    command = "touch evil #\r\x1b[2Kls"
    fake_llm.script(tool_calls(Call("bash", {"command": command})), text("Not\x1b[8m hidden"))
    term = terminal("exec", "--mode", "ask", "go")
    term.expect("Allow?")
    assert "\x1b[2K" not in term.output
    assert "$ touch evil #\\x0d\\x1b[2Kls" in term.screen
    assert "Run `touch evil # \\x1b[2Kls`" in term.screen  # the title too
    term.type("n\r")
    assert term.wait() == 0, term.screen
    assert not Path(workspace, "evil").exists()
    assert "\x1b[8m" not in term.output and "Not\\x1b[8m hidden" in term.screen


def test_piped_output_keeps_the_model_s_text_exactly(run_exec, fake_llm):
    fake_llm.script(text("tab\there\n\x1b[1mbold\x1b[0m\x07"))
    done = run_exec("go")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "tab\there\n\x1b[1mbold\x1b[0m\x07\n"


def test_an_edit_question_shows_the_diff(terminal, fake_llm, workspace):
    Path(workspace, "app.py").write_text("x = 1\n")
    edit = {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"}
    fake_llm.script(tool_calls(Call("edit_file", edit)), text("Edited."))
    term = terminal("exec", "change x")
    term.expect("Allow?")
    assert "-x = 1" in term.screen and "+x = 2" in term.screen
    term.type("a\r")
    assert term.wait() == 0, term.screen
    assert Path(workspace, "app.py").read_text() == "x = 2\n"


def _exec_a_long_command(terminal, fake_llm, workspace):
    """`heron exec --yes` running `sleep 60` in a pty; returns the terminal and the sleep's pid."""
    pid_file = Path(workspace, "pid")
    command = f"echo $$ > {pid_file}; exec sleep 60"
    fake_llm.script(tool_calls(Call("bash", {"command": command})), text("never read"))
    term = terminal("exec", "--yes", "wait a minute")
    term.expect("▸ Run")
    deadline = time.monotonic() + 10
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, term.screen
        time.sleep(0.05)
    return term, int(pid_file.read_text())


def test_ctrl_c_cancels_the_turn_kills_the_command_and_exits_130(terminal, fake_llm, workspace):
    term, sleeper = _exec_a_long_command(terminal, fake_llm, workspace)
    term.type("\x03")
    assert term.wait() == 130, term.screen
    assert "interrupted" in term.screen
    assert "Traceback" not in term.screen
    deadline = time.monotonic() + 5
    while _alive(sleeper):
        assert time.monotonic() < deadline, "the command outlived the interrupted turn"
        time.sleep(0.05)


def test_a_second_ctrl_c_exits_at_once_and_the_command_still_dies(terminal, fake_llm, workspace):
    term, sleeper = _exec_a_long_command(terminal, fake_llm, workspace)
    # A stuck agent: the first Ctrl-C's cancel gets no answer, only the second one ends this.
    agent = int(Path(f"/proc/{term.pid}/task/{term.pid}/children").read_text().split()[0])
    os.kill(agent, signal.SIGSTOP)
    try:
        term.type("\x03")
        term.expect("Ctrl-C again")
        term.wait_reading(fd=None)  # back in a read: it did not exit on the first Ctrl-C
        assert os.waitpid(term.pid, os.WNOHANG) == (0, 0), "exited before the second Ctrl-C"
        term.type("\x03")
        assert term.wait(timeout=5) == 130, term.screen
    finally:
        os.kill(agent, signal.SIGCONT)
    assert "Traceback" not in term.screen
    # The agent saw its stdin close: it stops the command and exits on its own.
    deadline = time.monotonic() + 5
    while _alive(sleeper):
        assert time.monotonic() < deadline, "the command outlived heron exec"
        time.sleep(0.05)


def test_ctrl_c_during_a_question_exits_130(terminal, fake_llm, workspace):
    fake_llm.script(tool_calls(Call("bash", {"command": "touch ran"})), text("never"))
    term = terminal("exec", "make a file")
    term.expect("Allow?")
    term.type("\x03")
    assert term.wait() == 130, term.screen
    assert "Traceback" not in term.screen
    assert not Path(workspace, "ran").exists()


def test_ctrl_c_while_the_prompt_is_typed_exits_130(terminal, fake_llm):
    term = terminal("exec", "-")  # the prompt from stdin: here, the terminal
    term.type("half a prom")
    # Once it reads its stdin (a Ctrl-C during Python's own start-up is Python's business).
    term.interrupt()
    assert term.wait() == 130, term.screen
    assert "Traceback" not in term.screen
    assert fake_llm.requests == []


def _syscall(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/syscall").read_text()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not reaped yet) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
