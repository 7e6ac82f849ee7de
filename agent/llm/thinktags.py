"""Reasoning sent inline as `<think>…</think>` becomes thought deltas, not message text."""

from __future__ import annotations

from agent.llm.events import TextDelta, ThoughtDelta


class ThinkTagSplitter:
    """Reasoning sent inline as `<think>…</think>` at the start of the content (llama.cpp, LM
    Studio or vLLM without a reasoning parser) becomes thought deltas, not message text.

    Tags may be split across chunks, so text that could still be the start of a tag waits.
    """

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self._state = "start"  # start → think → after → text, or start → text
        self._pending = ""

    def feed(self, text: str) -> list[TextDelta | ThoughtDelta]:
        events: list[TextDelta | ThoughtDelta] = []
        self._pending += text
        while self._pending:
            if self._state == "start":
                head = self._pending.lstrip()
                if head.startswith(self.OPEN):
                    self._pending = head[len(self.OPEN) :]
                    self._state = "think"
                elif not head or self.OPEN.startswith(head):
                    break  # may still become "<think>"
                else:
                    self._state = "text"
            elif self._state == "think":
                end = self._pending.find(self.CLOSE)
                if end >= 0:
                    if thought := self._pending[:end]:
                        events.append(ThoughtDelta(thought))
                    self._pending = self._pending[end + len(self.CLOSE) :]
                    self._state = "after"
                    continue
                keep = _partial_suffix(self._pending, self.CLOSE)
                if ready := self._pending[: len(self._pending) - keep]:
                    events.append(ThoughtDelta(ready))
                self._pending = self._pending[len(self._pending) - keep :]
                break
            elif self._state == "after":  # the blank lines between thought and answer
                self._pending = self._pending.lstrip()
                if self._pending:
                    self._state = "text"
            else:
                events.append(TextDelta(self._pending))
                self._pending = ""
        return events

    def flush(self) -> list[TextDelta | ThoughtDelta]:
        """What is still held back when the stream ends."""
        held, self._pending = self._pending, ""
        if not held:
            return []
        return [ThoughtDelta(held) if self._state == "think" else TextDelta(held)]


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a beginning of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
