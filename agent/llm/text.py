"""Text that cannot be encoded must not reach the history.

A model may split an emoji's UTF-16 surrogate pair across two JSON deltas (`"\\ud83d"` then
`"\\ude00"`), or write a lone surrogate. Python keeps such halves in `str`, but they cannot be
encoded as UTF-8, so the next request would fail to serialize and the session would be stuck.
Halves are joined across deltas; what cannot be joined becomes U+FFFD.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class SurrogateJoiner:
    """Streamed text: a high surrogate at the end of a delta waits for its low half."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        if self._held:
            text, self._held = self._held + text, ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._held = text[:-1], text[-1]
        return clean(text)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return clean(held)


def clean_in_place(value: Any) -> Any:
    """Clean every string inside JSON-like `value` (dicts and lists are changed in place)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = clean_in_place(item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = clean_in_place(item)
    return value
