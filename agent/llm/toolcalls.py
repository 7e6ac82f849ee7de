"""Tool calls assembled from streamed deltas, in every shape servers send them.

- OpenAI: id, type and name in the first delta of a call, then argument pieces.
- llama-cpp-python: id, type and the full name repeated in every delta (and the same call
  mirrored in a legacy `function_call`, ignored here when `tool_calls` is present).
- llama.cpp `llama-server`: the name re-sent in full whenever it grows.
- Ollama: the whole call, arguments included, in one delta.
- Several calls interleave by `index`; some servers omit the index (a new id is a new call),
  and Ollama (ollama/ollama#15457) gives every call index 0 with its own id.
- LM Studio sends `"name": ""` beside each argument piece (lmstudio-bug-tracker#649).
- Argument pieces may be empty or end in whitespace.
"""

from __future__ import annotations

import json
from typing import Any

from agent.llm.events import RawToolCall, ToolCallNamed
from agent.llm.text import clean


class _Call:
    __slots__ = ("announced", "id", "name", "pieces")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.pieces: list[str] = []
        self.announced = False


class ToolCallAccumulator:
    def __init__(self) -> None:
        self._calls: dict[int, _Call] = {}
        self._route: dict[int, int] = {}  # the server's index → ours, when it reused one
        self._saw_tool_calls = False

    @property
    def started(self) -> bool:
        """Whether any tool call has begun."""
        return bool(self._calls)

    def add_delta(self, delta: dict[str, Any]) -> list[ToolCallNamed]:
        """Take the tool-call parts of one delta; returns calls whose names became known."""
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            self._saw_tool_calls = True
            named: list[ToolCallNamed] = []
            for part in tool_calls:
                if isinstance(part, dict):
                    named.extend(self._add(part))
            return named
        legacy = delta.get("function_call")
        if isinstance(legacy, dict) and not self._saw_tool_calls:
            # A server speaking only the legacy single-call form.
            return self._add({"index": 0, "function": legacy})
        return []

    def _add(self, part: dict[str, Any]) -> list[ToolCallNamed]:
        index = part.get("index")
        call_id = part.get("id")
        if not isinstance(index, int):
            new = call_id and all(c.id != call_id for c in self._calls.values())
            index = len(self._calls) if new or not self._calls else max(self._calls)
        else:
            sent_index, index = index, self._route.get(index, index)
            known = self._calls.get(index)
            if known is not None and call_id and known.id and call_id != known.id:
                # Another call under an index already used: a new call after all the others.
                index = self._route[sent_index] = max(self._calls) + 1
        named: list[ToolCallNamed] = []
        call = self._calls.get(index)
        if call is None:
            # A new call: the earlier ones are complete, so their names are final.
            named = self._announce_all()
            call = self._calls[index] = _Call()
        if isinstance(call_id, str) and call_id:
            call.id = call_id
        function = part.get("function")
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str) and name and name != call.name:
                # Repeated in full (same), re-sent grown (extends), or sent in pieces.
                call.name = name if name.startswith(call.name) else call.name + name
            arguments = function.get("arguments")
            if isinstance(arguments, str) and arguments:
                call.pieces.append(arguments)
            elif isinstance(arguments, dict):  # a few servers send an object, not JSON text
                call.pieces.append(json.dumps(arguments))
        if call.pieces and call.name and not call.announced:
            # Arguments have started, so the name will not grow any more.
            call.announced = True
            named.append(ToolCallNamed(index, call.id, clean(call.name)))
        return named

    def _announce_all(self) -> list[ToolCallNamed]:
        named = []
        for index, call in sorted(self._calls.items()):
            if call.name and not call.announced:
                call.announced = True
                named.append(ToolCallNamed(index, call.id, clean(call.name)))
        return named

    def finish(self) -> tuple[list[ToolCallNamed], list[RawToolCall]]:
        """At the end of the stream: the calls not announced yet, and all complete calls."""
        named = self._announce_all()
        calls = [
            RawToolCall(index, c.id, clean(c.name), clean("".join(c.pieces)))
            for index, c in sorted(self._calls.items())
            if c.name
        ]
        return named, calls
