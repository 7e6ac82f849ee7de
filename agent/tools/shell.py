"""`bash`: run a shell command, in the editor's terminal when it offers one, else locally.

With the client's `terminal` capability the command runs in a terminal the editor creates and
embeds live in the tool call (ACP-NOTES §26); we only wait, read the final output and always
release it. Otherwise it runs here in its own process group, tracked by `agent.processes.tree`, so a
timeout, a cancelled turn or the command's end stops the shell together with everything it
started (background jobs, `setsid`, `nohup` included); a cancelled turn answers at once and the
SIGKILL for what ignores SIGTERM follows in the background. Its output is streamed back with
bounded memory: the first and last kilobytes are kept, the middle is counted and dropped.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import re
import signal
import subprocess
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import Process
from pydantic import BaseModel, Field

from agent.acp.protocol import (
    ContentItem,
    CreateTerminalParams,
    CreateTerminalResult,
    EnvVariable,
    TerminalExitStatus,
    TerminalItem,
    TerminalOutputResult,
    TerminalParams,
    ToolCallContent,
)
from agent.acp.wire import RpcError
from agent.errors import EditorRefused
from agent.files.workspace import program_outside
from agent.processes.env import command_env, withheld
from agent.processes.tree import CommandTree, forget, open_process
from agent.sandbox import Sandbox, blocked_for_user, blocked_hint, changed_note
from agent.sandbox.zygote import ConfinedProcess, ZygoteError, reapers_available
from agent.tools.base import (
    Preview,
    Progress,
    Safety,
    Tool,
    ToolContext,
    ToolError,
    ToolEvent,
    ToolResult,
)
from agent.tools.command_discards import command_discards
from agent.tools.command_keys import command_keys

log = logging.getLogger(__name__)

HEAD_BYTES = 32 * 1024  # kept from the start of the output (what the command set out to do)
TAIL_BYTES = 64 * 1024  # kept from the end (where errors and summaries are)
PROGRESS_INTERVAL = 0.1  # seconds between streamed output updates
POLL_INTERVAL = 0.1  # how often a quiet command is checked on
ORPHAN_GRACE = 1.0  # after the shell exits, how long background children may hold the output
CLIENT_OUTPUT_LIMIT = 1024 * 1024  # outputByteLimit asked of the editor's terminal
CLIENT_CLEANUP_TIMEOUT = 5.0  # an editor that does not answer kill/release must not hang us
PROBE_TIMEOUT = 60.0  # the sandbox check in the editor's terminal (two Python starts)
SUMMARY_LINES = 10  # a failed command's last lines, shown beside its status
SUMMARY_CHARS = 2000

# Pagers and prompts would wait forever on a terminal nobody types into.
QUIET_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}


class BashArgs(BaseModel):
    command: str = Field(description="The shell command to run (bash -c).")
    cwd: str | None = Field(
        default=None, description="Working directory; relative to the session root. Default: root."
    )
    timeout: float = Field(
        default=120, gt=0, le=600, description="Seconds before the command is stopped (max 600)."
    )
    sandbox: bool = Field(
        default=True,
        description="In auto mode, run in the sandbox (default). false: ask the user to run it "
        "outside the sandbox; say why in your message.",
    )


class Bash(Tool[BashArgs]):
    name = "bash"
    description = (
        "Run a shell command with bash and return its exit code and combined stdout/stderr. "
        "Runs non-interactively (stdin is empty) in the session root unless `cwd` is given; "
        "the command is stopped after `timeout` seconds. Very long output is shortened to its "
        "beginning and end. Prefer the file tools for reading and editing files. In auto mode "
        "commands run in a sandbox: they may write only the workspace (not .git/ or .heron/) "
        "and $TMPDIR, not read the home folder outside the workspace, and have no network; "
        "git commands that write the repository (commit, checkout, fetch) fail there. A "
        'command that needs more fails ("Permission denied", "Read-only file system"); then '
        'call again with "sandbox": false and give the reason in your message: the user is '
        "asked to run it outside the sandbox."
    )
    kind = "execute"
    Args = BashArgs
    default_safety = Safety.DESTRUCTIVE

    def paths(self, args: BashArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.cwd)] if args.cwd else []

    def permission_keys(self, args: BashArgs) -> list[str]:
        return command_keys(args.command)

    def sandboxed(self, args: BashArgs) -> bool:
        return args.sandbox

    def runs_programs(self, args: BashArgs) -> bool:
        return True

    def discards_work(self, args: BashArgs, ctx: ToolContext) -> bool:
        return command_discards(args.command, _cwd(args, ctx)) is not None

    def workspace_keys(self, args: BashArgs, ctx: ToolContext, roots: list[Path]) -> list[str]:
        # A remembered program reading outside the workspace (`cat /x/id_rsa`) asks again.
        return command_keys(args.command, _cwd(args, ctx), roots)

    async def describe(self, args: BashArgs, ctx: ToolContext) -> Preview:
        shown = _one_line(args.command, 80)
        # The user approves what they see: a command the title shortens or flattens is shown
        # whole (`ls\nrm -rf x` must not read as `ls rm -rf x`).
        whole: list[ToolCallContent] = (
            [] if shown == args.command.strip() else [ContentItem.of(_fenced(args.command))]
        )
        outside = not args.sandbox and ctx.sandbox is not None and ctx.sandbox.confining()
        where = _folder(args, ctx) + (" outside the sandbox" if outside else "")
        discards = command_discards(args.command, _cwd(args, ctx))
        where += f" ({discards})" if discards else ""
        return Preview(title=f"Run {_code_span(shown)}{where}", content=whole)

    async def execute(
        self, args: BashArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        cwd = _cwd(args, ctx)
        if not cwd.is_dir():
            raise ToolError(f"working directory does not exist: {cwd}")
        run = _run_in_client_terminal if ctx.client_terminal else _run_locally
        sandbox = ctx.sandbox if args.sandbox and ctx.sandbox and ctx.sandbox.confining() else None
        watched = sandbox.watch() if sandbox else None
        extra = await ctx.command_env(cwd) if ctx.command_env else {}
        # aclosing: if our consumer stops early, the runner's cleanup still runs right away.
        async with aclosing(run(args, ctx, cwd, sandbox, extra)) as events:
            async for event in events:
                if sandbox and watched and isinstance(event, ToolResult):
                    code = event.raw_output.get("exitCode") if event.raw_output else None
                    if hint := blocked_hint(event.output, code):
                        event.output += hint
                        shown = blocked_for_user(event.output)
                        event.content = [*(event.content or []), ContentItem.of(shown)]
                    if changed := sandbox.changed(watched):  # what the sandbox did not stop
                        # Until the user has seen them, "always" answers for commands that
                        # run outside the sandbox are suspended (agent.permissions.policy).
                        ctx.sandbox_changes += [p for p in changed if p not in ctx.sandbox_changes]
                        warning = changed_note(changed)
                        event.output += warning
                        event.content = [*(event.content or []), ContentItem.of(warning)]
                yield event


def _cwd(args: BashArgs, ctx: ToolContext) -> Path:
    return ctx.resolve(args.cwd) if args.cwd else ctx.cwd


def _folder(args: BashArgs, ctx: ToolContext) -> str:
    """` in /other/dir` for a command given a `cwd` other than the session's, and where it
    really leads when a symlink is on the way (` in /w/link (→ /home/me)`)."""
    cwd = _cwd(args, ctx)
    if cwd == ctx.cwd:
        return ""
    real = os.path.realpath(cwd)
    return f" in {_path_text(str(cwd))}" + (f" (→ {_path_text(real)})" if real != str(cwd) else "")


def _path_text(path: str) -> str:
    """A path as one line a reader cannot misread: quoted when it has blanks or controls."""
    plain = path.isprintable() and not any(c.isspace() or c in '`"' for c in path)
    return path if plain else json.dumps(path, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Running in the editor's terminal


def _client_env(ctx: ToolContext, sandbox: Sandbox | None) -> dict[str, str]:
    """What the editor's terminal adds to its own environment: the quiet settings (and the
    sandbox's TMPDIR), and the credentials Heron withholds blanked (the editor may have
    started Heron with them)."""
    hidden = withheld(ctx.settings, sandboxed=sandbox is not None)
    return {**dict.fromkeys(hidden, ""), **_extra_env(sandbox)}


async def _run_in_client_terminal(
    args: BashArgs, ctx: ToolContext, cwd: Path, sandbox: Sandbox | None, extra: dict[str, str]
) -> AsyncGenerator[ToolEvent, None]:
    if sandbox is not None:
        if not await _terminal_confines(ctx, sandbox, cwd):
            # This client runs terminals without the environment Heron gives: the command
            # runs here, confined the same, its output in the tool call instead.
            async with aclosing(_run_locally(args, ctx, cwd, sandbox, extra)) as events:
                async for event in events:
                    yield event
            return
        # The editor shows `bash -c COMMAND`; the environment makes it run confined.
        command, argv, env = sandbox.terminal(args.command, _shell(ctx))
    else:
        command, argv, env = _shell(ctx), ["-c", args.command], {}
    terminal_id = await _create_terminal(ctx, sandbox, command, argv, {**extra, **env}, cwd)
    ids = TerminalParams(session_id=ctx.session_id, terminal_id=terminal_id).dump()
    embed: list[ToolCallContent] = [TerminalItem(terminal_id=terminal_id)]

    status: TerminalExitStatus | None = None
    running = True  # the command may still run: kill it before releasing
    timed_out = False
    try:
        await anyio.lowlevel.checkpoint()  # a cancel that came during create lands here
        yield Progress(content=embed)  # the editor shows the live terminal from here on
        with anyio.move_on_after(args.timeout):
            exited = await ctx.client_request("terminal/wait_for_exit", ids)
            status = TerminalExitStatus.model_validate(exited or {})
            running = False
        if running:
            timed_out = True
            with anyio.CancelScope(shield=True):
                await _quietly(ctx, "terminal/kill", ids)
            running = False
        output = TerminalOutputResult.model_validate(
            await ctx.client_request("terminal/output", ids)
        )
    except RpcError as exc:
        raise EditorRefused("report how the command ended", exc.reason) from None
    finally:
        with anyio.CancelScope(shield=True):
            if running:
                await _quietly(ctx, "terminal/kill", ids)
            await _quietly(ctx, "terminal/release", ids)

    status = status or output.exit_status or TerminalExitStatus()
    buffer = OutputBuffer()
    buffer.add(output.output.encode())
    text = buffer.render(*_model_budget(ctx)) or "(no output)"
    if output.truncated:
        text = f"[the terminal kept only the end of the output]\n{text}"
    # The output again, as the model read it: clients that do not render terminals (they
    # see only the terminal id) show this instead.
    raw: dict[str, Any] = {
        "exitCode": status.exit_code,
        "signal": status.signal,
        "truncated": output.truncated,
        "output": text,
    }
    if timed_out:
        raw["timedOut"] = True
    head = _status_line(status.exit_code, status.signal, args.timeout, timed_out)
    # A status the editor did not say (neither code nor signal) is not taken for a failure.
    failed = timed_out or status.signal is not None or status.exit_code not in (0, None)
    # The terminal (now final) stays on screen; a failure adds its status and last lines for
    # clients that do not render terminals (they would show nothing of it).
    summary = [ContentItem.of(f"{head}\n{_fenced(_last_lines(text))}")] if failed else []
    yield ToolResult(
        ok=not failed, output=f"{head}\n{text}", content=[*embed, *summary], raw_output=raw
    )


async def _create_terminal(
    ctx: ToolContext,
    sandbox: Sandbox | None,
    command: str,
    args: list[str],
    env: dict[str, str],
    cwd: Path,
) -> str:
    """A terminal of the editor's running `command args`; returns its id."""
    env = {**_client_env(ctx, sandbox), **env}
    create = CreateTerminalParams(
        session_id=ctx.session_id,
        command=command,
        args=args,
        env=[EnvVariable(name=k, value=v) for k, v in env.items()],
        cwd=str(cwd),
        output_byte_limit=CLIENT_OUTPUT_LIMIT,
    )
    # Shielded: a terminal created after we stopped listening would never be released.
    with anyio.CancelScope(shield=True), anyio.move_on_after(30) as waited:
        try:
            created = await ctx.client_request("terminal/create", create.dump())
        except RpcError as exc:
            raise EditorRefused("run the command", exc.reason) from None
    if waited.cancelled_caught:
        raise ToolError("the editor did not create a terminal within 30 s")
    return CreateTerminalResult.model_validate(created).terminal_id


async def _terminal_confines(ctx: ToolContext, sandbox: Sandbox, cwd: Path) -> bool:
    """Whether this client's terminals run the sandbox as asked (agent.sandbox.terminal):
    checked once a session, with a terminal no tool call shows."""
    if sandbox.terminal_checked is None and not _shell(ctx).endswith("/bash"):
        sandbox.terminal_checked = False  # the environment travels through bash's BASH_ENV
    if sandbox.terminal_checked is None:
        command, args, env = sandbox.terminal_probe(_shell(ctx))
        code = None
        terminal_id = await _create_terminal(ctx, sandbox, command, args, env, cwd)
        ids = TerminalParams(session_id=ctx.session_id, terminal_id=terminal_id).dump()
        try:
            with anyio.move_on_after(PROBE_TIMEOUT):
                exited = await ctx.client_request("terminal/wait_for_exit", ids)
                code = TerminalExitStatus.model_validate(exited or {}).exit_code
        finally:
            with anyio.CancelScope(shield=True):
                await _quietly(ctx, "terminal/kill", ids)
                await _quietly(ctx, "terminal/release", ids)
        sandbox.terminal_checked = code == 0
        if code != 0:
            log.warning(
                "the editor's terminal did not run the sandbox check as asked (exit %s): "
                "sandboxed commands of this session run without the editor's terminal",
                code,
            )
    return sandbox.terminal_checked


async def _quietly(ctx: ToolContext, method: str, params: dict[str, Any]) -> None:
    """Best-effort cleanup: a failure here must not hide the command's result."""
    with anyio.move_on_after(CLIENT_CLEANUP_TIMEOUT):
        try:
            await ctx.client_request(method, params)
        except Exception as exc:
            log.debug("%s failed: %s", method, exc)


# ---------------------------------------------------------------------------------------------
# Running locally


async def _run_locally(
    args: BashArgs, ctx: ToolContext, cwd: Path, sandbox: Sandbox | None, extra: dict[str, str]
) -> AsyncGenerator[ToolEvent, None]:
    buffer = OutputBuffer()
    tree = CommandTree()
    argv = [_shell(ctx), "-c", args.command]
    env = {
        **command_env(ctx.settings, sandboxed=sandbox is not None),
        **_extra_env(sandbox),
        **extra,
        "TERM": "dumb",
        **tree.env,
    }
    proc: Process | ConfinedProcess
    starter = sandbox or (ctx.sandbox if reapers_available() else None)
    if starter is not None:
        # Started by a zygote of the session (confined in auto mode), below a reaper of its
        # own: whatever it leaves behind stays in its tree (agent.processes.tree).
        try:
            proc = await starter.spawn(argv, env, cwd, confined=sandbox is not None)
        except BaseException as exc:
            tree.stop_in_background()  # by its marker: whatever started before it failed
            if isinstance(exc, ZygoteError):
                raise ToolError(str(exc)) from exc
            raise
    else:
        proc = await start_unconfined(argv, env, cwd)
    tree.attach(proc.pid, getattr(proc, "reaper", None))

    async def close() -> None:
        with anyio.move_on_after(5):
            await proc.aclose()
        forget(proc.pid)

    assert proc.stdout is not None
    deadline = anyio.current_time() + args.timeout
    timed_out = orphans = False
    settled = False  # the shell exited and its output ended
    try:
        eof = dirty = False
        shown_at = exited_at = None
        while not eof:
            now = anyio.current_time()
            if now >= deadline:
                timed_out = True
                break
            if _ended(proc):
                # The shell is gone but a background child still holds its output open.
                if exited_at is None:
                    exited_at = now
                if now - exited_at >= ORPHAN_GRACE:
                    orphans = True
                    break
            # Waking up now and then lets a quiet command's last lines reach the editor.
            with anyio.move_on_after(min(POLL_INTERVAL, deadline - now)):
                try:
                    buffer.add(await proc.stdout.receive())
                    dirty = True
                except anyio.EndOfStream:
                    eof = True
            now = anyio.current_time()
            if dirty and not eof and (shown_at is None or now - shown_at >= PROGRESS_INTERVAL):
                shown_at, dirty = now, False
                yield Progress(content=[ContentItem.of(_fenced(buffer.render()))])
        if eof:
            # Output ended; the shell may still run (it closed its stdout).
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await proc.wait()
            timed_out = not _ended(proc)
            settled = not timed_out
    except BaseException:
        # Cancelled (or failed): answer now; SIGKILL for what ignores SIGTERM comes later.
        tree.stop_in_background(then=close)
        raise
    with anyio.CancelScope(shield=True):
        if settled and sandbox is None:
            # Background jobs the command left behind (`cmd &`, `setsid`, `nohup`) go too.
            leftovers = tree.stop_in_background()
        elif settled:
            # Gone before the result: what the sandbox watches must not change after it.
            leftovers = await tree.stop()
        else:
            leftovers = 0
            await tree.stop()
        await close()

    code, sig = _split_returncode(proc.returncode)
    text = buffer.render(*_model_budget(ctx)) or "(no output)"
    head = _status_line(code, sig, args.timeout, timed_out)
    if isinstance(proc, ConfinedProcess) and proc.lost:
        head += "\n(the sandbox's command starter stopped: the exit status is unknown)"
    if orphans:
        head += "\n(background processes kept the output open after the shell exited; stopped)"
    elif leftovers:
        head += f"\n(stopped {leftovers} background process(es) the command left running)"
    raw: dict[str, Any] = {"exitCode": code}
    if sig:
        raw["signal"] = sig
    if timed_out:
        raw["timedOut"] = True
    raw["output"] = text  # as in the editor's terminal path: what the model read
    shown = ContentItem.of(_fenced(buffer.render()))
    failed = timed_out or code != 0  # a signal, or a status the zygote lost, included
    yield ToolResult(
        ok=not failed,
        output=f"{head}\n{text}",
        # A failure leads with its status, so a client that shows only the first lines of a
        # call shows it; the output's last lines end the block below.
        content=[ContentItem.of(head), shown] if failed else [shown],
        raw_output=raw,
    )


def _shell(ctx: ToolContext) -> str:
    """bash by its full path, found on PATH outside the workspace (a `bash` a sandboxed command
    planted in an activated venv must not be what runs the next command), else /bin/sh."""
    return program_outside("bash", ctx.roots) or "/bin/sh"


def _extra_env(sandbox: Sandbox | None) -> dict[str, str]:
    """Quiet pagers and prompts; sandboxed, the session's private TMPDIR."""
    return {**QUIET_ENV, **sandbox.env()} if sandbox else QUIET_ENV


def _ended(proc: Process | ConfinedProcess) -> bool:
    """The shell exited (a zygote that died under it: as good as, its status is lost)."""
    return proc.returncode is not None or (isinstance(proc, ConfinedProcess) and proc.lost)


def _split_returncode(returncode: int | None) -> tuple[int | None, str | None]:
    if returncode is None or returncode >= 0:
        return returncode, None
    try:
        return None, signal.Signals(-returncode).name
    except ValueError:
        return None, f"signal {-returncode}"


# ---------------------------------------------------------------------------------------------
# Output


class OutputBuffer:
    """The first `head` and last `tail` bytes of an output of any size, and how many were not.

    Bytes, not text: the count stays exact and memory flat. Text is decoded when shown, with
    the cut points moved to character boundaries so no multi-byte character is split.
    """

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]  # cheap: bytearray drops from the front in place

    @property
    def retained(self) -> int:
        return len(self._head) + len(self._tail)

    def render(self, head: int | None = None, tail: int | None = None) -> str:
        """The output as text; with `head`/`tail`, at most that many bytes from each end."""
        head = self._head_limit if head is None else head
        tail = self._tail_limit if tail is None else tail
        if self.total == self.retained:  # nothing dropped yet: head and tail are contiguous
            data = bytes(self._head + self._tail)
            if len(data) <= head + tail:
                return _decode(data)
            start, end = data[:head], data[len(data) - tail :]
        else:
            start, end = bytes(self._head[:head]), bytes(self._tail[len(self._tail) - tail :])
        # Not final: an incomplete character at the cut is held back instead of mangled.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(start)
        held = len(decoder.getstate()[0])
        skip = 0
        while skip < min(3, len(end)) and end[skip] & 0xC0 == 0x80:
            skip += 1  # continuation bytes of a character whose start was dropped
        omitted = self.total - len(start) - len(end) + held + skip
        return f"{text}\n… {omitted:,} bytes omitted …\n{_decode(end[skip:])}"


def _decode(data: bytes) -> str:
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final=True)


def _model_budget(ctx: ToolContext) -> tuple[int, int]:
    """Head and tail sizes that fit what the loop lets the model read, so the tail survives."""
    budget = max(1000, ctx.output_chars - 200)  # room for the status line and the omission note
    return min(HEAD_BYTES, budget // 3), min(TAIL_BYTES, budget - budget // 3)


def _status_line(code: int | None, sig: str | None, timeout: float, timed_out: bool) -> str:
    if timed_out:
        return f"Timed out after {timeout:g} s; the command was stopped. Output so far:"
    if code is not None:
        return f"Exit code {code}"
    if sig:
        return f"Killed by {sig}"
    return "Exit status unknown"


def _last_lines(text: str, lines: int = SUMMARY_LINES, chars: int = SUMMARY_CHARS) -> str:
    """The end of a command's output, as a failure's summary shows it."""
    tail = text.rstrip("\n").split("\n")[-lines:]
    kept = "\n".join(line if len(line) <= chars else line[: chars - 1] + "…" for line in tail)
    return kept if len(kept) <= chars else "…" + kept[-(chars - 1) :]


def _fenced(text: str) -> str:
    if not text:
        return "(no output)"
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text.rstrip("\n")
    return f"{fence}\n{body}\n{fence}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _code_span(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


async def start_unconfined(argv: list[str], env: dict[str, str], cwd: Path | str) -> Any:
    """A command outside the sandbox: output and errors on one pipe, no input, and its own
    session, so one killpg reaches most of what it starts."""
    return await open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
