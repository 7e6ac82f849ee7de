"""The file tools, called directly: read_file, list_directory, write_file, edit_file,
delete_path and move_path, on the local disk (and read_file through a fake editor)."""

from __future__ import annotations

import os
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from agent.acp.protocol import ContentItem, DiffItem
from agent.files.backend import Files
from agent.tools.base import Preview, Safety, Tool, ToolContext, ToolResult
from agent.tools.files import (
    MAX_READ_BYTES,
    DeletePath,
    EditFile,
    ListDirectory,
    MovePath,
    ReadFile,
    WriteFile,
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _no_client(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"unexpected client request {method}")


def make_ctx(
    cwd: Path,
    client_request: Any = _no_client,
    client_reads: bool = False,
    client_writes: bool = False,
) -> ToolContext:
    files = Files("sess-1", client_request, client_reads=client_reads, client_writes=client_writes)
    return ToolContext(
        cwd=cwd,
        session_id="sess-1",
        files=files,
        client_request=client_request,
        client_terminal=False,
    )


async def describe(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> tuple[Any, Preview]:
    args = tool.parse_args(raw)
    return args, await tool.describe(args, ctx)


async def execute(tool: Tool[Any], ctx: ToolContext, args: Any, preview: Preview) -> ToolResult:
    events = []
    async with aclosing(tool.execute(args, ctx, preview)) as stream:
        async for event in stream:
            events.append(event)
    assert len(events) == 1 and isinstance(events[0], ToolResult)
    return events[0]


async def call(tool: Tool[Any], ctx: ToolContext, **raw: Any) -> ToolResult:
    args, preview = await describe(tool, ctx, **raw)
    return await execute(tool, ctx, args, preview)


def only_diff(content: list[Any] | None) -> DiffItem:
    assert content and len(content) == 1 and isinstance(content[0], DiffItem)
    return content[0]


def test_every_argument_is_described() -> None:
    for tool in (ReadFile(), ListDirectory(), WriteFile(), EditFile(), DeletePath(), MovePath()):
        props = tool.input_schema()["properties"]
        assert props, tool.name
        for name, prop in props.items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"


def test_kinds_and_safety(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    expected = {
        ReadFile(): ("read", Safety.READ_ONLY),
        ListDirectory(): ("read", Safety.READ_ONLY),
        WriteFile(): ("edit", Safety.MUTATING),
        EditFile(): ("edit", Safety.MUTATING),
        DeletePath(): ("delete", Safety.DESTRUCTIVE),
        MovePath(): ("move", Safety.DESTRUCTIVE),
    }
    for tool, (kind, safety) in expected.items():
        raw = {"path": "x", "content": "", "old_string": "a", "new_string": "b"}
        if isinstance(tool, MovePath):
            raw = {"source": "x", "destination": "/elsewhere/y"}
        args = tool.parse_args(raw)
        assert (tool.kind, tool.safety(args)) == (kind, safety)
        for p in tool.paths(args, ctx):
            assert p.is_absolute()
    move = MovePath()
    args = move.parse_args({"source": "a/b", "destination": "../c"})
    assert move.paths(args, ctx) == [tmp_path / "a" / "b", tmp_path.parent / "c"]


# ---------------------------------------------------------------------------------------------
# read_file


@pytest.mark.anyio
async def test_read_numbers_lines_like_cat_n(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("first\n\tindented\r\nlast")
    args, preview = await describe(ReadFile(), make_ctx(tmp_path), path="a.py")
    assert preview.title == "Read a.py"
    assert [loc.dump() for loc in preview.locations] == [
        {"path": str(tmp_path / "a.py"), "line": 1}
    ]
    result = await execute(ReadFile(), make_ctx(tmp_path), args, preview)
    assert result.ok
    assert result.output == "     1\tfirst\n     2\t\tindented\n     3\tlast"


@pytest.mark.anyio
async def test_read_offset_and_limit(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    ctx = make_ctx(tmp_path)
    args, preview = await describe(ReadFile(), ctx, path="f.txt", offset=3, limit=2)
    assert preview.title == "Read f.txt (3-4)"
    assert preview.locations[0].line == 3
    result = await execute(ReadFile(), ctx, args, preview)
    lines = result.output.splitlines()
    assert lines[:2] == ["     3\tline 3", "     4\tline 4"]
    # Only the lines shown are read, so the total is not known (and not claimed).
    assert "offset=5" in result.output and "goes on" in result.output
    tail = await call(ReadFile(), ctx, path="f.txt", offset=9)
    assert tail.output == "     9\tline 9\n    10\tline 10"  # reached the end: no note
    past = await call(ReadFile(), ctx, path="f.txt", offset=11)
    assert not past.ok and "10 lines" in past.output


@pytest.mark.anyio
async def test_read_caps_lines_and_bytes(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (tmp_path / "long.txt").write_text("x\n" * 2500)
    result = await call(ReadFile(), ctx, path="long.txt")
    numbered = [line for line in result.output.splitlines() if "\t" in line]
    assert len(numbered) == 2000
    assert "offset=2001" in result.output

    (tmp_path / "wide.txt").write_text(("y" * 1000 + "\n") * 2000)
    result = await call(ReadFile(), ctx, path="wide.txt")
    assert len(result.output.encode()) <= MAX_READ_BYTES + 200
    shown = [line for line in result.output.splitlines() if "\t" in line]
    assert 200 < len(shown) < 2000
    assert f"offset={len(shown) + 1}" in result.output

    (tmp_path / "minified.js").write_text("z" * 50_000)
    result = await call(ReadFile(), ctx, path="minified.js")
    assert len(result.output) < 3000 and "48000 more characters" in result.output


@pytest.mark.anyio
async def test_read_refusals(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "sub").mkdir()
    binary = await call(ReadFile(), ctx, path="img.png")
    assert not binary.ok and "binary" in binary.output
    missing = await call(ReadFile(), ctx, path="nope.py")
    assert not missing.ok
    assert missing.output.startswith("File not found: nope.py")
    assert "list_directory" in missing.output and "find_path" in missing.output
    folder = await call(ReadFile(), ctx, path="sub")
    assert not folder.ok and "list_directory" in folder.output
    empty = await call(ReadFile(), ctx, path="empty.txt")
    assert empty.ok and "empty" in empty.output


@pytest.mark.anyio
async def test_read_goes_through_the_editor_when_it_offers(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("saved on disk\n")
    asked: list[tuple[str, dict[str, Any]]] = []

    async def editor(method: str, params: dict[str, Any]) -> Any:
        asked.append((method, params))
        return {"content": "unsaved buffer\n"}

    # The editor is used when it can both read and write (one source for reads and writes).
    ctx = make_ctx(tmp_path, editor, client_reads=True, client_writes=True)
    result = await call(ReadFile(), ctx, path="a.py")
    assert result.output == "     1\tunsaved buffer"
    # Only the lines it shows (and one more, to know whether the file goes on) are asked for.
    params = {"sessionId": "sess-1", "path": str(tmp_path / "a.py"), "line": 1, "limit": 2001}
    assert asked == [("fs/read_text_file", params)]


# ---------------------------------------------------------------------------------------------
# list_directory


@pytest.mark.anyio
async def test_list_directory(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    for name in ("b.txt", "a.txt", "C.md"):
        (tmp_path / name).write_text("")
    (tmp_path / "src").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / ".env").write_text("")
    args, preview = await describe(ListDirectory(), ctx)
    assert preview.title == "List ."
    result = await execute(ListDirectory(), ctx, args, preview)
    assert result.output.splitlines() == [".env", "C.md", "a.txt", "b.txt", "src/"]
    assert not (await call(ListDirectory(), ctx, path="missing")).ok
    assert not (await call(ListDirectory(), ctx, path="a.txt")).ok


@pytest.mark.anyio
async def test_list_directory_caps_entries(tmp_path: Path) -> None:
    for i in range(1005):
        (tmp_path / f"f{i:04}").write_text("")
    result = await call(ListDirectory(), make_ctx(tmp_path))
    lines = result.output.splitlines()
    assert lines[:2] == ["f0000", "f0001"] and "f0999" in lines and "f1000" not in lines
    assert "1000 of 1005" in result.output


# ---------------------------------------------------------------------------------------------
# write_file


@pytest.mark.anyio
async def test_write_new_file(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    args, preview = await describe(WriteFile(), ctx, path="pkg/new.py", content="a = 1\nb = 2\n")
    assert preview.title == "Create pkg/new.py"
    diff = only_diff(preview.content)
    assert diff.dump() == {
        "type": "diff",
        "path": str(tmp_path / "pkg" / "new.py"),
        "oldText": None,
        "newText": "a = 1\nb = 2\n",
    }
    result = await execute(WriteFile(), ctx, args, preview)
    assert result.ok and result.output == "Created pkg/new.py (2 lines)."
    assert (tmp_path / "pkg" / "new.py").read_text() == "a = 1\nb = 2\n"
    assert only_diff(result.content).old_text is None


@pytest.mark.anyio
async def test_write_existing_file_shows_diff_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_text("#!/bin/sh\necho one\necho two\n")
    target.chmod(0o751)
    ctx = make_ctx(tmp_path)
    assert (await call(ReadFile(), ctx, path="run.sh")).ok  # write_file needs a read first
    new = "#!/bin/sh\necho one\necho TWO\n"
    args, preview = await describe(WriteFile(), ctx, path=str(target), content=new)
    assert preview.title == "Write run.sh"
    assert preview.locations[0].line == 3
    assert only_diff(preview.content).old_text == "#!/bin/sh\necho one\necho two\n"
    result = await execute(WriteFile(), ctx, args, preview)
    assert result.ok and result.output == "Wrote run.sh (3 lines)."
    assert target.read_text() == new
    assert target.stat().st_mode & 0o7777 == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]  # no temp file left


@pytest.mark.anyio
async def test_write_refuses_a_file_changed_since_describe(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("v1\n")
    ctx = make_ctx(tmp_path)
    assert (await call(ReadFile(), ctx, path="a.txt")).ok
    args, preview = await describe(WriteFile(), ctx, path="a.txt", content="mine\n")
    target.write_text("someone else's\n")
    result = await execute(WriteFile(), ctx, args, preview)
    assert not result.ok
    # Behaviour changed (issue 6): the check is against what the model read, not the preview.
    assert "changed since you read it" in result.output and "Read it again" in result.output
    assert target.read_text() == "someone else's\n"

    args, preview = await describe(WriteFile(), ctx, path="b.txt", content="mine\n")
    (tmp_path / "b.txt").write_text("appeared\n")
    result = await execute(WriteFile(), ctx, args, preview)
    assert not result.ok and "you have not read it" in result.output
    assert (tmp_path / "b.txt").read_text() == "appeared\n"


# ---------------------------------------------------------------------------------------------
# edit_file


@pytest.mark.anyio
async def test_edit_replaces_a_unique_match(tmp_path: Path) -> None:
    target = tmp_path / "app.py"
    old = "".join(f"line{i}\n" for i in range(1, 21))
    target.write_text(old)
    ctx = make_ctx(tmp_path)
    args, preview = await describe(
        EditFile(), ctx, path="app.py", old_string="line10\nline11\n", new_string="ten\n"
    )
    assert preview.title == "Edit app.py"
    assert preview.locations[0].line == 10
    diff = only_diff(preview.content)
    expected = old.replace("line10\nline11\n", "ten\n")
    assert (diff.old_text, diff.new_text) == (old, expected)
    result = await execute(EditFile(), ctx, args, preview)
    assert result.ok
    assert target.read_text() == expected
    assert "    10\tten" in result.output and "     7\tline7" in result.output
    assert result.locations and result.locations[0].line == 10
    emptied = await call(EditFile(), ctx, path="app.py", old_string=expected, new_string="")
    assert emptied.ok and "empty now" in emptied.output and target.read_text() == ""


@pytest.mark.anyio
async def test_edit_no_match_and_several_matches(tmp_path: Path) -> None:
    target = tmp_path / "a.py"
    target.write_text("x = 1\n    y = 2\nx = 1\nx = 1\n")
    ctx = make_ctx(tmp_path)

    args, preview = await describe(EditFile(), ctx, path="a.py", old_string="y = 3", new_string="")
    assert preview.title == "Edit a.py" and not preview.content  # describe does not raise
    result = await execute(EditFile(), ctx, args, preview)
    assert not result.ok and "not found" in result.output and "Read the file again" in result.output

    hint = await call(EditFile(), ctx, path="a.py", old_string="y = 2\nz = 0", new_string="w")
    assert not hint.ok and "line 2" in hint.output

    several = await call(EditFile(), ctx, path="a.py", old_string="x = 1", new_string="x = 9")
    assert not several.ok
    assert "3 times" in several.output and "1, 3, 4" in several.output
    assert "replace_all" in several.output
    assert target.read_text() == "x = 1\n    y = 2\nx = 1\nx = 1\n"

    every = await call(
        EditFile(), ctx, path="a.py", old_string="x = 1", new_string="x = 9", replace_all=True
    )
    assert every.ok and "3 replacements" in every.output
    assert target.read_text() == "x = 9\n    y = 2\nx = 9\nx = 9\n"

    same = await call(EditFile(), ctx, path="a.py", old_string="x = 9", new_string="x = 9")
    assert not same.ok


@pytest.mark.anyio
async def test_edit_keeps_crlf_line_endings(tmp_path: Path) -> None:
    target = tmp_path / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    ctx = make_ctx(tmp_path)
    result = await call(EditFile(), ctx, path="win.txt", old_string="one\ntwo", new_string="1\n2")
    assert result.ok, result.output
    assert target.read_bytes() == b"1\r\n2\r\nthree\r\n"
    result = await call(EditFile(), ctx, path="win.txt", old_string="three", new_string="3\n4")
    assert result.ok
    assert target.read_bytes() == b"1\r\n2\r\n3\r\n4\r\n"


@pytest.mark.anyio
async def test_edit_empty_old_string_only_creates(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    args, preview = await describe(EditFile(), ctx, path="new.md", old_string="", new_string="hi\n")
    assert only_diff(preview.content).old_text is None
    result = await execute(EditFile(), ctx, args, preview)
    assert result.ok and (tmp_path / "new.md").read_text() == "hi\n"
    again = await call(EditFile(), ctx, path="new.md", old_string="", new_string="bye\n")
    assert not again.ok and "write_file" in again.output
    assert (tmp_path / "new.md").read_text() == "hi\n"
    missing = await call(EditFile(), ctx, path="nope.md", old_string="a", new_string="b")
    assert not missing.ok and "File not found" in missing.output


@pytest.mark.anyio
async def test_edit_refuses_a_file_changed_since_describe(tmp_path: Path) -> None:
    target = tmp_path / "a.py"
    target.write_text("value = 1\n")
    ctx = make_ctx(tmp_path)
    args, preview = await describe(
        EditFile(), ctx, path="a.py", old_string="value = 1", new_string="value = 2"
    )
    target.write_text("value = 1\n# edited by the user meanwhile\n")
    result = await execute(EditFile(), ctx, args, preview)
    assert not result.ok and "changed since" in result.output
    assert target.read_text() == "value = 1\n# edited by the user meanwhile\n"


@pytest.mark.anyio
async def test_edit_refuses_binary_and_non_utf8(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (tmp_path / "b.bin").write_bytes(b"abc\0def")
    (tmp_path / "latin.txt").write_bytes("café = 1\n".encode("latin-1"))
    for name, why in (("b.bin", "binary"), ("latin.txt", "UTF-8")):
        args, preview = await describe(EditFile(), ctx, path=name, old_string="a", new_string="b")
        assert not preview.content
        result = await execute(EditFile(), ctx, args, preview)
        assert not result.ok and why in result.output
    assert (tmp_path / "latin.txt").read_bytes() == "café = 1\n".encode("latin-1")


# ---------------------------------------------------------------------------------------------
# delete_path and move_path


@pytest.mark.anyio
async def test_delete_files_folders_and_links(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (tmp_path / "f.txt").write_text("x")
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "g.txt").write_text("x")
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "k.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "keep")

    assert (await call(DeletePath(), ctx, path="f.txt")).ok
    assert not (tmp_path / "f.txt").exists()
    args, preview = await describe(DeletePath(), ctx, path="d")
    assert preview.title == "Delete d"
    assert isinstance(preview.content[0], ContentItem)
    assert (await execute(DeletePath(), ctx, args, preview)).ok
    assert not (tmp_path / "d").exists()
    assert (await call(DeletePath(), ctx, path="link")).ok
    assert (tmp_path / "keep" / "k.txt").exists()

    missing = await call(DeletePath(), ctx, path="f.txt")
    assert not missing.ok and "does not exist" in missing.output


@pytest.mark.anyio
async def test_delete_refuses_the_project_and_above(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("x")
    ctx = make_ctx(project)
    for path in (".", str(project), "..", "/"):
        result = await call(DeletePath(), ctx, path=path)
        assert not result.ok and "Refusing" in result.output, path
    assert (project / "a.txt").exists()


@pytest.mark.anyio
async def test_move(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "dir").mkdir()

    args, preview = await describe(MovePath(), ctx, source="a.txt", destination="x/y/a2.txt")
    assert preview.title == "Move a.txt → x/y/a2.txt"
    result = await execute(MovePath(), ctx, args, preview)
    assert result.ok and (tmp_path / "x" / "y" / "a2.txt").read_text() == "a"
    assert not (tmp_path / "a.txt").exists()

    clash = await call(MovePath(), ctx, source="b.txt", destination="x/y/a2.txt")
    assert not clash.ok and "already exists" in clash.output
    assert (tmp_path / "b.txt").read_text() == "b"
    assert (tmp_path / "x" / "y" / "a2.txt").read_text() == "a"

    inside = await call(MovePath(), ctx, source="dir", destination="dir/sub")
    assert not inside.ok and (tmp_path / "dir").is_dir()
    root = await call(MovePath(), ctx, source=".", destination="../elsewhere")
    assert not root.ok and "Refusing" in root.output
    missing = await call(MovePath(), ctx, source="nope", destination="n2")
    assert not missing.ok and "does not exist" in missing.output
    assert sorted(os.listdir(tmp_path)) == ["b.txt", "dir", "x"]
