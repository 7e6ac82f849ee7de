"""The file tools: read, list, write, edit, delete and move.

Text goes through `ctx.files`, so the editor's unsaved buffers are what is read and edited when
the client offers fs/*. ACP has no method to list, delete or move, so those act on the local
disk. An edit is computed in `describe` (the diff the user approves) and checked again right
before writing: if the file changed in between, the call fails instead of overwriting.
write_file replaces a whole file, so it also needs the model to have seen the file's current
text in this session (`ctx.seen`, recorded by read_file, edit_file and write_file).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import anyio
from pydantic import BaseModel, Field

from agent.acp.protocol import ContentItem, DiffItem, ToolCallLocation
from agent.files.backend import Current
from agent.files.disk import NotAFile, NotText, WriteFailed
from agent.files.paths import display_path, printable
from agent.files.seen import lines_of
from agent.tools.base import OneShotTool, Preview, Safety, ToolContext, ToolError, ToolResult

MAX_READ_LINES = 2000
MAX_READ_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000  # longer lines are cut so one minified line cannot fill the output
MAX_LINE_BYTES = 1 << 20  # what is read of one line at most, so memory stays bounded
MAX_LIST_ENTRIES = 1000
SNIPPET_CONTEXT = 3  # lines shown around an edit in its result


def location(path: Path, line: int | None = None) -> ToolCallLocation:
    return ToolCallLocation(path=printable(str(path)), line=line)


def numbered(lines: list[str], first: int) -> list[str]:
    """`cat -n` style lines; long lines cut."""
    out = []
    for n, line in enumerate(lines, first):
        line = line.removesuffix("\r")
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}… [{len(line) - MAX_LINE_CHARS} more characters]"
        out.append(f"{n:>6}\t{line}")
    return out


def changed_lines(old: str, new: str) -> tuple[int, int]:
    """The first and last line of `new` that differ from `old` (1-based)."""
    # commonprefix compares characters, which is what is wanted here.
    head = len(os.path.commonprefix([old, new]))  # noqa: RUF071
    tail = len(os.path.commonprefix([old[head:][::-1], new[head:][::-1]]))  # noqa: RUF071
    first = new.count("\n", 0, head) + 1
    return first, max(first, new.count("\n", 0, len(new) - tail) + 1)


def first_changed_line(old: str, new: str) -> int:
    return changed_lines(old, new)[0]


def count_lines(text: str) -> int:
    return len(lines_of(text)) if text else 0


# ---------------------------------------------------------------------------------------------
# read_file


class ReadFileArgs(BaseModel):
    path: str = Field(description="The file to read, relative to the project root or absolute.")
    offset: int | None = Field(
        None, ge=1, description="First line to read (1-based). Defaults to the first line."
    )
    limit: int | None = Field(
        None, ge=1, description=f"How many lines to read; at most {MAX_READ_LINES} per call."
    )


class ReadFile(OneShotTool[ReadFileArgs]):
    name = "read_file"
    description = (
        "Read a text file. Each output line is `<line number>\\t<text>` (like `cat -n`); the "
        f"numbers are not part of the file. Reads at most {MAX_READ_LINES} lines per call: use "
        "offset and limit for long files, as the note at the end of the output says."
    )
    kind = "read"
    Args = ReadFileArgs
    default_safety = Safety.READ_ONLY

    def paths(self, args: ReadFileArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def describe(self, args: ReadFileArgs, ctx: ToolContext) -> Preview:
        path = ctx.resolve(args.path)
        span = ""
        if args.limit:
            start = args.offset or 1
            span = f" ({start}-{start + args.limit - 1})"
        elif args.offset:
            span = f" (from line {args.offset})"
        return Preview(
            title=f"Read {display_path(path, ctx.cwd)}{span}",
            locations=[location(path, args.offset or 1)],
        )

    async def run(self, args: ReadFileArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        start = args.offset or 1
        limit = min(args.limit or MAX_READ_LINES, MAX_READ_LINES)
        try:
            got = await ctx.files.read_lines(path, start, limit, MAX_READ_BYTES, MAX_LINE_BYTES)
        except IsADirectoryError:
            raise ToolError(
                f"{shown} is a directory; use list_directory to see what it holds."
            ) from None
        except FileNotFoundError:
            raise ToolError(
                f"File not found: {shown}. Use list_directory or find_path to find the right path."
            ) from None
        except NotAFile as exc:
            raise ToolError(
                f"{shown} is {exc.what}, not a regular file; read_file does not open it."
            ) from None
        except NotText:
            raise ToolError(f"{shown} is a binary file; read_file only reads text files.") from None
        if not got.lines and start > 1:
            has = f"which has {got.total} lines" if got.total is not None else "which is shorter"
            raise ToolError(f"offset {start} is past the end of {shown}, {has}.")
        if not got.lines:
            ctx.seen.saw_lines(path, [], 1, True, st=got.stat)
            return ToolResult(ok=True, output=f"({shown} is empty.)")
        out: list[str] = []
        size = 0
        for line in numbered(got.lines, start):
            size += len(line.encode("utf-8", "surrogatepass")) + 1
            if size > MAX_READ_BYTES and out:
                break
            out.append(line)
        if len(out) < len(got.lines):
            got.lines, got.more = got.lines[: len(out)], True
        to_end = not got.more
        ctx.seen.saw_lines(path, got.lines, start, to_end, complete=not got.cut, st=got.stat)
        if got.encoding:
            out.insert(
                0,
                f"[{shown} is not valid UTF-8 text; shown decoded as {got.encoding} (a guess). "
                "edit_file and write_file will not change it as text.]",
            )
        end = start + len(got.lines) - 1
        if got.more:
            out.append(
                f"\n[Showed lines {start}-{end}; the file goes on. To read on, call read_file "
                f"with offset={end + 1}.]"
            )
        return ToolResult(ok=True, output="\n".join(out))


# ---------------------------------------------------------------------------------------------
# list_directory


class ListDirectoryArgs(BaseModel):
    path: str = Field(
        ".", description="The folder to list, relative to the project root or absolute."
    )


class ListDirectory(OneShotTool[ListDirectoryArgs]):
    name = "list_directory"
    description = (
        "List the entries of a folder, sorted by name; folders end with `/`. Not recursive: "
        "use find_path to look for files deeper down."
    )
    kind = "read"
    Args = ListDirectoryArgs
    default_safety = Safety.READ_ONLY

    def paths(self, args: ListDirectoryArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def describe(self, args: ListDirectoryArgs, ctx: ToolContext) -> Preview:
        path = ctx.resolve(args.path)
        return Preview(title=f"List {display_path(path, ctx.cwd)}", locations=[location(path)])

    async def run(self, args: ListDirectoryArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        try:
            names = await anyio.to_thread.run_sync(_list, path)
        except FileNotFoundError:
            raise ToolError(f"Directory not found: {shown}.") from None
        except NotADirectoryError:
            raise ToolError(f"{shown} is a file, not a directory; use read_file.") from None
        if not names:
            return ToolResult(ok=True, output=f"({shown} is empty.)")
        out = names[:MAX_LIST_ENTRIES]
        if len(names) > MAX_LIST_ENTRIES:
            out.append(
                f"\n[Showed {MAX_LIST_ENTRIES} of {len(names)} entries; use find_path with a "
                "pattern to narrow down.]"
            )
        return ToolResult(ok=True, output="\n".join(out))


def _list(path: Path) -> list[str]:
    with os.scandir(path) as it:
        entries = sorted(it, key=lambda e: e.name)
    return [e.name + "/" if e.is_dir() else e.name for e in entries if e.name != ".git"]


# ---------------------------------------------------------------------------------------------
# write_file and edit_file


@dataclass(frozen=True)
class Prepared:
    """The text a change was computed from (None: the file did not exist)."""

    text: str | None


async def _current(
    ctx: ToolContext, path: Path, shown: str, binary_ok: bool = False, hint: str = ""
) -> Current:
    """The file as a change finds it; ToolError for folders, FIFOs and devices, and for files
    that are not UTF-8 text (unless `binary_ok`: then their text is None, as if missing)."""
    try:
        return await ctx.files.current(path)
    except IsADirectoryError:
        raise ToolError(f"{shown} is a directory.") from None
    except NotAFile as exc:
        raise ToolError(f"{shown} is {exc.what}, not a regular file; it was not opened.") from None
    except NotText as exc:
        if binary_ok:
            return Current(None)
        raise ToolError(
            f"{shown} {exc.describe()}; editing it as text would damage it.{hint}"
        ) from None


async def _unchanged_since(ctx: ToolContext, path: Path, shown: str, preview: Preview) -> Current:
    """The file now, after checking it is the text the previewed change was made from."""
    current = await _current(ctx, path, shown)
    prepared = preview.state
    if isinstance(prepared, Prepared) and current.text != prepared.text:
        what = (
            "was deleted"
            if current.text is None
            else "appeared"
            if prepared.text is None
            else "changed"
        )
        raise ToolError(
            f"{shown} {what} since this change was prepared, so it was not written. Read the "
            "file again and redo the change on its current text."
        )
    return current


def _check_seen(ctx: ToolContext, path: Path, shown: str, current: Current) -> None:
    """write_file replaces every line: refuse unless the model saw the file's current text."""
    if current.text is None:
        return  # a new file (or one deleted since): nothing to lose
    seen = ctx.seen.get(path)
    if seen is None:
        raise ToolError(
            f"{shown} already exists and you have not read it in this session, so it was not "
            "overwritten. Read it first with read_file, then write again (or change part of it "
            "with edit_file)."
        )
    if not seen.still_matches(current.text, current.stat):
        raise ToolError(
            f"{shown} changed since you read it at {seen.when()}, so it was not overwritten. "
            "Read it again with read_file and redo the change on its current text."
        )


async def _write(ctx: ToolContext, path: Path, text: str, old: str | None) -> None:
    """Write and remember the written text as seen by the model (it produced it). `old` is
    the text it replaces (None: no text file there), kept for /undo."""
    change = await ctx.changes.before_write(path, old)
    try:
        st = await ctx.files.write_text(path, text)
    except WriteFailed as exc:
        raise ToolError(str(exc)) from None
    ctx.changes.done(change, text)
    ctx.seen.saw_text(path, text, st)


def _diff(path: Path, old: str | None, new: str) -> DiffItem:
    return DiffItem(path=printable(str(path)), old_text=old, new_text=new)


class WriteFileArgs(BaseModel):
    path: str = Field(description="The file to write, relative to the project root or absolute.")
    content: str = Field(description="The complete new text of the file.")
    overwrite_binary: bool = Field(
        False,
        description=(
            "Only to replace a file that is binary or not UTF-8 text, when the user asked for "
            "that: its current bytes are lost. Leave false otherwise."
        ),
    )


class WriteFile(OneShotTool[WriteFileArgs]):
    name = "write_file"
    description = (
        "Create a file, or replace all of an existing file's text. Missing parent folders are "
        "created. An existing file must have been read with read_file first (and not changed "
        "since). To change part of a file, prefer edit_file."
    )
    kind = "edit"
    Args = WriteFileArgs
    default_safety = Safety.MUTATING

    def paths(self, args: WriteFileArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def describe(self, args: WriteFileArgs, ctx: ToolContext) -> Preview:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        try:
            current = await _current(ctx, path, shown)
        except Exception:  # execute reports the problem; a preview never fails
            return Preview(title=f"Write {shown}", locations=[location(path)])
        old = current.text
        try:
            _check_seen(ctx, path, shown, current)
            refused = None
        except ToolError as exc:  # not worth a permission question: it would be refused
            refused = str(exc)
        return Preview(
            title=f"{'Create' if old is None else 'Write'} {shown}",
            locations=[location(path, first_changed_line(old or "", args.content))],
            content=[_diff(path, old, args.content)],
            refused=refused,
        )

    async def run(self, args: WriteFileArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        hint = (
            " Only if the user asked to replace it whole, call write_file again with "
            "overwrite_binary=true."
        )
        current = await _current(ctx, path, shown, binary_ok=args.overwrite_binary, hint=hint)
        _check_seen(ctx, path, shown, current)
        old = current.text
        where = [location(path, first_changed_line(old or "", args.content))]
        if old == args.content:
            ctx.seen.saw_text(path, old, current.stat)
            return ToolResult(ok=True, output=f"{shown} already has this content; nothing written.")
        existed = old is not None or await anyio.Path(path).exists()
        await _write(ctx, path, args.content, old)
        n = count_lines(args.content)
        verb = "Wrote" if existed else "Created"
        return ToolResult(
            ok=True,
            output=f"{verb} {shown} ({n} line{'s' * (n != 1)}).",
            content=[_diff(path, old, args.content)],
            locations=where,
        )


class EditFileArgs(BaseModel):
    path: str = Field(description="The file to edit, relative to the project root or absolute.")
    old_string: str = Field(
        description=(
            "The exact text to replace, as it is in the file: same whitespace and indentation, "
            "without the line numbers read_file shows. It must occur exactly once unless "
            "replace_all is true; include a few surrounding lines to make it unique. Empty only "
            "to create a new file."
        )
    )
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(
        False, description="Replace every occurrence of old_string instead of exactly one."
    )


class EditFile(OneShotTool[EditFileArgs]):
    name = "edit_file"
    description = (
        "Replace text in a file: old_string, which must occur exactly once (or set "
        "replace_all), becomes new_string. Read the file first so old_string matches exactly."
    )
    kind = "edit"
    Args = EditFileArgs
    default_safety = Safety.MUTATING

    def paths(self, args: EditFileArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def describe(self, args: EditFileArgs, ctx: ToolContext) -> Preview:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        preview = Preview(title=f"Edit {shown}", locations=[location(path)])
        try:
            old = (await _current(ctx, path, shown)).text
            preview.state = Prepared(old)
            new, _ = apply_edit(old, args, shown)
        except ToolError as exc:  # an edit that cannot apply is not worth a question
            preview.refused = str(exc)
            return preview
        except Exception:  # execute fails with the reason; a preview never fails
            return preview
        preview.locations = [location(path, first_changed_line(old or "", new))]
        preview.content = [_diff(path, old, new)]
        return preview

    async def run(self, args: EditFileArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        old = (await _unchanged_since(ctx, path, shown, preview)).text
        new, count = apply_edit(old, args, shown)
        await _write(ctx, path, new, old)
        line, last = changed_lines(old or "", new)
        lines = lines_of(new)
        first_shown = max(1, line - SNIPPET_CONTEXT)
        last_shown = min(len(lines), last + SNIPPET_CONTEXT, first_shown + 40)
        snippet = "\n".join(numbered(lines[first_shown - 1 : last_shown], first_shown))
        what = "Created" if old is None else "Edited"
        times = f", {count} replacements" if count > 1 else ""
        now = f" Lines {first_shown}-{last_shown} now:\n{snippet}" if lines else " It is empty now."
        return ToolResult(
            ok=True,
            output=f"{what} {shown}{times}.{now}",
            content=[_diff(path, old, new)],
            locations=[location(path, line)],
        )


def _with_eol(text: str, eol: str) -> str:
    text = text.replace("\r\n", "\n")
    return text.replace("\n", eol) if eol != "\n" else text


def apply_edit(old: str | None, args: EditFileArgs, shown: str) -> tuple[str, int]:
    """The file's new text and how many replacements made it; ToolError says why not."""
    find, put = args.old_string, args.new_string
    if find == put:
        raise ToolError("old_string and new_string are the same; there is nothing to change.")
    if not find:
        if old:
            raise ToolError(
                f"old_string is empty, which only creates a new file, and {shown} already has "
                "text. Give the text to replace, or use write_file to replace the whole file."
            )
        return put, 1
    if old is None:
        raise ToolError(
            f"File not found: {shown}. To create it, use write_file (or edit_file with an "
            "empty old_string)."
        )
    # Keep the file's line endings: the model usually writes "\n" even where the file has
    # "\r\n", so match with the file's endings when the text as given is not found.
    crlf = old.count("\r\n")
    eol = "\r\n" if crlf and crlf >= old.count("\n") - crlf else "\n"
    put = _with_eol(put, eol)
    count = old.count(find)
    if count == 0 and _with_eol(find, eol) != find:
        find = _with_eol(find, eol)
        count = old.count(find)
    if count == 0:
        raise ToolError(_not_found(old, args.old_string, shown))
    if count > 1 and not args.replace_all:
        lines: list[str] = []
        at = old.find(find)
        while at >= 0 and len(lines) < 10:
            lines.append(str(old.count("\n", 0, at) + 1))
            at = old.find(find, at + len(find))
        raise ToolError(
            f"old_string occurs {count} times in {shown} (at lines {', '.join(lines)}). Include "
            "more of the surrounding text to pick one, or set replace_all to change them all."
        )
    return old.replace(find, put, -1 if args.replace_all else 1), count


def _not_found(text: str, find: str, shown: str) -> str:
    reason = (
        f"old_string was not found in {shown}. It must match the file exactly, including "
        "whitespace and indentation, without read_file's line numbers. Read the file again to "
        "see its current text."
    )
    first = next((line.strip() for line in find.split("\n") if line.strip()), "")
    for n, line in enumerate(lines_of(text), 1):
        if first and first in line:
            return f"{reason} (Its first line appears at line {n}; the difference is after it.)"
    return reason


# ---------------------------------------------------------------------------------------------
# delete_path and move_path


def _refuse_root(path: Path, ctx: ToolContext, shown: str, verb: str) -> None:
    real, cwd_real = Path(os.path.realpath(path)), Path(os.path.realpath(ctx.cwd))
    if ctx.cwd.is_relative_to(path) or (cwd_real.is_relative_to(real) and not path.is_symlink()):
        raise ToolError(f"Refusing to {verb} {shown}: it is the project folder or contains it.")


class DeletePathArgs(BaseModel):
    path: str = Field(
        description="The file or folder to delete; a folder is deleted with all it contains."
    )


class DeletePath(OneShotTool[DeletePathArgs]):
    name = "delete_path"
    description = (
        "Delete a file, or a folder with everything in it (the user can take it back with /undo)."
    )
    kind = "delete"
    Args = DeletePathArgs
    default_safety = Safety.DESTRUCTIVE

    def paths(self, args: DeletePathArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def describe(self, args: DeletePathArgs, ctx: ToolContext) -> Preview:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        preview = Preview(title=f"Delete {shown}", locations=[location(path)])
        if not path.is_symlink() and await anyio.Path(path).is_dir():
            preview.content = [ContentItem.of(f"Deletes the folder {shown} and all it contains.")]
        return preview

    async def run(self, args: DeletePathArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        path = ctx.resolve(args.path)
        shown = display_path(path, ctx.cwd)
        _refuse_root(path, ctx, shown, "delete")

        def delete() -> str:
            if path.is_symlink() or not path.is_dir():
                path.unlink()  # a link goes, never what it points to
                return f"Deleted {shown}."
            shutil.rmtree(path)
            return f"Deleted the folder {shown} and all it contained."

        change = await ctx.changes.before_delete(path)
        try:
            output = await anyio.to_thread.run_sync(delete)
        except FileNotFoundError:
            raise ToolError(f"Nothing to delete: {shown} does not exist.") from None
        ctx.changes.done(change)
        return ToolResult(ok=True, output=output)


async def _refuse_unsaved_buffer(ctx: ToolContext, path: Path, shown: str) -> None:
    """A path not on disk may still be an editor buffer holding the user's unsaved text (a
    file never saved, or one deleted that the editor kept open): never move over it."""
    if not ctx.files.via_editor or await anyio.to_thread.run_sync(os.path.lexists, path):
        return  # on disk: the move's own check refuses it
    if (await _current(ctx, path, shown)).text is not None:
        raise ToolError(
            f"{shown} is open in the editor with unsaved text (not on disk), and move_path "
            "never overwrites. Choose another destination, or ask the user to save or close it."
        )


class MovePathArgs(BaseModel):
    source: str = Field(description="The file or folder to move or rename.")
    destination: str = Field(
        description="Its new path, which must not exist yet; missing parent folders are created."
    )


class MovePath(OneShotTool[MovePathArgs]):
    name = "move_path"
    description = (
        "Move or rename a file or folder. Never overwrites: the destination must not exist."
    )
    kind = "move"
    Args = MovePathArgs
    default_safety = Safety.DESTRUCTIVE

    def paths(self, args: MovePathArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.source), ctx.resolve(args.destination)]

    async def describe(self, args: MovePathArgs, ctx: ToolContext) -> Preview:
        source, destination = self.paths(args, ctx)
        return Preview(
            title=f"Move {display_path(source, ctx.cwd)} → {display_path(destination, ctx.cwd)}",
            locations=[location(destination)],
        )

    async def run(self, args: MovePathArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        source, destination = self.paths(args, ctx)
        src, dst = display_path(source, ctx.cwd), display_path(destination, ctx.cwd)
        _refuse_root(source, ctx, src, "move")
        if destination.is_relative_to(source):
            raise ToolError(f"Cannot move {src} into itself ({dst}).")

        def move() -> None:
            if not os.path.lexists(source):
                raise ToolError(f"Nothing to move: {src} does not exist.")
            if os.path.lexists(destination):
                raise ToolError(
                    f"{dst} already exists and move_path never overwrites. Delete it first or "
                    "choose another destination."
                )
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(source, destination)  # a rename, or copy and delete across devices

        await _refuse_unsaved_buffer(ctx, destination, dst)
        change = await ctx.changes.before_move(source, destination)
        await anyio.to_thread.run_sync(move)
        ctx.changes.done(change)
        return ToolResult(
            ok=True, output=f"Moved {src} to {dst}.", locations=[location(destination)]
        )
