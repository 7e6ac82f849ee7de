"""What is queued for stdout: encoded lines, with streamed text merged while it waits.

A model can stream deltas faster than the editor reads them (a burst arrives in one network
read). Each `agent_message_chunk` or `agent_thought_chunk` of plain text that is queued behind
another of the same kind, session and message (`messageId`), with nothing between them, is
merged into it: the editor
gets fewer, longer notifications, the same text in the same order. Nothing else is merged, and
nothing already taken by the writer changes.

Merged text is never re-encoded: each delta is escaped once (JSON string escaping is per
character, so escaped pieces concatenate to the escaped whole) and a merged line is its
envelope, the pieces and a fixed ending. `size` counts exactly the bytes that will be written.
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from json.encoder import encode_basestring
from typing import Any

log = logging.getLogger("heron.wire")

MERGED_KINDS = frozenset(("agent_message_chunk", "agent_thought_chunk"))
# (session id, kind, message id): what must be equal for two chunks to merge.
_Key = tuple[str, str, str | None]
# The fields of a text chunk's update in the order Heron writes them (`_text_update`).
_FIELDS = (("sessionUpdate", "messageId", "content"), ("sessionUpdate", "content"))
# The end of a text chunk's line: closes text, content, update, params and the message.
_TEXT_END = b'"}}}}\n'


class _Text:
    """A queued text chunk line, still growing: envelope, escaped pieces (the ending is added
    when taken)."""

    __slots__ = ("key", "parts")

    def __init__(self, key: _Key, head: bytes, piece: bytes) -> None:
        self.key = key
        self.parts = [head, piece]


class Outbox:
    def __init__(self) -> None:
        self._entries: deque[bytes | _Text] = deque()
        self.size = 0  # bytes queued
        self._heads: dict[_Key, bytes] = {}

    def __bool__(self) -> bool:
        return bool(self._entries)

    def put(self, message: dict[str, Any]) -> None:
        chunk = _text_chunk(message)
        if chunk is None:
            data = encode(message)
            self._entries.append(data)
            self.size += len(data)
            return
        key, text = chunk
        piece = _escaped(text)
        entries = self._entries
        tail = entries[-1] if entries else None
        if type(tail) is _Text and tail.key == key:
            tail.parts.append(piece)
            self.size += len(piece)
            return
        head = self._head(key)
        entries.append(_Text(key, head, piece))
        self.size += len(head) + len(piece) + len(_TEXT_END)

    def take(self) -> bytes:
        """Everything queued, as the bytes to write; the outbox is then empty."""
        parts: list[bytes] = []
        for entry in self._entries:
            if type(entry) is bytes:
                parts.append(entry)
            else:
                parts += entry.parts  # type: ignore[union-attr]
                parts.append(_TEXT_END)
        self._entries.clear()
        self.size = 0
        return b"".join(parts)

    def _head(self, key: _Key) -> bytes:
        """The line of a text chunk up to its text, exactly as `encode` writes it."""
        head = self._heads.get(key)
        if head is None:
            session_id, kind, message_id = key
            params = {"sessionId": session_id, "update": _text_update(kind, message_id, "")}
            line = encode({"jsonrpc": "2.0", "method": "session/update", "params": params})
            assert line.endswith(_TEXT_END)
            head = line[: -len(_TEXT_END)]
            if len(self._heads) >= 64:  # sessions come and go; a few are enough to keep
                self._heads.clear()
            self._heads[key] = head
        return head


def _text_update(kind: str, message_id: str | None, text: str) -> dict[str, Any]:
    """A text chunk's update, its fields in the order Heron writes them (the text last)."""
    content = {"type": "text", "text": text}
    if message_id is None:
        return {"sessionUpdate": kind, "content": content}
    return {"sessionUpdate": kind, "messageId": message_id, "content": content}


def _text_chunk(message: dict[str, Any]) -> tuple[_Key, str] | None:
    """((session id, kind, message id), text) if `message` is a mergeable text chunk with no
    other field, written in the order `_text_update` has."""
    if message.get("method") != "session/update" or len(message) != 3:
        return None
    params = message.get("params")
    if type(params) is not dict or len(params) != 2:
        return None
    session_id, update = params.get("sessionId"), params.get("update")
    if type(session_id) is not str or type(update) is not dict:
        return None
    kind = update.get("sessionUpdate")
    content = update.get("content")
    if kind not in MERGED_KINDS or type(content) is not dict or len(content) != 2:
        return None
    message_id = update.get("messageId")
    if tuple(update) not in _FIELDS or not (message_id is None or type(message_id) is str):
        return None
    text = content.get("text")
    if content.get("type") != "text" or type(text) is not str:
        return None
    return (session_id, kind, message_id), text


def _escaped(text: str) -> bytes:
    """`text` as the inside of a JSON string in UTF-8, as `encode` would write it."""
    try:
        return encode_basestring(text)[1:-1].encode()
    except UnicodeEncodeError:
        log.warning("text with lone surrogates; replaced by U+FFFD: %.200r", text)
        # Each delta on its own, as if it were sent alone: a pair split across two deltas
        # stays two replacement characters whether or not the deltas are merged.
        repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return encode_basestring(repaired)[1:-1].encode()


def encode(message: dict[str, Any]) -> bytes:
    """One line of strict JSON in valid UTF-8, whatever the message carries.

    Text from files, commands and models may hold lone surrogates, which UTF-8 cannot encode,
    and numbers may be NaN or infinite, which JSON cannot: both are repaired (and logged)
    rather than let one message end the turn or the connection.
    """
    try:
        text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        log.warning("message with a non-finite number; sent as null: %.200r", message)
        message = _finite(message)
        text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        log.warning("message with lone surrogates; replaced by U+FFFD: %.200r", text)
        # Through UTF-16, split pairs are joined and lone halves become U+FFFD.
        repaired = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return repaired.encode() + b"\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
