"""`heron exec "task"`: one prompt turn from a terminal or a script, then exit.

The turn runs in the very same engine an editor talks to: `heron exec` starts `python -m agent`
as a child process and is a small ACP client of it over its pipes. That reuses the whole
protocol path (permissions, cancellation, tool lifecycle) instead of a second way in, and keeps
the agent out of the terminal's process group, so Ctrl-C reaches only us and we turn it into a
clean `session/cancel`. The price is one interpreter start-up (about 40 ms).

`--continue` / `--session ID` continue a stored session with `session/resume`, which restores
the model's history without replaying it (so nothing old is printed as if it were new). The
session runs in this run's mode (`--mode`, `--yes`, else the settings), never in the one it was
stored with: a session once run with `--yes` must not keep full access in a later run. That
mode is sent as `_meta.heron.mode`, which lasts for this run only: the stored session keeps
the mode it had before (or the default), so an editor that reopens it is never in full access
because of a one-shot `--yes`.

Exit codes: 0 end_turn; 1 model or runtime error; 2 usage or configuration error (an unknown
session included); 3 max_tokens / max_turn_requests / refusal; 130 interrupted; 141 the reader
of the output left (`| head`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.config import ConfigError, add_flags, config_path, load_settings
from agent.sandbox import available as sandbox_available
from agent.terminal.prompts import Terminal
from agent.terminal.sessions import StoreUnreadable, cwd_forms, find_session, latest_session
from agent.terminal.trace import Trace

if TYPE_CHECKING:
    from agent.store.db import SessionRow

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_PIPE_CLOSED = 141  # whoever read the output left (`| head`): what a SIGPIPE'd tool exits with

STOPPED = {
    "max_tokens": "the model hit its output token limit",
    "max_turn_requests": "the turn used up its model requests (raise --max-turn-requests)",
    "refusal": "the model refused to continue",
}

# Flags (agent.config.FLAGS) handed to the agent as they are: the settings, the model's limits
# and tool-call style as the editor path takes them (agent.cli).
AGENT_FLAGS = (
    "model",
    "base_url",
    "mode",
    "max_turn_requests",
    "config",
    "log_level",
    "data_dir",
    "max_tokens",
    "context_window",
    "tool_calls",
)

INVALID_PARAMS = -32602  # the agent's answer to a session it does not know


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heron exec",
        description="Run one prompt turn with Heron's tools in a directory and exit. The answer "
        "goes to stdout, a trace of the tool calls to stderr.",
        epilog="Exit codes: 0 done; 1 model or runtime error; 2 usage or configuration error; "
        "3 stopped early (token limit, request limit, refusal); 130 interrupted; 141 the reader of "
        "the output left (| head).",
    )
    parser.add_argument("prompt", help='the task; "-" reads it from stdin')
    parser.add_argument("--cwd", help="the workspace (default: the current directory)")
    stored = parser.add_mutually_exclusive_group()
    stored.add_argument(
        "--continue",
        "-c",
        dest="continue_latest",
        action="store_true",
        help="continue the most recent stored session of --cwd",
    )
    stored.add_argument(
        "--session",
        metavar="ID",
        help="continue this stored session, in its folder (`heron sessions` lists them)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print each ACP session/update (then the stop reason) as one JSON object per line",
    )
    parser.add_argument(
        "--yes", "-y", action="store_true", help="full access for this run: nothing asks"
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="trust the folder for this run: its command files, skills and git settings are "
        "used (an untrusted folder's are not; /trust in an editor remembers a decision)",
    )
    add_flags(parser, AGENT_FLAGS)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)  # usage errors exit with 2
    if args.yes:
        if args.mode not in (None, "full-access"):
            return usage(f"--yes means --mode full-access; it contradicts --mode {args.mode}")
        args.mode = "full-access"
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        return usage("the prompt is empty")
    cwd = Path(args.cwd or os.getcwd()).expanduser().resolve()
    if not cwd.is_dir():
        return usage(f"--cwd is not a directory: {cwd}")
    flags = {name: getattr(args, name) for name in AGENT_FLAGS if name != "config"}
    try:
        settings = load_settings(flags, args.config or os.environ.get("HERON_CONFIG"))
    except ConfigError as exc:
        return usage(str(exc))
    if not settings.llm_configured:
        return usage(
            "no model configured: run `heron setup`, or set OPENAI_API_KEY (OpenAI) or "
            f"OPENAI_BASE_URL (any OpenAI-compatible server) and HERON_MODEL; config file: "
            f"{config_path(args.config)}"
        )
    resumed: SessionRow | None = None
    if args.continue_latest or args.session:
        try:
            if args.session:
                resumed = find_session(settings, args.session)
            else:
                resumed = latest_session(settings, named_cwd(args.cwd))
        except StoreUnreadable as exc:
            print(f"heron exec: {exc}", file=sys.stderr)
            return EXIT_ERROR
        if resumed is None:
            if args.session:
                return usage(
                    f"unknown session: {args.session!r} (`heron sessions` lists the stored ones)"
                )
            return usage(f'no stored session in {cwd}; start one with `heron exec "task"`')
        if args.session and args.cwd and not same_folder(resumed.cwd, cwd):
            return usage(
                f"session {resumed.id} belongs to {resumed.cwd}, not {cwd}; leave out --cwd"
            )
        cwd = Path(resumed.cwd)  # the folder the session knows, as it was stored
        if not cwd.is_dir():
            return usage(f"the folder of session {resumed.id} is gone: {cwd}")
    agent = [sys.executable, "-m", "agent"]
    for name in AGENT_FLAGS:
        value = getattr(args, name)
        if value is not None and name != "mode":  # the mode goes in _meta: this run only
            agent += [f"--{name.replace('_', '-')}", str(value)]
    run = Exec(agent, cwd, prompt, args.json)
    run.mode = settings.mode
    run.trust = args.trust
    run.resumed = resumed
    return run.run()


def named_cwd(given: str | None) -> Path:
    """The folder as the user names it, symlinks kept: an editor may have stored a session
    under that name rather than the resolved one. The shell's $PWD when it is the current
    directory (os.getcwd() has the symlinks resolved)."""
    if given:
        return Path(given).expanduser()
    pwd = os.environ.get("PWD")
    with contextlib.suppress(OSError):
        if pwd and os.path.isabs(pwd) and os.path.samefile(pwd, "."):
            return Path(pwd)
    return Path(os.getcwd())


def _reader_gone(fd: int) -> bool:
    """Whether `fd` is a pipe whose reading end is closed (poll reports an error on it)."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def same_folder(stored: str, cwd: Path) -> bool:
    return bool(set(cwd_forms(Path(stored))) & set(cwd_forms(cwd)))


def usage(message: str) -> int:
    print(f"heron exec: {message}", file=sys.stderr)
    return EXIT_USAGE


class AgentGone(Exception):
    """The agent process ended or closed its stdout."""


class AgentError(Exception):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, message: str, code: Any = None) -> None:
        super().__init__(message)
        self.code = code


class UsageFailure(Exception):
    """The agent refused what the user asked for (a session it does not know): exit 2."""


class _Interrupted(Exception):
    """Ctrl-C while a question waits for the user."""


class Exec:
    def __init__(self, agent: list[str], cwd: Path, prompt: str, json_mode: bool) -> None:
        self.agent = agent
        self.cwd = cwd
        self.prompt = prompt
        self.json_mode = json_mode
        self.trace = Trace()
        self.terminal = Terminal.open()
        self.proc: subprocess.Popen[bytes] | None = None
        self.mode: str | None = None  # this run's permission mode, for a resumed session
        self.trust = False  # --trust: the folder is trusted for this run
        self.resumed: SessionRow | None = None  # the stored session to continue, if any
        self.session_id: str | None = None
        self.next_id = 0
        self.interrupted = False
        self.asking = False  # a permission question waits for the user
        self.writing = False  # a message is being written to the agent
        self.cancel_due = False  # Ctrl-C came in mid-write: cancel right after it
        self.stdout_gone = False

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> int:
        self.proc = subprocess.Popen(
            self.agent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=self.cwd,
            # Its own session: the terminal's Ctrl-C reaches only us, and we cancel cleanly.
            start_new_session=True,
        )
        signal.signal(signal.SIGINT, self.on_interrupt)
        try:
            code = self.converse()
            return EXIT_PIPE_CLOSED if self.stdout_gone else code
        except BrokenPipeError:
            self.output_gone()
            return EXIT_PIPE_CLOSED
        except AgentGone:
            code = self.proc.wait()
            self.trace.error(f"the agent stopped unexpectedly (exit code {code})")
            return EXIT_ERROR
        except AgentError as exc:
            self.trace.finish()
            self.report_error(str(exc))
            return EXIT_ERROR
        except UsageFailure as exc:
            self.report_error(str(exc))
            return EXIT_USAGE
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the wind-down is not interruptible
            self.shut_down()

    def converse(self) -> int:
        self.request(
            "initialize",
            {
                "protocolVersion": 1,
                # Files and commands are handled by the agent itself, on this machine.
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                "clientInfo": {"name": "heron-exec", "version": "1"},
            },
        )
        self.open_session()
        if self.interrupted:
            return self.stopped("cancelled")
        blocks = [{"type": "text", "text": self.prompt}]
        result = self.request("session/prompt", {"sessionId": self.session_id, "prompt": blocks})
        return self.stopped(result.get("stopReason"))

    def open_session(self) -> None:
        if self.resumed is None:
            session = self.request(
                "session/new", {"cwd": str(self.cwd), "mcpServers": [], **self.run_meta()}
            )
            self.session_id = session["sessionId"]
            self.trace.info(f"session {self.session_id}")
            self.note_trust(session)
            return
        params: dict[str, Any] = {
            "sessionId": self.resumed.id,
            "cwd": str(self.cwd),
            "mcpServers": [],
            **self.run_meta(),
        }
        try:
            self.note_trust(self.request("session/resume", params))
        except AgentError as exc:
            if exc.code == INVALID_PARAMS:  # e.g. deleted since we looked it up
                raise UsageFailure(str(exc)) from exc
            raise
        self.session_id = self.resumed.id
        title = f": {self.resumed.title}" if self.resumed.title else ""
        self.trace.info(f"continuing session {self.session_id}{title}")

    def run_meta(self) -> dict[str, Any]:
        """This run's mode, not the stored one, and not saved (see the module docstring); and
        its trust: `--trust` trusts the folder for this run, else nobody is asked (the
        decision remembered for the folder counts; an undecided folder stays inert)."""
        # Nobody answers the model's questions here (agent.questions): it decides by itself.
        meta = {"mode": self.mode, "askUser": False, "trust": self.trust}
        return {"_meta": {"heron": meta}}

    def note_trust(self, answer: dict[str, Any]) -> None:
        """One line on stderr when the folder's own commands, skills or git settings are
        left out because it is not trusted."""
        meta = answer.get("_meta")
        trust = meta.get("workspace_trust") if isinstance(meta, dict) else None
        if not isinstance(trust, dict) or trust.get("status") != "untrusted":
            return
        details = trust.get("details")
        ignored = details.get("ignoredFiles") if isinstance(details, dict) else None
        if not isinstance(details, dict) or not ignored:
            return
        shown = ", ".join(str(f) for f in ignored[:3]) + (", …" if len(ignored) > 3 else "")
        self.trace.note(
            f"{details.get('repoRoot') or self.cwd} is not trusted: not using {shown} "
            "(--trust uses them for this run; /trust in an editor remembers)"
        )

    def stopped(self, reason: str | None) -> int:
        self.trace.finish()
        if self.json_mode:
            self.emit_json({"stopReason": reason, "sessionId": self.session_id})
        if reason == "end_turn":
            return EXIT_OK
        if reason == "cancelled":
            if not self.stdout_gone:  # ended by the reader leaving: nothing to say
                self.trace.note("interrupted")
            return EXIT_INTERRUPTED
        self.trace.note(f"stopped: {STOPPED.get(str(reason), f'stop reason {reason}')}")
        return EXIT_STOPPED

    def report_error(self, message: str) -> None:
        if self.json_mode:
            failure: dict[str, Any] = {"error": {"message": message}}
            if self.session_id is not None:
                failure["sessionId"] = self.session_id
            self.emit_json(failure)
        self.trace.error(message)

    def shut_down(self) -> None:
        """Close the agent's stdin: it ends what still runs (commands included) and exits."""
        assert self.proc is not None
        self.close_agent_input()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.terminal:
            self.terminal.close()

    def close_agent_input(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()

    # -- Ctrl-C ------------------------------------------------------------------------------

    def on_interrupt(self, signum: int, frame: Any) -> None:
        if self.interrupted or self.session_id is None:
            # A second Ctrl-C (or one before the turn started): leave at once. The agent sees
            # its stdin close and stops whatever still runs.
            # os.write, not sys.stderr: the main thread may be inside a write to it right now.
            os.write(2, b"\nheron: interrupted\n")
            assert self.proc is not None and self.proc.stdin is not None
            with contextlib.suppress(OSError, ValueError):
                os.close(self.proc.stdin.fileno())
            os._exit(EXIT_INTERRUPTED)
        self.interrupted = True
        if self.asking:
            raise _Interrupted
        os.write(2, "\ninterrupting… (Ctrl-C again to quit at once)\n".encode())
        if self.writing:
            self.cancel_due = True
        else:
            self.send_cancel()

    def send_cancel(self) -> None:
        self.notify("session/cancel", {"sessionId": self.session_id})

    # -- JSON-RPC ----------------------------------------------------------------------------

    def request(self, method: str, params: dict[str, Any]) -> Any:
        request_id = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if "method" in message:
                self.on_agent_message(message)
            elif message.get("id") == request_id:
                if "error" in message:
                    error = message.get("error") or {}
                    raise AgentError(str(error.get("message") or error), error.get("code"))
                return message.get("result") or {}

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        data = json.dumps(message, ensure_ascii=False).encode() + b"\n"
        self.writing = True
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise AgentGone from exc
        finally:
            self.writing = False
        if self.cancel_due:
            self.cancel_due = False
            self.send_cancel()

    def receive(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AgentGone
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not ours to judge here; the agent's tests check its output
            if isinstance(message, dict):
                return message

    def on_agent_message(self, message: dict[str, Any]) -> None:
        method, params = message["method"], message.get("params") or {}
        if "id" not in message:
            if method == "session/update":
                self.on_update(params)
            return
        if method == "session/request_permission":
            result: dict[str, Any] = {"outcome": self.on_permission(params)}
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            self.send({"jsonrpc": "2.0", "id": message["id"], "error": error})

    # -- output ------------------------------------------------------------------------------

    def on_update(self, params: dict[str, Any]) -> None:
        if self.json_mode:
            self.emit_json(params)
        else:
            self.guard_stdout(self.trace.update, params.get("update") or {})

    def emit_json(self, value: Any) -> None:
        def write(value: Any) -> None:
            sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
            sys.stdout.flush()

        self.guard_stdout(write, value)

    def guard_stdout(self, write: Any, value: Any) -> None:
        """Whoever read our stdout is gone (`| head`): stop the turn rather than work unseen."""
        if self.stdout_gone:
            return
        try:
            write(value)
        except BrokenPipeError:
            self.output_gone()
            if not self.interrupted:
                self.interrupted = True
                self.send_cancel()

    def output_gone(self) -> None:
        """Stdout (or stderr) lost its reader: what is still written to either goes nowhere,
        quietly, rather than as a BrokenPipeError at every write and at exit."""
        self.stdout_gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                if _reader_gone(stream.fileno()):
                    os.dup2(devnull, stream.fileno())
        os.close(devnull)

    # -- permission questions ----------------------------------------------------------------

    def on_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.terminal is None or self.interrupted:
            return self.refuse(params)
        self.trace.finish()
        self.asking = True
        try:
            option = self.terminal.ask_permission(params)
        except _Interrupted:
            self.terminal.say()
            self.send_cancel()
            return {"outcome": "cancelled"}
        finally:
            self.asking = False
        if option is None:
            return self.reject(params)
        return {"outcome": "selected", "optionId": option}

    def refuse(self, params: dict[str, Any]) -> dict[str, Any]:
        """No one to ask: the answer is no, and the trace says what would have allowed it."""
        call = params.get("toolCall") or {}
        call_id = str(call.get("toolCallId"))
        self.trace.quiet.add(call_id)
        if not self.interrupted:
            self.trace.note(
                f"✗ refused {call.get('title')!s}: no terminal to ask for permission; "
                f"{self.allowing_flag(call)} would allow it"
            )
        return self.reject(params)

    def reject(self, params: dict[str, Any]) -> dict[str, Any]:
        options = params.get("options") or []
        option = next((o for o in options if o.get("kind") == "reject_once"), None)
        if option is None:
            return {"outcome": "cancelled"}
        return {"outcome": "selected", "optionId": option["optionId"]}

    def allowing_flag(self, call: dict[str, Any]) -> str:
        """The narrowest flag that would run `call` unasked: the sandboxed mode before full
        access, for a command that may run in the sandbox."""
        paths = [loc.get("path") for loc in call.get("locations") or [] if isinstance(loc, dict)]
        inside = all(isinstance(p, str) and Path(p).is_relative_to(self.cwd) for p in paths)
        if call.get("kind") in ("edit", "delete", "move") and inside:
            return "--mode accept-edits (or --yes)"
        raw = call.get("rawInput")
        sandboxable = not isinstance(raw, dict) or raw.get("sandbox") is not False
        if call.get("kind") == "execute" and inside and sandboxable and sandbox_available():
            return "--mode auto (sandboxed) or --yes (full access)"
        return "--yes (full access)"
