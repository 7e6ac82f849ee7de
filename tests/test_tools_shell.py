"""The `bash` tool: local runs (streaming, timeouts, cancellation, huge output), the client
terminal path against a fake editor, and the permission keys."""

from __future__ import annotations

import os
import random
import subprocess
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.acp.protocol import ContentItem, TerminalItem
from agent.tools.base import Progress, Safety, ToolContext, ToolError, ToolResult
from agent.tools.shell import Bash, OutputBuffer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _no_client(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"unexpected client request {method}")


def make_ctx(cwd: Path, client_request: Any = _no_client, terminal: bool = False) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        session_id="sess-1",
        files=None,  # type: ignore[arg-type]
        client_request=client_request,
        client_terminal=terminal,
    )


async def run(ctx: ToolContext, **raw: Any) -> tuple[list[Progress], ToolResult]:
    tool = Bash()
    args = tool.parse_args(raw)
    preview = await tool.describe(args, ctx)
    progress: list[Progress] = []
    async with aclosing(tool.execute(args, ctx, preview)) as events:
        async for event in events:
            if isinstance(event, ToolResult):
                return progress, event
            assert isinstance(event, Progress)
            progress.append(event)
    raise AssertionError("no ToolResult")


def text_of(progress: Progress) -> str:
    assert progress.content
    item = progress.content[0]
    assert isinstance(item, ContentItem)
    return item.content.text


def unique_sleep() -> tuple[str, str]:
    """A `sleep` invocation pgrep can find, and the pattern that finds it."""
    n = random.randrange(10**6, 10**7)
    return f"sleep 100.{n}", rf"sleep 100\.{n}"


def survivors(pattern: str) -> str:
    found = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
    return found.stdout.strip()


async def gone(pattern: str, within: float = 30.0) -> bool:
    with anyio.move_on_after(within):
        while survivors(pattern):
            await anyio.sleep(0.05)
        return True
    return False


# ---------------------------------------------------------------------------------------------
# Local runs


@pytest.mark.anyio
async def test_streams_progress_and_returns_exit_code(tmp_path: Path) -> None:
    progress, result = await run(
        make_ctx(tmp_path), command="echo one; sleep 0.4; echo two >&2; exit 3"
    )
    assert any("one" in text_of(p) and "two" not in text_of(p) for p in progress)
    assert not result.ok  # a non-zero exit fails the call; the model reads the whole result
    assert result.output.startswith("Exit code 3\n")
    assert "one" in result.output and "two" in result.output  # stderr is merged
    assert result.raw_output == {"exitCode": 3, "output": result.output.split("\n", 1)[1]}
    # The user's view leads with the status; the output follows.
    assert [c.content.text for c in result.content or []] == [  # type: ignore[union-attr]
        "Exit code 3",
        "```\none\ntwo\n```",
    ]


@pytest.mark.anyio
async def test_cwd_env_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    _, result = await run(make_ctx(tmp_path), command='pwd; echo "pager=$PAGER"; cat', cwd="sub")
    assert result.output == f"Exit code 0\n{tmp_path / 'sub'}\npager=cat\n"
    _, empty = await run(make_ctx(tmp_path), command="true")
    assert empty.output == "Exit code 0\n(no output)"
    with pytest.raises(ToolError, match="does not exist"):
        await run(make_ctx(tmp_path), command="true", cwd="missing")


@pytest.mark.anyio
async def test_killed_by_signal(tmp_path: Path) -> None:
    _, result = await run(make_ctx(tmp_path), command="kill -TERM $$")
    assert not result.ok
    assert result.output.startswith("Killed by SIGTERM")
    assert result.raw_output == {"exitCode": None, "signal": "SIGTERM", "output": "(no output)"}


@pytest.mark.anyio
async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    sleep, pattern = unique_sleep()
    started = time.monotonic()
    _, result = await run(
        make_ctx(tmp_path), command=f"echo started; {sleep} & {sleep}; wait", timeout=1
    )
    assert time.monotonic() - started < 50  # not the 100 s sleeps
    assert not result.ok
    assert result.output.startswith("Timed out after 1 s")
    assert "started" in result.output
    assert result.raw_output["timedOut"] is True
    assert await gone(pattern), survivors(pattern)


@pytest.mark.anyio
async def test_processes_ignoring_sigterm_get_sigkill(tmp_path: Path) -> None:
    sleep, pattern = unique_sleep()
    _, result = await run(
        make_ctx(tmp_path), command=f"trap '' TERM; {sleep} & {sleep}; wait", timeout=0.5
    )
    assert not result.ok and result.raw_output["signal"] == "SIGKILL"
    assert await gone(pattern), survivors(pattern)


@pytest.mark.anyio
async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    sleep, pattern = unique_sleep()
    tool = Bash()
    args = tool.parse_args({"command": f"echo started; {sleep} & {sleep}; wait"})
    ctx = make_ctx(tmp_path)
    preview = await tool.describe(args, ctx)
    seen: list[object] = []
    with anyio.move_on_after(10) as guard, anyio.CancelScope() as scope:
        async with aclosing(tool.execute(args, ctx, preview)) as events:
            async for event in events:
                seen.append(event)
                assert survivors(pattern)  # really running
                scope.cancel()  # the turn was cancelled
    assert not guard.cancelled_caught
    assert scope.cancelled_caught
    assert len(seen) == 1 and isinstance(seen[0], Progress)
    assert await gone(pattern), survivors(pattern)


@pytest.mark.anyio
async def test_background_child_holding_output_is_stopped(tmp_path: Path) -> None:
    sleep, pattern = unique_sleep()
    started = time.monotonic()
    _, result = await run(make_ctx(tmp_path), command=f"{sleep} & echo hi")
    assert time.monotonic() - started < 50  # not the 100 s sleep
    assert result.ok and result.output.startswith("Exit code 0\n")
    assert "hi" in result.output and "background" in result.output
    assert await gone(pattern), survivors(pattern)


@pytest.mark.anyio
async def test_huge_output_keeps_memory_flat(tmp_path: Path) -> None:
    size = 100_000_000
    tool = Bash()
    args = tool.parse_args({"command": f"head -c {size} /dev/zero | tr '\\0' 'a'"})
    ctx = make_ctx(tmp_path)
    result = None
    updates = 0
    async with aclosing(tool.execute(args, ctx, await tool.describe(args, ctx))) as events:
        async for event in events:
            if isinstance(event, ToolResult):
                result = event
            else:
                updates += 1
                assert len(text_of(event)) < 100 * 1024 + 200
    assert result is not None and result.ok
    assert updates >= 1
    assert result.output.startswith("Exit code 0\n")
    assert len(result.output) < 31_000  # fits the default model budget, tail included
    assert "bytes omitted" in result.output and result.output.rstrip().endswith("a")
    shown = result.content[0].content.text  # type: ignore[index, union-attr]
    assert len(shown) < 100 * 1024 + 200
    assert f"{size - 96 * 1024:,} bytes omitted" in shown  # memory: scripts/bench_memory.py


def test_output_buffer_bounds_and_boundaries() -> None:
    buffer = OutputBuffer(head=8, tail=8)
    for _ in range(10_000):
        buffer.add(b"x" * 1000)
    assert buffer.total == 10_000_000 and buffer.retained == 16
    assert buffer.render() == f"xxxxxxxx\n… {10_000_000 - 16:,} bytes omitted …\nxxxxxxxx"
    # Cuts never split a multi-byte character.
    small = OutputBuffer(head=5, tail=5)
    small.add("ééééééééé".encode())  # 18 bytes
    assert small.render() == "éé\n… 10 bytes omitted …\néé"
    short = OutputBuffer()
    short.add("héllo".encode()[:2])
    short.add("héllo".encode()[2:])
    assert short.render() == "héllo"


# ---------------------------------------------------------------------------------------------
# The editor's terminal


class FakeEditor:
    """Answers terminal/* like an editor would and records what it was asked."""

    def __init__(
        self, exit_after: float | None = 0.0, fail: str | None = None, create_delay: float = 0
    ) -> None:
        self.exit_after = exit_after  # None: the command never exits by itself
        self.create_delay = create_delay
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.killed = False

    async def __call__(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        if method == self.fail:
            raise RuntimeError(f"{method} failed")
        if method == "terminal/create":
            await anyio.sleep(self.create_delay)
            return {"terminalId": "term-7"}
        assert params == {"sessionId": "sess-1", "terminalId": "term-7"}
        if method == "terminal/wait_for_exit":
            if self.exit_after is None:
                await anyio.sleep_forever()
            await anyio.sleep(self.exit_after)
            return {"exitCode": 0, "signal": None}
        if method == "terminal/kill":
            self.killed = True
            return {}
        if method == "terminal/output":
            status = {"exitCode": None, "signal": "SIGKILL"} if self.killed else {"exitCode": 0}
            return {"output": "hello\n", "truncated": False, "exitStatus": status}
        if method == "terminal/release":
            return {}
        raise AssertionError(method)

    @property
    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


@pytest.mark.anyio
async def test_client_terminal_success(tmp_path: Path) -> None:
    editor = FakeEditor()
    progress, result = await run(make_ctx(tmp_path, editor, terminal=True), command="echo hello")
    assert editor.methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    create = editor.calls[0][1]
    assert create["sessionId"] == "sess-1"
    assert os.path.basename(create["command"]) in ("bash", "sh")
    assert create["args"] == ["-c", "echo hello"]
    assert create["cwd"] == str(tmp_path)
    assert create["outputByteLimit"] > 0
    assert progress[0].content == [TerminalItem(terminal_id="term-7")]
    assert result.ok
    assert result.content == [TerminalItem(terminal_id="term-7")]
    assert result.output == "Exit code 0\nhello\n"
    assert result.raw_output == {
        "exitCode": 0,
        "signal": None,
        "truncated": False,
        "output": "hello\n",
    }


@pytest.mark.anyio
async def test_client_terminal_timeout_kills_then_releases(tmp_path: Path) -> None:
    editor = FakeEditor(exit_after=None)
    _, result = await run(
        make_ctx(tmp_path, editor, terminal=True), command="sleep 100", timeout=0.2
    )
    assert editor.methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]
    assert not result.ok
    assert result.output.startswith("Timed out after 0.2 s")
    assert "hello" in result.output
    assert result.raw_output["timedOut"] is True
    assert result.raw_output["signal"] == "SIGKILL"


@pytest.mark.anyio
async def test_client_terminal_cancel_kills_then_releases(tmp_path: Path) -> None:
    editor = FakeEditor(exit_after=None)
    tool = Bash()
    args = tool.parse_args({"command": "sleep 100"})
    ctx = make_ctx(tmp_path, editor, terminal=True)
    with anyio.CancelScope() as scope:
        async with aclosing(tool.execute(args, ctx, await tool.describe(args, ctx))) as events:
            async for _ in events:
                scope.cancel()  # at the first event: the tool then waits for the exit, cancelled
    assert scope.cancelled_caught
    assert editor.methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    ]


@pytest.mark.anyio
async def test_client_terminal_cancel_during_create_still_releases(tmp_path: Path) -> None:
    editor = FakeEditor(exit_after=None, create_delay=0.3)
    tool = Bash()
    args = tool.parse_args({"command": "sleep 100"})
    ctx = make_ctx(tmp_path, editor, terminal=True)
    seen: list[object] = []
    with anyio.move_on_after(0.1) as scope:
        async with aclosing(tool.execute(args, ctx, await tool.describe(args, ctx))) as events:
            async for event in events:
                seen.append(event)
    assert scope.cancelled_caught and seen == []
    assert editor.methods == ["terminal/create", "terminal/kill", "terminal/release"]


@pytest.mark.anyio
async def test_client_terminal_closed_early_still_releases(tmp_path: Path) -> None:
    editor = FakeEditor(exit_after=None)
    tool = Bash()
    args = tool.parse_args({"command": "sleep 100"})
    ctx = make_ctx(tmp_path, editor, terminal=True)
    events = tool.execute(args, ctx, await tool.describe(args, ctx))
    assert isinstance(await events.__anext__(), Progress)
    await events.aclose()  # the loop gave up on the call while it was showing the terminal
    assert editor.methods == ["terminal/create", "terminal/kill", "terminal/release"]


@pytest.mark.anyio
async def test_client_terminal_cleanup_failure_does_not_hide_result(tmp_path: Path) -> None:
    editor = FakeEditor(fail="terminal/release")
    _, result = await run(make_ctx(tmp_path, editor, terminal=True), command="echo hello")
    assert result.ok and result.output == "Exit code 0\nhello\n"


@pytest.mark.anyio
async def test_client_terminal_create_failure(tmp_path: Path) -> None:
    editor = FakeEditor(fail="terminal/create")
    with pytest.raises(RuntimeError, match="create failed"):
        await run(make_ctx(tmp_path, editor, terminal=True), command="echo hello")
    assert editor.methods == ["terminal/create"]  # nothing to release


# ---------------------------------------------------------------------------------------------
# Describing and permissions


@pytest.mark.anyio
async def test_describe_and_policy_inputs(tmp_path: Path) -> None:
    tool = Bash()
    ctx = make_ctx(tmp_path)
    args = tool.parse_args({"command": "pytest -q\n  tests", "cwd": "sub"})
    preview = await tool.describe(args, ctx)
    assert preview.title == f"Run `pytest -q tests` in {tmp_path / 'sub'}"
    # flattened in the title, so shown whole before permission is asked
    assert preview.content == [ContentItem.of("```\npytest -q\n  tests\n```")]
    assert (await tool.describe(tool.parse_args({"command": "ls -l"}), ctx)).content == []
    long = await tool.describe(tool.parse_args({"command": "echo " + "x" * 200}), ctx)
    assert len(long.title) < 100 and long.title.endswith("…`")
    ticks = await tool.describe(tool.parse_args({"command": "echo `date`"}), ctx)
    assert ticks.title == "Run `` echo `date` ``"
    assert tool.safety(args) is Safety.DESTRUCTIVE
    assert tool.kind == "execute"
    assert tool.paths(args, ctx) == [tmp_path / "sub"]
    assert tool.paths(tool.parse_args({"command": "ls"}), ctx) == []
    schema = tool.input_schema()
    assert schema["required"] == ["command"]
    with pytest.raises(ValueError):
        tool.parse_args({"command": "ls", "timeout": 601})
