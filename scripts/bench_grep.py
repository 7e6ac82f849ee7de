#!/usr/bin/env python3
"""Time Heron's grep and find_path (pure Python, and rg-backed when rg exists) against running
rg directly, on a generated tree (default 20k files plus ignored folders) or on --root.

    .venv/bin/python scripts/bench_grep.py [--files 20000] [--repeat 5] [--root DIR]

Prints the median wall time of each search; it checks nothing.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.files.backend import Files
from agent.tools.base import Tool, ToolContext
from agent.tools.search import RG_WALK, FindPath, Grep, find_rg

WORDS = ["alpha", "beta", "gamma", "delta", "import", "def", "class", "return", "self", "value"]


def build_tree(root: Path, files: int) -> None:
    """`files` Python files in nested folders, plus ignored folders a search must skip."""
    rng = random.Random(1)
    per_dir = 100
    for i in range(files):
        folder = root / f"pkg{i // (per_dir * 10)}" / f"mod{(i // per_dir) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [" ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(60)]
        if i % 997 == 0:
            lines[30] = f"def request_handler_{i}(self):"
        (folder / f"file{i % per_dir}.py").write_text("\n".join(lines) + "\n")
    for ignored in ("node_modules/lib", "build/out"):
        folder = root / ignored
        folder.mkdir(parents=True)
        for i in range(files // 10):
            (folder / f"f{i}.js").write_text("def request_handler_x(self):\n" * 20)
    (root / ".gitignore").write_text("node_modules/\nbuild/\n*.pyc\n")


async def _no_client(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(method)


async def run_tool(tool: Tool[Any], root: Path, raw: dict[str, Any]) -> str:
    ctx = ToolContext(
        cwd=root,
        session_id="bench",
        files=Files("bench", _no_client, client_reads=False, client_writes=False),
        client_request=_no_client,
        client_terminal=False,
    )
    args = tool.parse_args(raw)
    preview = await tool.describe(args, ctx)
    output = ""
    async for event in tool.execute(args, ctx, preview):
        output = getattr(event, "output", output)
    return output


async def median_ms(repeat: int, work: Callable[[], Awaitable[object]]) -> float:
    await work()  # warm the page cache and imports
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--root", type=Path, help="search this tree instead of generating one")
    opts = parser.parse_args()
    rg = find_rg()
    with tempfile.TemporaryDirectory() as tmp:
        root = opts.root.resolve() if opts.root else Path(tmp)
        if not opts.root:
            build_tree(root, opts.files)
            print(f"tree: {opts.files} files + {opts.files // 5} ignored, in {root}")
        print(f"rg: {rg or 'not found'}; median of {opts.repeat} runs\n")

        searches: list[tuple[str, dict[str, Any], list[str]]] = [
            ("grep rare literal", {"pattern": "request_handler"}, ["-i", "request_handler"]),
            ("grep regex", {"pattern": r"def \w+_handler_\d+\("}, ["-i", r"def \w+_handler_\d+\("]),
            ("grep no match", {"pattern": "zzz_nothing"}, ["-i", "zzz_nothing"]),
            (
                "grep capped (many hits)",
                {"pattern": "alpha beta", "case_sensitive": True},
                ["alpha beta"],
            ),
        ]
        finds: list[tuple[str, dict[str, Any], list[str]]] = [
            ("find **/file1?.py", {"pattern": "**/file1?.py"}, ["-g", "**/file1?.py"]),
            ("find *", {"pattern": "*"}, []),
        ]
        print(f"{'search':28} {'python':>10} {'heron+rg':>10} {'rg alone':>10}")
        for label, raw, rg_args in searches + finds:
            find = label.startswith("find")
            make = FindPath if find else Grep
            # rg alone, walking as Heron makes it walk (it honours .gitignore outside git too).
            walk = [*RG_WALK, "--no-require-git", "-g", "!.git"]
            argv = [rg, "--files", *walk, *rg_args] if find else [rg, "-n", *walk, *rg_args]

            async def heron(use_rg: bool, make: type = make, raw: dict = raw) -> None:
                await run_tool(make(use_rg), root, raw)

            async def direct(argv: list[str] = argv) -> None:
                await anyio.run_process(argv, cwd=root, stdout=subprocess.DEVNULL, check=False)

            row = [await median_ms(opts.repeat, lambda: heron(False))]
            if rg:
                row.append(await median_ms(opts.repeat, lambda: heron(True)))
                row.append(await median_ms(opts.repeat, direct))
            print(f"{label:28} " + " ".join(f"{ms:8.1f}ms" for ms in row))


if __name__ == "__main__":
    anyio.run(main)
