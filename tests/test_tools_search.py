"""find_path and grep, called directly, with the pure-Python backend and (when an `rg` binary
is available) the ripgrep-backed one; both must print exactly the same thing."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.files.backend import Files
from agent.files.paths import Rules, Tree, glob_filter
from agent.tools.base import Safety, Tool, ToolContext, ToolResult
from agent.tools.search import MAX_GREP_MATCHES, FindPath, Grep, find_rg, run_rg

RG = find_rg()
BACKENDS = [
    pytest.param(False, id="python"),
    pytest.param(True, id="rg", marks=pytest.mark.skipif(RG is None, reason="no rg binary")),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=BACKENDS)
def use_rg(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def _no_client(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"unexpected client request {method}")


def make_ctx(cwd: Path) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        session_id="sess-1",
        files=Files("sess-1", _no_client, client_reads=False, client_writes=False),
        client_request=_no_client,
        client_terminal=False,
    )


async def call(tool: Tool[Any], cwd: Path, **raw: Any) -> ToolResult:
    ctx = make_ctx(cwd)
    args = tool.parse_args(raw)
    preview = await tool.describe(args, ctx)
    async with aclosing(tool.execute(args, ctx, preview)) as events:
        results = [event async for event in events]
    assert len(results) == 1 and isinstance(results[0], ToolResult)
    return results[0]


def build(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def listed(result: ToolResult) -> list[str]:
    assert result.ok, result.output
    return [line for line in result.output.splitlines() if line and not line.startswith("[")]


# A tree exercising the common gitignore syntax; True: the file must be found.
IGNORE_CASES: dict[str, bool] = {
    "a.log": False,  # *.log
    "keep.log": True,  # !keep.log
    "build/out.py": False,  # build/ (a folder)
    "sub/build": True,  # build/ matches folders only
    "only_root.txt": False,  # /only_root.txt is anchored
    "sub/only_root.txt": True,
    "docs/x.tmp": False,  # docs/**/*.tmp: ** matches no folder too
    "docs/a/b/x.tmp": False,
    "docs/a/x.txt": True,
    "ax.c": False,  # [ab]?.c
    "abc.c": True,
    "cache1/f": False,  # cache? plus a trailing-space line
    "local.txt": True,
    "sub/local.txt": False,  # sub/.gitignore: local.txt
    "sub/important.log": True,  # sub/.gitignore: !important.log overrides *.log
    "sub/deep/x.log": False,
    "sub/deep/important.log": True,
    "#hash.txt": False,  # \#hash.txt
    ".hidden/h.txt": True,  # hidden files are searched
    "vendor/lib/a.js": False,  # vendor/ ... the folder is gone,
    "vendor/lib/keep.js": False,  # ... so a later !keep.js cannot bring files back
    "src/main.py": True,
}


def ignore_tree(root: Path) -> Path:
    build(root, {rel: "needle\n" for rel in IGNORE_CASES})
    build(
        root,
        {
            ".gitignore": (
                "# comment\n*.log\n!keep.log\nbuild/\n/only_root.txt\ndocs/**/*.tmp\n"
                "[ab]?.c\ncache?   \n\\#hash.txt\nvendor/\n!keep.js\n"
            ),
            "sub/.gitignore": "local.txt\n!important.log\n",
            ".git/config": "needle\n",
            ".git/HEAD": "needle\n",
        },
    )
    return root


def expected_files() -> list[str]:
    wanted = [rel for rel, kept in IGNORE_CASES.items() if kept]
    return sorted([*wanted, ".gitignore", "sub/.gitignore"])


# ---------------------------------------------------------------------------------------------
# The walker and the glob rules


def test_rules_follow_gitignore_syntax() -> None:
    rules = Rules(["*.py[co]", "!/keep.pyc", "/logs/", "**/tmp/**", "a/**/b", "\\!bang", "x\\ "])
    assert rules.match("m.pyc", False) is True
    assert rules.match("deep/m.pyo", False) is True
    assert rules.match("keep.pyc", False) is False
    assert rules.match("deep/keep.pyc", False) is True  # the ! line is anchored to the root
    assert rules.match("logs", True) is True
    assert rules.match("logs", False) is None
    assert rules.match("x/logs", True) is None
    assert rules.match("p/tmp/q/r", False) is True
    assert rules.match("a/b", False) is True and rules.match("a/x/y/b", False) is True
    assert rules.match("!bang", False) is True
    assert rules.match("x ", False) is True and rules.match("x", False) is None


def test_glob_filter_reads_globs_like_rg() -> None:
    py = glob_filter("*.py")
    assert py.match("a/b.py", False) is False  # False: let through
    assert py.match("a/b.txt", False) is None
    assert glob_filter("src/*.{ts,tsx}").match("src/a.tsx", False) is False
    assert glob_filter("src/*.{ts,tsx}").match("src/x/a.ts", False) is None
    assert glob_filter("**/test_*.py").match("test_a.py", False) is False
    assert glob_filter("!*.md").match("doc/r.md", False) is True  # True: drop


def test_tree_honours_gitignore(tmp_path: Path) -> None:
    ignore_tree(tmp_path)
    assert sorted(Tree(tmp_path).walk()) == expected_files()


def test_tree_reads_parent_gitignores_and_stops_at_the_repository(tmp_path: Path) -> None:
    build(
        tmp_path,
        {
            ".gitignore": "*.secret\n",
            "repo/.git/HEAD": "",
            "repo/.gitignore": "*.tmp\n",
            "repo/src/a.tmp": "",
            "repo/src/a.secret": "",
            "repo/src/a.py": "",
            "repo/nested/.git/HEAD": "",
            "repo/nested/b.tmp": "",
        },
    )
    # Inside a repository, .gitignore files above its root do not count; a nested repository
    # starts afresh.
    assert list(Tree(tmp_path / "repo" / "src").walk()) == ["a.py", "a.secret"]
    assert sorted(Tree(tmp_path / "repo").walk()) == [
        ".gitignore",
        "nested/b.tmp",
        "src/a.py",
        "src/a.secret",
    ]
    # Outside any repository every ancestor's .gitignore counts.
    build(tmp_path, {"plain/x.secret": "", "plain/x.py": ""})
    assert list(Tree(tmp_path / "plain").walk()) == ["x.py"]


@pytest.mark.skipif(RG is None, reason="no rg binary")
def test_tree_walks_like_rg(tmp_path: Path) -> None:
    ignore_tree(tmp_path)
    build(tmp_path, {"b/a.txt": "", "b.txt": "", "b-c/x": "", "B/y": "", "ü.txt": ""})
    (tmp_path / "link.txt").symlink_to(tmp_path / "b.txt")
    flags = ["--no-config", "--hidden", "--no-ignore-global", "--no-ignore-exclude"]
    flags += ["--no-ignore-dot", "--no-require-git", "--sort", "path", "-g", "!.git"]
    assert RG is not None
    out = subprocess.run([RG, "--files", *flags, "."], cwd=tmp_path, capture_output=True)
    from_rg = [line.removeprefix("./") for line in out.stdout.decode().splitlines()]
    assert list(Tree(tmp_path).walk()) == from_rg


# ---------------------------------------------------------------------------------------------
# find_path


@pytest.mark.anyio
async def test_find_path_honours_gitignore(tmp_path: Path, use_rg: bool) -> None:
    ignore_tree(tmp_path)
    result = await call(FindPath(use_rg), tmp_path, pattern="**/*")
    assert listed(result) == expected_files()


@pytest.mark.anyio
async def test_find_path_patterns(tmp_path: Path, use_rg: bool) -> None:
    build(
        tmp_path,
        {
            "setup.py": "",
            "src/app.py": "",
            "src/app.ts": "",
            "src/ui/view.tsx": "",
            "src/ui/test_view.py": "",
            "tests/test_app.py": "",
        },
    )
    find = FindPath(use_rg)
    assert listed(await call(find, tmp_path, pattern="*.py")) == [
        "setup.py",
        "src/app.py",
        "src/ui/test_view.py",
        "tests/test_app.py",
    ]
    assert listed(await call(find, tmp_path, pattern="src/*.py")) == ["src/app.py"]
    assert listed(await call(find, tmp_path, pattern="src/**/*.{ts,tsx}")) == [
        "src/app.ts",
        "src/ui/view.tsx",
    ]
    # Relative to `path`, and printed relative to the project root.
    assert listed(await call(find, tmp_path, pattern="ui/test_*", path="src")) == [
        "src/ui/test_view.py"
    ]
    none = await call(find, tmp_path, pattern="*.rs")
    assert none.ok and "No files match" in none.output
    missing = await call(find, tmp_path, pattern="*", path="nope")
    assert not missing.ok


@pytest.mark.anyio
async def test_find_path_caps_results(tmp_path: Path, use_rg: bool) -> None:
    for i in range(1003):
        (tmp_path / f"f{i:04}.txt").write_text("")
    result = await call(FindPath(use_rg), tmp_path, pattern="*.txt")
    assert len(listed(result)) == 1000
    assert "1000 of 1003" in result.output


# ---------------------------------------------------------------------------------------------
# grep


CODE = {
    "src/app.py": "import os\n\ndef main():\n    return Handler()\n\nclass Handler:\n    pass\n",
    "src/util.py": "def helper(x):\n    return x * 2\n",
    "README.md": "# Handler docs\nSee main.\n",
    "gen_api.py": "def generated():\n    pass\n",
    ".gitignore": "gen_*.py\n",
    "data.bin": b"Handler\0\x01\x02",
}


@pytest.mark.anyio
async def test_grep_output_format_and_locations(tmp_path: Path, use_rg: bool) -> None:
    build(tmp_path, CODE)
    result = await call(Grep(use_rg), tmp_path, pattern=r"def \w+\(")
    assert result.output == (
        "src/app.py:3:def main():\nsrc/util.py:1:def helper(x):\n\n[2 matches in 2 files.]"
    )
    assert [loc.dump() for loc in result.locations or []] == [
        {"path": str(tmp_path / "src" / "app.py"), "line": 3},
        {"path": str(tmp_path / "src" / "util.py"), "line": 1},
    ]


@pytest.mark.anyio
async def test_grep_case(tmp_path: Path, use_rg: bool) -> None:
    build(tmp_path, CODE)
    grep = Grep(use_rg)
    insensitive = await call(grep, tmp_path, pattern="handler")
    assert listed(insensitive) == [
        "README.md:1:# Handler docs",
        "src/app.py:4:    return Handler()",
        "src/app.py:6:class Handler:",
    ]
    sensitive = await call(grep, tmp_path, pattern="handler", case_sensitive=True)
    assert sensitive.ok and sensitive.output.startswith("No matches for `handler`")


@pytest.mark.anyio
async def test_grep_context(tmp_path: Path, use_rg: bool) -> None:
    build(tmp_path, CODE)
    result = await call(Grep(use_rg), tmp_path, pattern="return", context=1, path="src")
    assert listed(result) == [
        "src/app.py-3-def main():",
        "src/app.py:4:    return Handler()",
        "src/app.py-5-",
        "--",
        "src/util.py-1-def helper(x):",
        "src/util.py:2:    return x * 2",
    ]


@pytest.mark.anyio
async def test_grep_glob(tmp_path: Path, use_rg: bool) -> None:
    build(tmp_path, CODE)
    grep = Grep(use_rg)
    py = await call(grep, tmp_path, pattern="def", glob="*.py")
    # gen_api.py matches the glob but .gitignore still keeps it out.
    assert [line.split(":")[0] for line in listed(py)] == ["src/app.py", "src/util.py"]
    not_md = await call(grep, tmp_path, pattern="handler", glob="!*.md")
    assert "README.md" not in not_md.output and "src/app.py:6:" in not_md.output
    anchored = await call(grep, tmp_path, pattern="x", glob="src/u*.py")
    assert listed(anchored) == ["src/util.py:1:def helper(x):", "src/util.py:2:    return x * 2"]


@pytest.mark.anyio
async def test_grep_skips_binary_and_ignored(tmp_path: Path, use_rg: bool) -> None:
    ignore_tree(tmp_path)
    build(
        tmp_path,
        {
            "blob.bin": b"needle\n" + b"\0" * 100,
            "late.bin": b"needle\n" * 5000 + b"\0",
            # past rg's first buffer: it has printed the early matches before it sees the NUL
            "very_late.bin": b"needle\n" + b"filler\n" * 100_000 + b"\0",
        },
    )
    grep = Grep(use_rg)
    result = await call(grep, tmp_path, pattern="needle")
    found = sorted(line.split(":")[0] for line in listed(result))
    assert found == [rel for rel in expected_files() if not rel.endswith(".gitignore")]
    for name in ("blob.bin", "very_late.bin"):  # also when named
        named = await call(grep, tmp_path, pattern="needle", path=name)
        assert named.ok and named.output.startswith("No matches"), name


@pytest.mark.anyio
async def test_grep_a_single_file_and_parent_gitignore(tmp_path: Path, use_rg: bool) -> None:
    ignore_tree(tmp_path)
    grep = Grep(use_rg)
    one = await call(grep, tmp_path, pattern="needle", path="a.log")  # named: searched
    assert listed(one) == ["a.log:1:needle"]
    sub = await call(grep, tmp_path, pattern="needle", path="sub")  # root's *.log still holds
    assert [line.split(":")[0] for line in listed(sub)] == [
        "sub/build",
        "sub/deep/important.log",
        "sub/important.log",
        "sub/only_root.txt",
    ]


@pytest.mark.anyio
async def test_grep_caps_matches(tmp_path: Path, use_rg: bool) -> None:
    build(tmp_path, {"a.txt": "hit\n" * 150, "b.txt": "hit\n" * 150})
    result = await call(Grep(use_rg), tmp_path, pattern="hit")
    lines = listed(result)
    assert len(lines) == MAX_GREP_MATCHES
    assert lines[-1] == "b.txt:50:hit"
    assert f"Stopped at {MAX_GREP_MATCHES} matches" in result.output
    assert result.raw_output == {"matches": MAX_GREP_MATCHES, "files": 2, "truncated": True}
    # With context, the last match keeps its after-context but not the next match.
    build(tmp_path, {"a.txt": "hit\nmiss\n" * 300, "b.txt": ""})
    lines = listed(await call(Grep(use_rg), tmp_path, pattern="hit", context=2))
    assert sum(":" in line.split("-")[0] for line in lines) == MAX_GREP_MATCHES
    assert lines[-2:] == ["a.txt:399:hit", "a.txt-400-miss"]


@pytest.mark.anyio
async def test_grep_regex_errors_and_python_only_syntax(tmp_path: Path, use_rg: bool) -> None:
    build(tmp_path, CODE)
    grep = Grep(use_rg)
    bad = await call(grep, tmp_path, pattern="main(")
    assert not bad.ok and "Invalid regular expression" in bad.output
    # Look-behind: rg's default engine refuses it, so the search runs in Python.
    behind = await call(grep, tmp_path, pattern=r"(?<=class )Handler")
    assert listed(behind) == ["src/app.py:6:class Handler:"]


def test_schemas_and_safety(tmp_path: Path) -> None:
    for tool in (FindPath(), Grep()):
        props = tool.input_schema()["properties"]
        assert all(p.get("description") for p in props.values()), tool.name
        args = tool.parse_args({"pattern": "x", "path": "../elsewhere"})
        assert tool.kind == "search" and tool.safety(args) is Safety.READ_ONLY
        assert tool.paths(args, make_ctx(tmp_path)) == [tmp_path.parent / "elsewhere"]


@pytest.mark.anyio
@pytest.mark.skipif(RG is None, reason="no rg binary")
async def test_both_backends_print_the_same(tmp_path: Path) -> None:
    ignore_tree(tmp_path)
    build(tmp_path, CODE)
    build(
        tmp_path,
        {
            "crlf.txt": b"alpha\r\nBeta\r\nalphabet\r\n",
            "bom.txt": b"\xef\xbb\xbfalpha first\nsecond\n",
            "latin1.txt": "caf\xe9 alpha\n".encode("latin-1"),
            "unicode.txt": "ÄLPHA\nstraße\n",
            "many.txt": "".join(f"row {i} {'alpha' if i % 7 == 0 else ''}\n" for i in range(300)),
        },
    )
    queries: list[dict[str, Any]] = [
        {"pattern": "alpha"},
        {"pattern": "alpha$", "case_sensitive": True},
        {"pattern": "^alpha"},
        {"pattern": "älpha"},
        {"pattern": r"\bstraße\b"},
        {"pattern": "row", "context": 2},
        {"pattern": "alpha", "context": 3},
        {"pattern": "needle", "glob": "**/*.log"},
        {"pattern": "e", "glob": "!src/**"},
        {"pattern": "needle", "path": "sub", "context": 1},
        {"pattern": "[0-9]+ alpha", "path": "many.txt"},
    ]
    for query in queries:
        fast = await call(Grep(use_rg=True), tmp_path, **query)
        slow = await call(Grep(use_rg=False), tmp_path, **query)
        assert fast.output == slow.output, query
        assert fast.locations == slow.locations, query
    for pattern in ("*", "*.txt", "sub/**", "**/important.*", "[a-c]*"):
        fast = await call(FindPath(use_rg=True), tmp_path, pattern=pattern)
        slow = await call(FindPath(use_rg=False), tmp_path, pattern=pattern)
        assert fast.output == slow.output, pattern


@pytest.mark.anyio
async def test_run_rg_kills_the_process_when_cancelled(tmp_path: Path) -> None:
    # Any program will do to check the clean-up; a slow one shows it is not waited for.
    slow = [sys.executable, "-c", "import time; print('x', flush=True); time.sleep(30)"]
    lines: list[bytes] = []
    started = time.monotonic()
    with anyio.move_on_after(1):
        await run_rg(slow, tmp_path, lambda line: lines.append(line) is None)
    assert lines == [b"x"]
    assert time.monotonic() - started < 20  # not the 30 s the program sleeps

    started = time.monotonic()
    assert await run_rg(slow, tmp_path, lambda line: False) is None  # stop at the first line
    assert time.monotonic() - started < 20
