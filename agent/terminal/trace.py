"""Session updates → the answer on stdout and a compact trace of the work on stderr.

The trace is one line per tool call step (running, done, failed), the thoughts dimmed and the
plan when it changes. Colours only on a terminal; `--json` bypasses all of this.

Everything shown comes from the model (titles, commands, diffs, thoughts), so control characters
are shown escaped (`visible`): a carriage return or an escape sequence must not rewrite what the
terminal shows, least of all the command a permission question is about.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from typing import Any, TextIO

DIM, BOLD, RED, GREEN, YELLOW, CYAN, RESET = (
    "\033[2m",
    "\033[1m",
    "\033[31m",
    "\033[32m",
    "\033[33m",
    "\033[36m",
    "\033[0m",
)


# C0 and C1 controls (tab and newline are dealt with apart), DEL, zero-width characters, bidi
# embeddings, overrides and isolates, line and paragraph separators.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_HIDDEN_OR_NEWLINE = re.compile(f"[\n\t]|{_HIDDEN.pattern}")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, newlines: bool = True) -> str:
    """`text` with every character that could move the cursor or hide text escaped (`\\x1b`);
    newlines and tabs kept unless `newlines` is False (a title, one line)."""
    return (_HIDDEN if newlines else _HIDDEN_OR_NEWLINE).sub(_escape, text)


def use_colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


class Painter:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, *styles: str) -> str:
        if not self.colour or not styles:
            return text
        return "".join(styles) + text + RESET


class Trace:
    """Renders a turn's updates. `out` gets the answer text, `err` everything else."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.paint = Painter(use_colour(self.err))
        self.calls: dict[str, dict[str, Any]] = {}  # toolCallId → what we know of the call
        self.quiet: set[str] = set()  # calls whose end was already explained (refusals)
        self.out_open = False  # the answer text does not end with a newline yet
        self.thinking = False  # a thought line is open on stderr
        # The answer and the trace end up in one place (a terminal, or `2>&1` into one pipe or
        # file): a trace line must then start on a line of its own.
        self.one_place = _one_place(self.out, self.err)

    # -- answer text -------------------------------------------------------------------------

    def answer(self, text: str) -> None:
        self._end_thought()
        if self.out.isatty():  # piped, the text stays exactly as the model wrote it
            text = visible(text)
        self.out.write(text)
        self.out.flush()
        self.out_open = not text.endswith("\n") if text else self.out_open

    def finish(self) -> None:
        """End the output cleanly: the answer ends with a newline, the thought line is closed."""
        self._end_thought()
        if self.out_open:
            self.out.write("\n")
            self.out.flush()
            self.out_open = False

    # -- stderr lines ------------------------------------------------------------------------

    def line(self, text: str) -> None:
        self._end_thought()
        self._below_the_answer()
        self.err.write(text + "\n")
        self.err.flush()

    def _below_the_answer(self) -> None:
        if self.out_open and self.one_place:
            # Start the trace line below the answer so far, never on the same line.
            self.out.write("\n")
            self.out.flush()
            self.out_open = False

    def note(self, text: str) -> None:
        self.line(self.paint(visible(text), YELLOW))

    def info(self, text: str) -> None:
        self.line(self.paint(visible(text), DIM))

    def error(self, text: str) -> None:
        self.line(self.paint(f"heron: {visible(text)}", RED, BOLD))

    def _thought(self, text: str) -> None:
        if not self.thinking:
            self._below_the_answer()
            self.err.write(self.paint("thinking: ", DIM))
            self.thinking = True
        self.err.write(self.paint(visible(text), DIM))
        self.err.flush()

    def _end_thought(self) -> None:
        if self.thinking:
            self.err.write("\n")
            self.err.flush()
            self.thinking = False

    # -- updates -----------------------------------------------------------------------------

    def update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        content = update.get("content")
        text = content.get("text", "") if isinstance(content, dict) else ""
        if kind == "agent_message_chunk":
            self.answer(text)
        elif kind == "agent_thought_chunk":
            self._thought(text)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif kind == "plan":
            self._plan(update.get("entries") or [])

    def _tool(self, update: dict[str, Any]) -> None:
        call_id = str(update.get("toolCallId"))
        call = self.calls.setdefault(call_id, {"title": "tool", "status": "pending"})
        for key in ("title", "kind", "content", "rawInput", "rawOutput", "locations"):
            if update.get(key) is not None:
                call[key] = update[key]
        status = update.get("status")
        if status is None or status == call.get("shown"):
            return
        call["shown"] = status
        title = visible(str(call["title"]), newlines=False)
        if status == "in_progress":
            self.line(self.paint("▸ ", CYAN) + title + self._diff_summary(call))
        elif status == "completed":
            self.line(self.paint("✓ ", GREEN) + title + self._diff_summary(call))
        elif status == "failed" and call_id not in self.quiet:
            reason = visible(first_line(content_text(update.get("content"))), newlines=False)
            self.line(self.paint("✗ ", RED) + title + (self.paint(f": {reason}", RED)))
            for last in output_tail(call.get("rawOutput")):  # a failed command's last lines
                self.line(self.paint("  │ ", DIM) + visible(last, newlines=False))

    def _diff_summary(self, call: dict[str, Any]) -> str:
        added = removed = 0
        for item in call.get("content") or []:
            if isinstance(item, dict) and item.get("type") == "diff":
                plus, minus = count_changes(item.get("oldText"), item.get("newText") or "")
                added, removed = added + plus, removed + minus
        if not (added or removed):
            return ""
        return " " + self.paint(f"+{added}", GREEN) + " " + self.paint(f"-{removed}", RED)

    def _plan(self, entries: list[dict[str, Any]]) -> None:
        marks = {"completed": "[x]", "in_progress": "[>]"}
        self.line(self.paint("Plan:", BOLD))
        for entry in entries:
            mark = marks.get(entry.get("status", ""), "[ ]")
            self.line(f"  {mark} {visible(str(entry.get('content', '')), newlines=False)}")


def _one_place(out: TextIO, err: TextIO) -> bool:
    """Whether what is written to `out` and `err` is read in one place: both on terminals, or
    both the same pipe or file."""
    try:
        a, b = os.fstat(out.fileno()), os.fstat(err.fileno())
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) or (out.isatty() and err.isatty())
    except (OSError, ValueError, AttributeError):  # not real files (tests' StringIO)
        return False


def content_text(content: Any) -> str:
    """The text of a tool call's `content` list (its ordinary text blocks)."""
    parts = []
    for item in content or []:
        if isinstance(item, dict) and item.get("type") == "content":
            block = item.get("content") or {}
            if block.get("type") == "text":
                parts.append(block.get("text", ""))
    return "\n".join(parts)


def output_tail(raw_output: Any, lines: int = 5, limit: int = 160) -> list[str]:
    """The last lines of a command's output, from its call's `rawOutput` (`output`, what the
    model read), each cut at `limit` characters."""
    output = raw_output.get("output") if isinstance(raw_output, dict) else None
    if not isinstance(output, str) or output == "(no output)":
        return []
    tail = [line for line in output.rstrip().split("\n") if line.strip()][-lines:]
    return [line if len(line) <= limit else line[: limit - 1] + "…" for line in tail]


def first_line(text: str, limit: int = 160) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def count_changes(old: str | None, new: str) -> tuple[int, int]:
    added = removed = 0
    for line in difflib.unified_diff((old or "").splitlines(), new.splitlines(), n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def unified_diff(path: str, old: str | None, new: str, paint: Painter) -> str:
    """A diff for a permission question, coloured like git's."""
    lines = difflib.unified_diff(
        (old or "").splitlines(),
        new.splitlines(),
        fromfile=path if old is not None else "/dev/null",
        tofile=path,
        lineterm="",
    )
    styled = []
    for line in map(visible, lines):
        if line.startswith(("+++", "---")):
            styled.append(paint(line, BOLD))
        elif line.startswith("+"):
            styled.append(paint(line, GREEN))
        elif line.startswith("-"):
            styled.append(paint(line, RED))
        elif line.startswith("@@"):
            styled.append(paint(line, CYAN))
        else:
            styled.append(line)
    return "\n".join(styled)
