"""Questions on the user's terminal: permission requests during `heron exec`."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, TextIO

from agent.terminal.trace import (
    BOLD,
    YELLOW,
    Painter,
    content_text,
    unified_diff,
    use_colour,
    visible,
)

# Answer keys, in the order they are offered, by permission option kind.
KEYS = {"allow_once": "y", "allow_always": "a", "reject_once": "n", "reject_always": "r"}


class Terminal:
    """The controlling terminal, opened directly so that a prompt piped on stdin does not
    stop us from asking, and a redirected stdout never receives a question."""

    def __init__(self, reader: TextIO, writer: TextIO) -> None:
        self.reader = reader
        self.writer = writer
        self.paint = Painter(use_colour(writer))

    @classmethod
    def open(cls) -> Terminal | None:
        """The terminal, if a user is at one (stdin or stderr is a TTY); None otherwise."""
        if not (sys.stdin.isatty() or sys.stderr.isatty()):
            return None
        try:
            reader = open("/dev/tty", encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError:
            return None
        try:
            writer = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115
        except OSError:
            reader.close()
            return None
        return cls(reader, writer)

    def close(self) -> None:
        for stream in (self.reader, self.writer):
            with contextlib.suppress(OSError):
                stream.close()

    def say(self, text: str = "") -> None:
        self.writer.write(text + "\n")
        self.writer.flush()

    def ask(self, question: str) -> str:
        """One line from the user; EOF (Ctrl-D) reads as an empty answer."""
        self.writer.write(question)
        self.writer.flush()
        line = self.reader.readline()
        if not line:
            self.writer.write("\n")
        return line.strip()

    def ask_permission(self, params: dict[str, Any]) -> str | None:
        """Show what the tool call would do, ask; returns the chosen option id (None: reject)."""
        call = params.get("toolCall") or {}
        options = [o for o in params.get("options") or [] if o.get("kind") in KEYS]
        paint = self.paint
        self.say()
        title = visible(str(call.get("title")), newlines=False)
        self.say(paint("Heron wants to: ", BOLD, YELLOW) + paint(title, BOLD))
        for line in describe(call, paint):
            self.say("  " + line)
        choices = {KEYS[o["kind"]]: o for o in options}
        menu = "   ".join(
            f"[{KEYS[o['kind']]}] {visible(str(o.get('name', o['kind'])), newlines=False)}"
            for o in options
        )
        self.say("  " + menu)
        keys = "/".join(choices)
        while True:
            answer = self.ask(f"Allow? [{keys}] (n): ").lower() or "n"
            if answer in choices:
                return str(choices[answer]["optionId"])
            if answer == "n":  # no reject option offered: refusing is still an answer
                return None
            self.say(f"  Please answer one of {keys}.")


def describe(call: dict[str, Any], paint: Painter) -> list[str]:
    """The lines that show what a call would change or run."""
    lines: list[str] = []
    for item in call.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "diff":
            diff = unified_diff(
                str(item.get("path")), item.get("oldText"), item.get("newText") or "", paint
            )
            lines += diff.splitlines() or [visible(f"(no change to {item.get('path')})")]
    raw = call.get("rawInput")
    if isinstance(raw, dict) and isinstance(raw.get("command"), str):
        # The command exactly as it will run: a \r or an escape sequence in it is shown, not
        # obeyed, or `rm -rf ~ #\r\x1b[2Kls` would read as `ls`.
        lines += [paint("$ ", BOLD) + line for line in visible(raw["command"]).split("\n")]
        # Heron's notes beside it (what sandboxed commands changed, what "always" covers);
        # the command itself, fenced, was just shown.
        notes = [item for item in call.get("content") or [] if not _fenced_text(item)]
        if text := content_text(notes):
            lines += visible(text).split("\n")[:40]
    elif not lines:
        text = content_text(call.get("content"))
        if text:
            lines += visible(text).split("\n")[:20]
        elif raw:
            lines.append(visible(json.dumps(raw, ensure_ascii=False)[:500]))
    return lines


def _fenced_text(item: Any) -> bool:
    block = item.get("content") if isinstance(item, dict) else None
    return isinstance(block, dict) and str(block.get("text", "")).startswith("```")
