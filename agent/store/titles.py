"""A session's title: from the first real request, in a few words.

A slash command (`/help`, `/mode ask`) is not a request, so it never titles a session. A pasted
diff or log is described (`Diff of a.py, b.py`, `Traceback: KeyError: 'x'`) rather than shown by
its first line, unless the user wrote a line of their own before it.
"""

from __future__ import annotations

import re
from typing import Any

TITLE_CHARS = 60

# `/name` or `/name args`: a command (a path such as `/etc/hosts` has a second slash).
_COMMAND = re.compile(r"/[A-Za-z][\w.:-]*(\s|$)")
_DIFF_FILE = re.compile(r"^(?:\+\+\+ (?:b/)?|diff --git a/\S+ b/)(\S+)")
_DIFF_START = re.compile(r"^(diff --git |--- |\+\+\+ |@@ |Index: )")
_LOG_LINE = re.compile(
    r"^\s*(\[?\d{4}-\d\d-\d\d|\[?\d\d:\d\d:\d\d|\[?(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b)"
)
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*")


def first_request_text(transcript: list[dict[str, Any]]) -> str:
    """The text of the first user message that is a request (not a slash command)."""
    for update in transcript:
        content = update.get("content") or {}
        if update.get("sessionUpdate") != "user_message_chunk":
            continue
        if content.get("type") == "text":
            text = content.get("text", "").strip()
            if text and not _COMMAND.match(text):
                return text
        elif content.get("type") == "resource_link" and (
            name := content.get("title") or content.get("name")
        ):
            return str(name)
    return ""


def make_title(text: str) -> str:
    """A short title for a request: its first line of prose, or a description of what was
    pasted; cut on a word boundary near TITLE_CHARS."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return _shorten(_describe(lines) or (lines[0] if lines else ""))


def _describe(lines: list[str]) -> str | None:
    """A description of a pasted diff or log that starts the text; None for prose."""
    if not lines:
        return None
    if _DIFF_START.match(lines[0]):
        files = list(dict.fromkeys(m.group(1) for ln in lines if (m := _DIFF_FILE.match(ln))))
        files = [f for f in files if f != "/dev/null"]
        return f"Diff of {', '.join(files)}" if files else "A diff"
    if lines[0].startswith("Traceback (most recent call last)"):
        raised = next((ln for ln in reversed(lines) if _EXCEPTION.match(ln)), None)
        return f"Traceback: {raised}" if raised else "A Python traceback"
    logged = sum(bool(_LOG_LINE.match(ln)) for ln in lines[:20])
    if _LOG_LINE.match(lines[0]) and len(lines) >= 3 and logged * 2 > min(len(lines), 20):
        worst = next((ln for ln in lines if re.search(r"\b(ERROR|FATAL|Exception)\b", ln)), None)
        return f"Log: {_strip_stamp(worst)}" if worst else f"A log of {len(lines)} lines"
    return None


def _strip_stamp(line: str) -> str:
    """The log line without its leading date, time and brackets."""
    return re.sub(r"^[\[\]\d\s:.,TZ+-]*", "", line) or line


def _shorten(line: str) -> str:
    line = re.sub(r"\s+", " ", line)
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS]
    space = cut.rfind(" ")
    if space >= TITLE_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:-") + "…"
