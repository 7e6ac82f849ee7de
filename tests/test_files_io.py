"""agent.files.disk and seen, called directly: streamed reads, encodings, special files, seen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.files import disk
from agent.files.disk import NotAFile, NotText, WriteFailed
from agent.files.seen import SeenFiles


def test_read_lines_streams_and_cuts_long_lines(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"one\n" + b"z" * 5000 + b"\nthree\r\nfour")
    got = disk.read_lines(path, 1, 10, 1 << 20, 100)
    assert got.lines == ["one", "z" * 100, "three\r", "four"]
    assert got.cut and not got.more and got.total == 4
    got = disk.read_lines(path, 3, 1, 1 << 20, 100)
    assert got.lines == ["three\r"] and got.more and got.total is None


def test_read_lines_guesses_the_encoding_of_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("ok\ncafé\n".encode("latin-1"))
    got = disk.read_lines(path, 1, 10, 1 << 20, 1 << 20)
    assert got.encoding == "Windows-1252" and got.lines == ["ok", "café"]
    problem = disk.text_problem(path)
    assert problem is not None and not problem.binary
    with pytest.raises(NotText):
        disk.read_text(path)


def test_special_files_are_refused_before_opening(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(NotAFile, match="FIFO"):
        disk.open_regular(tmp_path / "p")
    with pytest.raises(NotAFile, match="character device"):
        disk.open_regular("/dev/null")


def test_a_failed_write_leaves_the_original_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("original\n")

    def full(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(disk.os, "write", full)
    with pytest.raises(WriteFailed, match=r"No space left on device.*left as it was"):
        disk.write_text(path, "new\n")
    assert path.read_text() == "original\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_seen_whole_file_uses_the_digest_and_a_part_also_the_stat(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("a\nb\nc\n")
    seen = SeenFiles()
    seen.saw_text(path, "a\nb\nc\n", os.stat(path))
    record = seen.get(path)
    assert record is not None
    assert record.still_matches("a\nb\nc\n", None)
    assert not record.still_matches("a\nB\nc\n", os.stat(path))
    assert not record.still_matches("a\nb\nc\nd\n", os.stat(path))
    st = os.stat(path)
    seen.saw_lines(path, ["a"], 1, False, st=st)
    part = seen.get(path)
    assert part is not None and part.still_matches("a\nb\nc\n", st)
    path.write_text("a\nb\nX\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert not part.still_matches("a\nb\nX\n", os.stat(path))  # changed where it was not seen
