"""What the model has seen of each file in this session, so write_file never replaces text
the model has not seen.

A record is taken when read_file shows a file's lines, and when edit_file or write_file
produce its new text; never when a change is only described. write_file over an existing file
needs a record, and the file must still hold what the record says.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from agent.files.disk import text_digest


def lines_of(text: str) -> list[str]:
    """Lines as the editor numbers them: split at "\\n" only, no empty line after the last."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def disk_identity(st: os.stat_result | None) -> tuple[int, ...] | None:
    return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class Seen:
    first: int  # the first line seen (1-based)
    count: int  # how many lines were seen
    to_end: bool  # they reach the end of the file
    digest: str | None  # of those lines joined by "\n"; None when some line was only partly read
    disk: tuple[int, ...] | None  # (dev, ino, size, mtime_ns) when read from the local disk
    at: float  # when (time.time())

    def still_matches(self, text: str, st: os.stat_result | None) -> bool:
        """Whether `text` (the file now; `st` its disk stat, if local) still shows what was seen."""
        lines = lines_of(text)
        if self.to_end and len(lines) != self.first - 1 + self.count:
            return False
        whole = self.first == 1 and self.to_end
        if self.disk is not None and not whole and self.disk != disk_identity(st):
            # Only part of the file was seen: any change on disk may be in the unseen part.
            return False
        if self.digest is None:
            return self.disk is not None and self.disk == disk_identity(st)
        seen = lines[self.first - 1 : self.first - 1 + self.count]
        # The digest, not the stat, decides for a whole file: mtime ticks are too coarse to
        # catch a same-size change made right after the read.
        return text_digest("\n".join(seen)) == self.digest

    def when(self) -> str:
        return time.strftime("%H:%M:%S", time.localtime(self.at))


class SeenFiles:
    """Per session: the path (symlinks resolved) → what the model last saw of it."""

    def __init__(self) -> None:
        self._seen: dict[str, Seen] = {}

    @staticmethod
    def _key(path: Path) -> str:
        return os.path.realpath(path)

    def get(self, path: Path) -> Seen | None:
        return self._seen.get(self._key(path))

    def saw_lines(
        self,
        path: Path,
        lines: list[str],
        first: int,
        to_end: bool,
        *,
        complete: bool = True,
        st: os.stat_result | None = None,
    ) -> None:
        """The model was shown `lines`, starting at line `first`; `complete`: none was cut."""
        digest = text_digest("\n".join(lines)) if complete else None
        self._seen[self._key(path)] = Seen(
            first, len(lines), to_end, digest, disk_identity(st), time.time()
        )

    def saw_text(self, path: Path, text: str, st: os.stat_result | None = None) -> None:
        """The model produced (or was shown) the whole of `text`."""
        self.saw_lines(path, lines_of(text), 1, True, st=st)

    def forget(self, path: Path) -> None:
        self._seen.pop(self._key(path), None)
