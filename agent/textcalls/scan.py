"""Streamed answer text → what the user reads, `<tool_call>` blocks, and where the answer ends.

Markdown is respected: a `<tool_call>` inside a fenced code block or an inline code span is
text (a model explaining the protocol, or quoting a file that contains it), never a call. A
block ends at `</tool_call>`; one still open when another `<tool_call>` begins, or when the
answer ends, is returned as not closed (the caller decides what it was). `<tool_response>`
outside code is where a model starts imitating the protocol, writing the tool's result itself:
the answer ends there, and nothing after it is returned.

Text that may be the start of a tag, a fence or a run of backticks is held back until the next
delta shows what it is. Only new text is searched, so a long block streamed in tiny deltas
costs linear time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
RESPONSE = "<tool_response>"

_TAGS = (OPEN, RESPONSE)
_SIGNIFICANT = re.compile(r"\n|`+|<tool_call>|<tool_response>")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_MAYBE_FENCE = re.compile(r" {0,3}(`*|~*)\Z")  # all of it could still become a fence
_INSIDE = re.compile(r"<tool_call>|</tool_call>|<tool_response>")
_KEEP = max(len(CLOSE), len(OPEN), len(RESPONSE)) - 1  # a tag may start this far back


@dataclass
class Block:
    """The body of a `<tool_call>` block; `closed`: its `</tool_call>` came."""

    body: str
    closed: bool = True


class AnswerEnds:
    """`<tool_response>` outside code: the answer ends here."""


Piece = str | Block | AnswerEnds


class BlockScanner:
    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False
        self._body: list[str] = []  # a block's pieces so far (a block may be 600 kB)
        self._tail = ""  # its last characters, where a tag may be starting
        self._line_start = True
        self._fence: str | None = None  # the marker of the fenced code block we are in
        self._rest_of_line = False  # a fence line: the rest of it is its info string
        self._span = 0  # backticks of the open inline code span (0: none)
        self._ended = False

    def feed(self, text: str) -> list[Piece]:
        """Text (str), blocks and the answer's end, in the order they were written."""
        if self._ended:
            return []
        self._buffer += text
        out: list[Piece] = []
        while self._buffer and not self._ended:
            progressed = self._in_block(out) if self._inside else self._in_text(out)
            if not progressed:
                break
        return out

    def finish(self) -> list[Piece]:
        """The rest: a block still open, text held back."""
        if self._ended:
            return []
        rest, self._buffer = self._buffer, ""
        if self._inside:
            body = "".join(self._body) + rest
            body = body[: len(body) - _partial(body, CLOSE)]  # "…}</tool_" cut short
            self._inside, self._body, self._tail = False, [], ""
            return [Block(body, closed=False)] if body.strip() else []
        return [rest] if rest else []

    def _in_block(self, out: list[Piece]) -> bool:
        window = self._tail + self._buffer
        found = _INSIDE.search(window)
        if found is None:
            self._body.append(self._buffer)
            self._tail, self._buffer = window[-_KEEP:], ""
            return False
        body = "".join(self._body)
        body = body[: len(body) - len(self._tail)] + window[: found.start()]
        self._body, self._tail = [], ""
        self._buffer = window[found.end() :]
        tag = found.group()
        out.append(Block(body, closed=tag == CLOSE))
        if tag == RESPONSE:
            self._end(out)
        elif tag == CLOSE:
            self._inside, self._line_start = False, False
        return True  # OPEN: the next block begins; still inside

    def _in_text(self, out: list[Piece]) -> bool:
        buffer = self._buffer
        if self._line_start:
            if _MAYBE_FENCE.match(buffer):
                return False  # "  ``" may become a fence: wait for more
            self._line_start = False
            fence = _FENCE.match(buffer)
            if fence:
                marker = fence.group(1)
                if self._fence is None:
                    self._fence = marker
                elif marker[0] == self._fence[0] and len(marker) >= len(self._fence):
                    self._fence = None
                self._rest_of_line = True
        if self._fence is not None or self._rest_of_line:
            end = buffer.find("\n")
            if end < 0:
                self._emit(out, buffer)
                return False
            self._emit(out, buffer[: end + 1], keep=buffer[end + 1 :])
            self._rest_of_line, self._line_start = False, True
            return True
        found = _SIGNIFICANT.search(buffer)
        if found is None:
            keep = max(_partial(buffer, tag) for tag in _TAGS)
            self._emit(out, buffer[: len(buffer) - keep], keep=buffer[len(buffer) - keep :])
            return False
        start, end, token = found.start(), found.end(), found.group()
        if token == "\n":
            self._line_start, self._span = True, 0  # an inline span does not cross lines here
        elif token[0] == "`":
            if end == len(buffer):
                self._emit(out, buffer[:start], keep=buffer[start:])  # the run may go on
                return False
            if not self._span:
                self._span = len(token)  # a code span opens
            elif len(token) == self._span:
                self._span = 0  # and closes with a run as long (another length is literal)
        elif not self._span:
            self._emit(out, buffer[:start], keep=buffer[end:])
            if token == OPEN:
                self._inside = True
            else:
                self._end(out)
            return True
        self._emit(out, buffer[:end], keep=buffer[end:])
        return True

    def _emit(self, out: list[Piece], text: str, keep: str = "") -> None:
        if text:
            if out and isinstance(out[-1], str):
                out[-1] += text
            else:
                out.append(text)
        self._buffer = keep

    def _end(self, out: list[Piece]) -> None:
        self._ended, self._inside, self._buffer = True, False, ""
        out.append(AnswerEnds())


def _partial(text: str, tag: str) -> int:
    """How many characters at the end of `text` could begin `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
