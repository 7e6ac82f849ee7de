"""Text files on the local disk: refusing what is not a regular file, streaming reads, and
writes that lose nothing.

Every open goes through `open_regular`, which refuses FIFOs, devices and sockets before
opening them (opening a FIFO blocks until a writer comes, which may be never). Reads are
strict UTF-8: text that is not UTF-8 raises `NotText` with a guess of its encoding, so no
U+FFFD replacement text is ever written back over the original bytes. Writes keep what the
user's file was: through a symlink the target is written and the link kept; a file with other
hard links is rewritten in place (same inode); otherwise a temp file in the same folder, with
the original's owner, group, mode and extended attributes, is renamed over it and the folder
fsync'ed. On any error the original is left as it was.

Everything here blocks: call it in a worker thread.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

SNIFF_BYTES = 8192
CHUNK = 1 << 16


class NotAFile(OSError):
    """The path is a FIFO, device or socket: never opened."""

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(f"{path} is {what}, not a regular file; it was not opened.")
        self.what = what


class NotText(ValueError):
    """The file is not UTF-8 text: binary (a NUL byte), or text in another encoding."""

    def __init__(self, binary: bool, encoding: str | None = None) -> None:
        self.binary = binary
        self.encoding = encoding  # the guess, for text that is not UTF-8
        super().__init__(self.describe())

    def describe(self) -> str:
        if self.binary:
            return "is a binary file"
        return f"is not UTF-8 text (it looks like {self.encoding})"


def special_kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is, in words; None for files and folders."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def check_regular(path: Path | str) -> os.stat_result:
    """The file's stat (symlinks followed). NotAFile for FIFOs, devices and sockets,
    IsADirectoryError for folders, FileNotFoundError when missing."""
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if kind := special_kind(st.st_mode):
        raise NotAFile(path, kind)
    return st


def open_regular(path: Path | str) -> int:
    """A read-only descriptor of a regular file, refused before opening when it is not one.
    O_NONBLOCK: if the path turns into a FIFO between the stat and the open, the open still
    returns at once (and the fstat check refuses it)."""
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if kind := special_kind(st.st_mode):
            raise NotAFile(path, kind)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def guess_encoding(data: bytes) -> str:
    """A best guess for bytes that are not UTF-8: a BOM says, else Windows-1252 (a superset
    of printable Latin-1) when every byte is defined there, else Latin-1."""
    for bom, name in (
        (codecs.BOM_UTF32_LE, "UTF-32"),
        (codecs.BOM_UTF32_BE, "UTF-32"),
        (codecs.BOM_UTF16_LE, "UTF-16"),
        (codecs.BOM_UTF16_BE, "UTF-16"),
    ):
        if data.startswith(bom):
            return name
    try:
        data.decode("cp1252")
        return "Windows-1252"
    except UnicodeDecodeError:
        return "Latin-1"


def _codec(encoding: str) -> str:
    return {"Windows-1252": "cp1252", "Latin-1": "latin-1"}.get(encoding, encoding.lower())


def text_digest(text: str) -> str:
    """The fingerprint of a text as the model saw it (line ends as they are)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ---------------------------------------------------------------------------------------------
# reading


def read_text(path: Path | str) -> tuple[str, os.stat_result]:
    """The whole text of a regular file, strict UTF-8, and its stat. NotText when it is not."""
    fd = open_regular(path)
    with open(fd, "rb", closefd=True) as f:
        st = os.fstat(f.fileno())
        data = f.read()
    if b"\0" in data[:SNIFF_BYTES]:
        raise NotText(binary=True)
    try:
        return data.decode("utf-8"), st
    except UnicodeDecodeError:
        raise NotText(binary=False, encoding=guess_encoding(data)) from None


def text_problem(path: Path | str) -> NotText | None:
    """Why the file on disk is not UTF-8 text, or None (also when it is missing). Reads in
    chunks, so a large file costs time, not memory."""
    try:
        fd = open_regular(path)
    except OSError:
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(fd, "rb", closefd=True) as f:
        head = f.read(SNIFF_BYTES)
        if b"\0" in head:
            return NotText(binary=True)
        chunk = head
        try:
            while chunk:
                decoder.decode(chunk)
                chunk = f.read(CHUNK)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return NotText(binary=False, encoding=guess_encoding(head + chunk))
    return None


@dataclass
class Lines:
    """A stretch of a file's lines, as read_file shows them."""

    lines: list[str]  # without their "\n"; a "\r" before it is kept
    more: bool  # the file goes on after the last line
    total: int | None  # the file's line count, when known (the whole file was read)
    encoding: str | None  # None: UTF-8; else the guessed encoding the lines were decoded with
    cut: bool  # some line was longer than max_line_bytes and only its start is in `lines`
    stat: os.stat_result | None = None


def read_lines(
    path: Path | str, first: int, limit: int, max_bytes: int, max_line_bytes: int
) -> Lines:
    """Lines first..first+limit-1 (1-based) of a local file, reading only as far as needed:
    memory stays bounded by `max_bytes` however large the file or its lines. Lines are split
    at "\\n" only, like the editor numbers them."""
    fd = open_regular(path)
    with open(fd, "rb", closefd=True) as f:
        st = os.fstat(f.fileno())
        if b"\0" in f.read(SNIFF_BYTES):
            raise NotText(binary=True)
        f.seek(0)
        encoding: str | None = None
        out: list[str] = []
        size = n = 0
        cut = skip = False
        while True:
            if skip:  # the rest of an over-long line: only skipped if more lines are wanted
                if len(out) >= limit or size >= max_bytes:
                    return Lines(out, True, None, encoding, cut, st)
                while (rest := f.readline(CHUNK)) and not rest.endswith(b"\n"):
                    pass
                skip = False
            raw = f.readline(max_line_bytes + 1)
            if not raw:
                return Lines(out, False, n, encoding, cut, st)
            n += 1
            long = len(raw) > max_line_bytes
            if long:
                raw = raw[:max_line_bytes]
                cut = skip = True
            if n < first:
                continue
            if len(out) >= limit or (size + len(raw) > max_bytes and out):
                return Lines(out, True, None, encoding, cut, st)
            line = raw.removesuffix(b"\n")
            if encoding is None:
                try:
                    # A cut line may end inside a character: that tail is dropped, not guessed.
                    text = codecs.getincrementaldecoder("utf-8")().decode(line, final=not long)
                except UnicodeDecodeError:
                    encoding = guess_encoding(line)
            if encoding is not None:
                text = line.decode(_codec(encoding), "replace")
            out.append(text)
            size += len(raw)


# ---------------------------------------------------------------------------------------------
# writing


class WriteFailed(Exception):
    """The write did not happen; the original file (if any) is as it was."""


def write_text(path: Path | str, text: str) -> os.stat_result:
    """Replace the text of `path` (creating it and missing parent folders if needed) without
    losing the file's identity or metadata; returns the new file's stat."""
    return write_bytes(path, text.encode("utf-8", "surrogatepass"))


def write_bytes(path: Path | str, data: bytes) -> os.stat_result:
    """`write_text` for bytes (agent.undo puts back files that are not text)."""
    target = Path(os.path.realpath(path))  # through symlinks: the link stays a link
    try:
        st: os.stat_result | None = check_regular(target)
    except FileNotFoundError:
        st = None
    try:
        if st is not None and st.st_nlink > 1:
            _write_in_place(target, data)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            _replace(target, data, st)
        return os.stat(target)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise WriteFailed(
            f"Could not write {path}: {reason}. The file was left as it was."
        ) from exc


def _write_in_place(target: Path, data: bytes) -> None:
    """Rewrite a hard-linked file through its own inode, so every name sees the new text.
    The space is reserved before the first byte changes, so a full disk fails cleanly."""
    fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if data:
            try:
                os.posix_fallocate(fd, 0, len(data))
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            offset += os.pwrite(fd, view[offset:], offset)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(target: Path, data: bytes, st: os.stat_result | None) -> None:
    """Write a temp file beside `target` and rename it over: readers see the old file or the
    new one, never half of one. The temp file is created with the final mode (a new file gets
    0666 less the umask, which os.open applies), so it is never more open than the result."""
    folder = target.parent
    mode = 0o666 if st is None else stat.S_IMODE(st.st_mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for attempt in range(100):
        tmp = folder / f".{target.name}.{os.getpid()}.{attempt}.heron-tmp"
        try:
            fd = os.open(tmp, flags, mode & 0o777)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, "no free temp file name", str(folder))
    try:
        try:
            if st is not None:
                _copy_owner_and_xattrs(fd, target, st)
                os.fchmod(fd, mode)  # exactly the original's, after fchown cleared setuid bits
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _copy_owner_and_xattrs(fd: int, target: Path, st: os.stat_result) -> None:
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except PermissionError:
            # Not root: a member of the file's group can still keep the group.
            with contextlib.suppress(PermissionError):
                os.fchown(fd, -1, st.st_gid)
    try:
        names = os.listxattr(target)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.ENOSYS):
            return
        raise
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(target, name))
        except OSError as exc:
            # security.* and trusted.* need privileges; a file system may not take user.*
            if exc.errno not in (errno.ENOTSUP, errno.EPERM, errno.EACCES, errno.ENOSYS):
                raise


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (os.write may take less than it is given)."""
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.write(fd, view[offset:])
