"""find_path and grep: search the project, skipping `.git` and what `.gitignore` ignores.

When a ripgrep binary is at hand (next to the Python interpreter or on PATH) it does the
walking and matching; otherwise the same search runs in Python, in a child process that is
killed on cancel (`agent.tools.grep_python`: `re` cannot be interrupted). Both feed the same
collector and formatter, and `agent.files.paths.Tree` walks the way the rg flags below
make rg walk, so the model sees the same output either way. rg runs unsorted (in parallel)
and its files are then put in the walk's order; only when it finds more than RG_OVERSHOOT
times the match cap is it stopped early, and which matches are shown then depends on timing.
rg's regex dialect differs from Python's in corners (look-around, backreferences): a pattern
rg rejects is run in Python. A search gets SEARCH_TIMEOUT seconds, then fails readably, and
never opens a FIFO or a device (it would block, or never end).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import BaseModel, Field

from agent.files.paths import Rules, Tree, allowed_by, display_path, glob_filter, printable
from agent.files.workspace import inside, program_outside
from agent.processes.tree import forget, open_process
from agent.tools.base import OneShotTool, Preview, Safety, ToolContext, ToolError, ToolResult
from agent.tools.files import location
from agent.tools.grep_python import Hits, Line, parse_reply, request, shown_line, worker_argv

MAX_FIND_RESULTS = 1000
MAX_GREP_MATCHES = 200
MAX_GREP_BYTES = 64 * 1024
MAX_LOCATIONS = 10
RG_OVERSHOOT = 10  # unsorted rg is stopped once it found this many times MAX_GREP_MATCHES
SEARCH_TIMEOUT = 30.0  # seconds a search may take; HERON_SEARCH_TIMEOUT overrides

# The rg flags that make it walk like `Tree`: hidden files in, .git out, only .gitignore files.
RG_WALK = [
    "--no-config",
    "--hidden",
    "--no-ignore-global",
    "--no-ignore-exclude",
    "--no-ignore-dot",
    "--no-messages",
]


def search_timeout() -> float:
    try:
        return float(os.environ["HERON_SEARCH_TIMEOUT"])
    except (KeyError, ValueError):
        return SEARCH_TIMEOUT


def find_rg(roots: Sequence[Path] = ()) -> str | None:
    """rg beside Heron's Python, else on PATH outside the workspace `roots`: Heron runs it
    unconfined, so one a sandboxed command could have written there is never used."""
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK) and not inside(beside, roots):
        return str(beside)
    return program_outside("rg", roots)


def _rg_walk_flags(tree: Tree) -> list[str]:
    return [*RG_WALK, *([] if tree.git else ["--no-require-git"])]


async def run_rg(argv: list[str], cwd: Path, on_line: Callable[[bytes], bool]) -> str | None:
    """Run rg, handing each stdout line to `on_line` until it returns False (rg is then
    killed). Returns rg's complaint when it failed with one (e.g. a pattern it cannot
    parse; `--no-messages` keeps unreadable files quiet), else None."""
    process = await open_process(argv, cwd=cwd, stdin=subprocess.DEVNULL)
    errors = bytearray()
    try:
        async with anyio.create_task_group() as tg:
            assert process.stdout is not None and process.stderr is not None
            tg.start_soon(_collect, process.stderr, errors)
            if await _feed(process.stdout, on_line):
                _kill(process)
                return None
        code = await process.wait()
    finally:
        await _release(process)
    if code not in (0, 1) and errors:
        return errors.decode("utf-8", "replace").strip()
    return None


async def _release(process: Process) -> None:
    """Kill a search child if it still runs, close it and stop tracking it, even when the
    call is being cancelled."""
    with anyio.CancelScope(shield=True):
        _kill(process)
        await process.aclose()
        forget(process.pid)


def _kill(process: Process) -> None:
    # os.kill rather than Process.kill: Popen's kill polls first, which can reap the child
    # behind asyncio's child watcher (it then logs "Unknown child process pid").
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)


async def _collect(stream: ByteReceiveStream, into: bytearray) -> None:
    async for chunk in stream:
        into += chunk


async def _feed(stream: ByteReceiveStream, on_line: Callable[[bytes], bool]) -> bool:
    """True when `on_line` asked to stop."""
    buf = bytearray()
    async for chunk in stream:
        scanned = len(buf)  # what is left in buf holds no newline
        buf += chunk
        start = 0
        while (end := buf.find(b"\n", scanned)) >= 0:
            if not on_line(bytes(buf[start:end])):
                return True
            start = scanned = end + 1
        del buf[:start]
    return bool(buf) and not on_line(bytes(buf))


T = TypeVar("T")


async def in_thread(work: Callable[[threading.Event], T]) -> T:
    """Run `work` in a worker thread; on cancellation, stop waiting and tell it to stop."""
    stop = threading.Event()
    try:
        return await anyio.to_thread.run_sync(work, stop, abandon_on_cancel=True)
    finally:
        stop.set()


def _target(ctx: ToolContext, path: str) -> tuple[Path, str]:
    root = ctx.resolve(path)
    shown = display_path(root, ctx.cwd)
    if not root.exists():
        raise ToolError(f"Path not found: {shown}. Use list_directory to see what exists.")
    return root, shown


def _in(shown: str) -> str:
    return "" if shown == "." else f" in {shown}"


def _prefix(base: Path, ctx: ToolContext) -> str:
    """What turns a path relative to `base` into one relative to the cwd (or absolute)."""
    shown = display_path(base, ctx.cwd)
    return "" if shown == "." else shown.rstrip("/") + "/"


# ---------------------------------------------------------------------------------------------
# find_path


class FindPathArgs(BaseModel):
    pattern: str = Field(
        description=(
            "Glob for file paths, e.g. `**/*.py`, `src/*.ts`, `test_*.py` or `*.{js,ts}`. "
            "Without a `/` it matches file names at any depth; with one, paths relative to "
            "`path`. `*` and `?` stay within one folder, `**` spans folders."
        )
    )
    path: str = Field(".", description="The folder to search in; the project root by default.")


class FindPath(OneShotTool[FindPathArgs]):
    name = "find_path"
    description = (
        "Find files whose path matches a glob. Skips `.git` and what .gitignore ignores. "
        f"Returns paths relative to the project root, sorted, at most {MAX_FIND_RESULTS}."
    )
    kind = "search"
    Args = FindPathArgs
    default_safety = Safety.READ_ONLY

    def __init__(self, use_rg: bool = True) -> None:
        self.use_rg = use_rg

    def paths(self, args: FindPathArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def describe(self, args: FindPathArgs, ctx: ToolContext) -> Preview:
        root = ctx.resolve(args.path)
        shown = display_path(root, ctx.cwd)
        return Preview(title=f"Find `{args.pattern}`{_in(shown)}", locations=[location(root)])

    async def run(self, args: FindPathArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        root, shown = _target(ctx, args.path)
        if not root.is_dir():
            raise ToolError(f"{shown} is a file; find_path searches in a folder.")
        pattern = args.pattern.removeprefix("./")
        if pattern.startswith("!"):  # a find pattern only selects: "!" is taken literally
            pattern = "\\" + pattern
        glob = glob_filter(pattern)
        tree = Tree(root)
        rg = find_rg(ctx.roots) if self.use_rg else None
        budget = search_timeout()
        found = None
        with anyio.move_on_after(budget) as timer:
            found = await _find_rg(rg, tree, glob) if rg else None
            if found is None:
                found = await in_thread(lambda stop: _find_python(tree, glob, stop))
        if timer.cancelled_caught or found is None:
            raise ToolError(
                f"find_path stopped after {budget:g} s without finishing; narrow `path`."
            )
        if not found:
            return ToolResult(
                ok=True,
                output=f"No files match `{args.pattern}`{_in(shown)}. find_path matches files "
                "only; use list_directory to see folders.",
            )
        found.sort()
        prefix = _prefix(root, ctx)
        out = [printable(prefix + rel) for rel in found[:MAX_FIND_RESULTS]]
        if len(found) > MAX_FIND_RESULTS:
            out.append(
                f"\n[Showed {MAX_FIND_RESULTS} of {len(found)} files; use a narrower pattern "
                "or path.]"
            )
        return ToolResult(ok=True, output="\n".join(out), raw_output={"files": len(found)})


def _find_python(tree: Tree, glob: Rules, stop: threading.Event) -> list[str]:
    found = []
    for rel in tree.walk(glob):
        if stop.is_set():
            break
        found.append(rel)
    return found


async def _find_rg(rg: str, tree: Tree, glob: Rules) -> list[str] | None:
    # rg lists the files and Python applies the glob: both ways then read the glob alike, and
    # .gitignore keeps the last word (rg's --glob would let a matching ignored file through).
    found: list[str] = []

    def on_line(line: bytes) -> bool:
        rel = line.decode("utf-8", "surrogateescape").removeprefix("./")
        if allowed_by(glob, rel, False):
            found.append(rel)
        return True

    argv = [rg, "--files", *_rg_walk_flags(tree), "-g", "!.git", "."]
    try:
        complaint = await run_rg(argv, tree.root, on_line)
    except OSError:
        return None  # rg vanished or cannot run: use Python
    return None if complaint else found


# ---------------------------------------------------------------------------------------------
# grep


class GrepArgs(BaseModel):
    pattern: str = Field(
        description=(
            "Regular expression to search for, line by line (e.g. `def \\w+_handler`, "
            "`TODO|FIXME`). Escape regex characters to search for them literally."
        )
    )
    path: str = Field(
        ".", description="The file or folder to search in; the project root by default."
    )
    glob: str | None = Field(
        None,
        description=(
            "Only search files matching this glob, e.g. `*.py`, `src/**/*.ts`, `*.{js,ts}` "
            "(without a `/` it matches file names); a leading `!` excludes matches instead."
        ),
    )
    case_sensitive: bool = Field(
        False, description="Match upper and lower case exactly. By default case is ignored."
    )
    context: int = Field(0, ge=0, le=20, description="Lines to show before and after each match.")


class Grep(OneShotTool[GrepArgs]):
    name = "grep"
    description = (
        "Search file contents with a regular expression, line by line. Skips `.git`, binary "
        "files and what .gitignore ignores. Prints `path:line:text` for each matching line "
        "(context lines as `path-line-text`, groups separated by `--`), in path order, at most "
        f"{MAX_GREP_MATCHES} matches."
    )
    kind = "search"
    Args = GrepArgs
    default_safety = Safety.READ_ONLY

    def __init__(self, use_rg: bool = True) -> None:
        self.use_rg = use_rg

    def paths(self, args: GrepArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def describe(self, args: GrepArgs, ctx: ToolContext) -> Preview:
        root = ctx.resolve(args.path)
        shown = display_path(root, ctx.cwd)
        pattern = args.pattern if len(args.pattern) <= 60 else args.pattern[:59] + "…"
        title = f"Grep `{pattern}`{_in(shown)}"
        if args.glob:
            title += f" ({args.glob})"
        return Preview(title=title, locations=[location(root)])

    async def run(self, args: GrepArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        root, shown = _target(ctx, args.path)
        _refuse_special(root, shown)
        hits = Hits(MAX_GREP_MATCHES, args.context)
        rg = find_rg(ctx.roots) if self.use_rg else None
        budget = search_timeout()
        with anyio.move_on_after(budget) as timer:
            if not (rg and await _grep_rg(rg, root, args, hits)):
                flags = re.MULTILINE | (0 if args.case_sensitive else re.IGNORECASE)
                try:
                    re.compile(args.pattern, flags)
                except re.error as exc:
                    raise ToolError(
                        f"Invalid regular expression `{args.pattern}`: {exc}."
                    ) from None
                hits = Hits(MAX_GREP_MATCHES, args.context)
                await _grep_in_worker(root, args.pattern, flags, args.glob, hits)
        if timer.cancelled_caught:
            raise ToolError(
                f"grep stopped after {budget:g} s without finishing. The pattern may backtrack "
                "without end (nested repetition such as `(a+)+`, or alternatives that overlap): "
                "simplify it, or narrow the search with `path` or `glob`."
            )
        if not hits.files:
            only = f" (files matching `{args.glob}`)" if args.glob else ""
            return ToolResult(ok=True, output=f"No matches for `{args.pattern}`{_in(shown)}{only}.")
        base = root if root.is_dir() else root.parent
        return _report(hits, _prefix(base, ctx), base)


def _refuse_special(root: Path, shown: str) -> None:
    """A FIFO would block the search until someone writes to it; a device may never end."""
    try:
        mode = root.stat().st_mode
    except OSError as exc:
        raise ToolError(f"Cannot read {shown}: {exc.strerror}.") from None
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise ToolError(
            f"{shown} is not a regular file or a folder (a FIFO, socket or device); grep "
            "searches files only."
        )


async def _grep_in_worker(
    root: Path, pattern: str, flags: int, glob: str | None, hits: Hits
) -> None:
    """The Python search, in a child process killed on cancel (see agent.tools.grep_python)."""
    process = await open_process(
        worker_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = bytearray(), bytearray()
    try:
        assert process.stdin and process.stdout and process.stderr
        async with anyio.create_task_group() as tg:
            tg.start_soon(_collect, process.stdout, out)
            tg.start_soon(_collect, process.stderr, err)
            with contextlib.suppress(anyio.BrokenResourceError):
                await process.stdin.send(request(root, pattern, flags, glob, hits))
            await process.stdin.aclose()
        code = await process.wait()
    finally:
        await _release(process)
    if code != 0:
        complaint = err.decode("utf-8", "replace").strip().splitlines()
        raise ToolError(f"grep failed: {complaint[-1] if complaint else f'exit code {code}'}")
    parse_reply(bytes(out), hits)


def _report(hits: Hits, prefix: str, base: Path) -> ToolResult:
    out: list[str] = []
    size = 0
    cut = False
    for rel, lines in hits.files:
        path = printable(prefix + rel)
        previous = None
        for n, is_match, text in lines:
            if hits.context and out and previous != n - 1:
                out.append("--")
            previous = n
            entry = f"{path}{':' if is_match else '-'}{n}{':' if is_match else '-'}{text}"
            size += len(entry.encode("utf-8", "replace")) + 1
            if size > MAX_GREP_BYTES:
                cut = True
                break
            out.append(entry)
        if cut:
            break
    shown_files = len(hits.files)
    if cut:
        out.append(f"\n[Output cut at {MAX_GREP_BYTES // 1024} KiB; narrow the search.]")
    elif hits.truncated:
        out.append(
            f"\n[Stopped at {hits.matches} matches; narrow the pattern, path or glob to see "
            "the rest.]"
        )
    else:
        out.append(f"\n[{hits.matches} matches in {shown_files} files.]")
    where = [
        location(base / rel, n) for rel, lines in hits.files for n, is_match, _ in lines if is_match
    ][:MAX_LOCATIONS]
    return ToolResult(
        ok=True,
        output="\n".join(out),
        locations=where,
        raw_output={"matches": hits.matches, "files": shown_files, "truncated": hits.truncated},
    )


async def _grep_rg(rg: str, root: Path, args: GrepArgs, hits: Hits) -> bool:
    """Search with rg into `hits`; False when rg could not (the caller then uses Python)."""
    if root.is_dir():
        tree, cwd, target = Tree(root), root, "."
        # No --sort: rg searches in parallel, much faster; the files are sorted below.
        argv = [rg, "--json", *_rg_walk_flags(tree)]
        if args.glob:
            argv += ["-g", args.glob]
        argv += ["-g", "!.git"]
    else:  # one file: searched whatever the ignore rules and glob say, as in Python
        tree, cwd, target = None, root.parent, root.name
        # --no-mmap: with a memory map rg looks for NUL bytes only near the start.
        argv = [rg, "--json", "--no-config", "--no-mmap"]
    if not args.case_sensitive:
        argv.append("-i")
    if args.context:
        argv += ["-C", str(args.context)]
    argv += ["-e", args.pattern, "--", target]
    # rg's --glob lets an included file through even when .gitignore ignores it; put the
    # .gitignore back in charge.
    recheck = tree is not None and args.glob is not None and not args.glob.startswith("!")
    current: list[Line] = []
    found: list[tuple[str, list[Line]]] = []
    matches = 0

    def on_line(raw: bytes) -> bool:
        nonlocal matches
        message = json.loads(raw)
        kind, data = message["type"], message["data"]
        if kind == "begin":
            current.clear()
        elif kind in ("match", "context"):
            current.append(
                shown_line(data["line_number"], kind == "match", _rg_text(data["lines"]))
            )
        elif kind == "end" and data.get("binary_offset") is None:
            rel = _rg_text(data["path"], "surrogateescape").removeprefix("./")
            if not (recheck and tree and tree.ignored(rel)):
                found.append((rel, list(current)))
                matches += sum(is_match for _, is_match, _ in current)
                return matches <= hits.limit * RG_OVERSHOOT
        return True

    try:
        complaint = await run_rg(argv, cwd, on_line)
    except OSError:
        return False
    if complaint is not None:
        return False
    # The walk's order (each folder's entries by name, depth first), so the result is the same
    # as the Python search's unless rg had to be stopped early.
    found.sort(key=lambda item: item[0].split("/"))
    for rel, lines in found:
        if not hits.add(rel, lines):
            break
    return True


def _rg_text(value: dict[str, str], errors: str = "replace") -> str:
    if "text" in value:
        return value["text"]
    return base64.b64decode(value["bytes"]).decode("utf-8", errors)
