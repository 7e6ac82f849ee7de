"""grep without rg: the search in pure Python, run in a child process Heron can kill.

Python's `re` backtracks: a pattern like `(a+)+$` can take longer than the universe on one line,
and the matcher cannot be interrupted, not even by a cancelled turn, while it holds the GIL
the whole server needs. So `agent.tools.search` runs this module as a separate interpreter
(`python -I -S`, importing nothing beyond the standard library and `agent.files.paths`),
sends it the search as JSON on stdin, reads the hits as JSON from stdout, and kills it on
cancel or when its time budget is spent.

Only regular files are opened (without blocking, then checked): a FIFO or a device in the
workspace would otherwise block the search forever or feed it without end.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from pathlib import Path

from agent.files.paths import Tree, glob_filter, read_regular

MAX_GREP_LINE_CHARS = 500

Line = tuple[int, bool, str]  # line number, is a match (else context), text


class Hits:
    """Matches in file order, stopping after `limit` matches (and their after-context).

    A plain class: `dataclasses` (with `inspect`) would double the child's start-up time."""

    def __init__(self, limit: int, context: int) -> None:
        self.limit = limit
        self.context = context
        self.files: list[tuple[str, list[Line]]] = []
        self.matches = 0
        self.truncated = False

    def add(self, rel: str, lines: list[Line]) -> bool:
        """Take one file's lines; False once there is no room for more."""
        count = sum(is_match for _, is_match, _ in lines)
        if not count:
            return True
        room = self.limit - self.matches
        if count > room:
            self.truncated = True
            if room == 0:
                return False
            kept: list[Line] = []
            seen = last = 0
            for n, is_match, text in lines:
                if (is_match and seen == room) or (seen == room and n > last + self.context):
                    break
                if is_match:
                    seen, last = seen + 1, n
                kept.append((n, is_match, text))
            lines, count = kept, room
        self.files.append((rel, lines))
        self.matches += count
        return not self.truncated


def grep(root: Path, regex: re.Pattern[str], glob: str | None, hits: Hits) -> None:
    """Search the file or folder `root` into `hits`, in the walk's order."""
    if root.is_dir():
        files = Tree(root).walk(glob_filter(glob) if glob else None)
    else:
        root, files = root.parent, iter([root.name])
    base = str(root) + os.sep
    for rel in files:
        lines = search_file(base + rel, regex, hits.context)
        if lines and not hits.add(rel, lines):
            return


def search_file(path: str, regex: re.Pattern[str], context: int) -> list[Line] | None:
    data = read_regular(path)
    if data is None:
        return None
    text = decode(data)
    if text is None or not regex.search(text):  # one pass over the whole text rules most out
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    found = [i for i, line in enumerate(lines) if regex.search(line)]
    shown: set[int] = set()
    for i in found:
        shown.update(range(max(0, i - context), min(len(lines), i + context + 1)))
    matched = set(found)
    return [shown_line(i + 1, i in matched, lines[i]) for i in sorted(shown)]


def shown_line(n: int, is_match: bool, text: str) -> Line:
    """A line as shown: without its line ending, and cut when very long."""
    text = text.rstrip("\r\n")
    if len(text) > MAX_GREP_LINE_CHARS:
        text = text[:MAX_GREP_LINE_CHARS] + " […]"
    return n, is_match, text


def decode(data: bytes) -> str | None:
    """The file's text as rg reads it: a BOM picks the encoding; else a NUL byte anywhere
    means binary (skipped), and invalid UTF-8 becomes U+FFFD."""
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace")
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------
# The child process

# Run with `python -I -S -c BOOT <agent dir>`: the packages are stood in for by bare modules,
# so their __init__ (pydantic, anyio...) is not imported.
BOOT = """\
import sys, types
for name in ("agent", "agent.tools", "agent.files"):
    module = types.ModuleType(name)
    module.__path__ = [sys.argv[1] + name[len("agent"):].replace(".", "/")]
    sys.modules[name] = module
from agent.tools.grep_python import serve
serve()
"""


def worker_argv() -> list[str]:
    agent_dir = Path(__file__).resolve().parent.parent
    return [sys.executable, "-I", "-S", "-c", BOOT, str(agent_dir)]


def request(root: Path, pattern: str, flags: int, glob: str | None, hits: Hits) -> bytes:
    return json.dumps(
        {
            "root": os.fsdecode(root),
            "pattern": pattern,
            "flags": flags,
            "glob": glob,
            "limit": hits.limit,
            "context": hits.context,
        }
    ).encode()


def parse_reply(data: bytes, hits: Hits) -> None:
    reply = json.loads(data)
    hits.files = [(rel, [(n, m, text) for n, m, text in lines]) for rel, lines in reply["files"]]
    hits.matches = reply["matches"]
    hits.truncated = reply["truncated"]


def serve() -> None:
    """The child's side: one search from stdin, its hits to stdout."""
    job = json.loads(sys.stdin.buffer.read())
    hits = Hits(job["limit"], job["context"])
    regex = re.compile(job["pattern"], job["flags"])
    grep(Path(job["root"]), regex, job["glob"], hits)
    reply = {"files": hits.files, "matches": hits.matches, "truncated": hits.truncated}
    sys.stdout.buffer.write(json.dumps(reply).encode())
    sys.stdout.buffer.flush()
