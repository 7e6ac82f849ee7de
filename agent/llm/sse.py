"""The lines of one streamed chat-completions answer → events, with plain `json.loads`.

Reading the raw event stream (not the openai SDK's per-chunk pydantic objects) keeps the CPU
per delta low and lets Heron handle what servers really send: SSE comments (`: ping`,
`: OPENROUTER PROCESSING`), null fields, extra fields (`logprobs`, `timings`), a usage-only
last chunk with `choices: []`, errors inside the stream, and bodies that are not SSE at all.
"""

from __future__ import annotations

import json
from typing import Any

from agent.llm import errors
from agent.llm.events import Finished, LLMError, LLMEvent, ThoughtDelta
from agent.llm.text import SurrogateJoiner, clean
from agent.llm.thinktags import ThinkTagSplitter
from agent.llm.toolcalls import ToolCallAccumulator

# vLLM and DeepSeek send `reasoning_content`; OpenRouter and Ollama send `reasoning`.
_REASONING_KEYS = ("reasoning_content", "reasoning")


class StreamReader:
    def __init__(self) -> None:
        self.calls = ToolCallAccumulator()
        self.think = ThinkTagSplitter()
        self.text = SurrogateJoiner()
        self.thought = SurrogateJoiner()
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.saw_event = False  # any SSE event at all (a comment does not count)
        self._pending: list[str] = []  # data lines of an event split over several lines
        self._event = ""
        self._body: list[str] | None = None  # set when the answer is not an event stream

    def feed(self, line: str) -> list[LLMEvent]:
        """One line of the body (without its line ending)."""
        if self._body is not None:
            self._body.append(line)
            return []
        if not line:
            self._event = ""
            if self._pending:
                payload, self._pending = "\n".join(self._pending), []
                return self._data(payload, strict=True)
            return []
        if line[0] == ":":
            return []  # a comment (keep-alive)
        if line.startswith("data:"):
            payload = line[5:].removeprefix(" ")
            if self._pending:
                self._pending.append(payload)
                return []
            return self._data(payload, strict=False)
        if line.startswith("event:"):
            self._event = line[6:].strip()
            return []
        if line.startswith(("id:", "retry:")):
            return []
        if not self.saw_event:
            self._body = [line]  # not SSE: read it all and judge it at the end
            return []
        raise LLMError(
            f"The model server sent a malformed event-stream line: {errors.trim(line)!r}"
        )

    def _data(self, payload: str, strict: bool) -> list[LLMEvent]:
        self.saw_event = True
        if payload == "[DONE]":
            self.done = True
            return []
        try:
            chunk = json.loads(payload)
        except ValueError:
            if not strict:
                self._pending.append(payload)  # may continue on the next data line
                return []
            raise LLMError(
                f"The model server sent an event that is not JSON: {errors.trim(payload)!r}"
            ) from None
        if not isinstance(chunk, dict):
            raise LLMError(f"The model server sent an unexpected event: {errors.trim(payload)!r}")
        return self.chunk(chunk)

    def chunk(self, chunk: dict[str, Any]) -> list[LLMEvent]:
        # OpenAI, OpenRouter, SGLang: {"error": {...}}; vLLM: {"object": "error", "message": …}.
        if chunk.get("error") or self._event == "error" or chunk.get("object") == "error":
            raise errors.stream_error(chunk)
        if usage := chunk.get("usage"):
            self.usage = usage
        events: list[LLMEvent] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or choice.get("message")
            if delta:
                self._delta(delta, events)
            if reason := choice.get("finish_reason"):
                if reason == "error":  # OpenRouter: an error after the stream began
                    raise errors.stream_error(choice.get("error") or chunk)
                self.finish_reason = reason
        return events

    def _delta(self, delta: dict[str, Any], events: list[LLMEvent]) -> None:
        for key in _REASONING_KEYS:
            thought = delta.get(key)
            if thought and isinstance(thought, str):
                if thought := self.thought.feed(thought):
                    events.append(ThoughtDelta(thought))
                break
        content = delta.get("content")
        if content and isinstance(content, str) and (content := self.text.feed(content)):
            events.extend(self.think.feed(content))
        if delta.get("tool_calls") or delta.get("function_call"):
            events.extend(self.calls.add_delta(delta))

    def finish(self) -> list[LLMEvent]:
        """The stream ended: the held-back text, then `Finished`; or why it failed."""
        if self._body is not None:
            body, self._body = "\n".join(self._body), None
            return self._not_a_stream(body)
        if self._pending:
            payload, self._pending = "\n".join(self._pending), []
            self._data(payload, strict=True)
        if self.finish_reason is None and not self.done:
            raise errors.cut_off_error(self.saw_event)
        if self.finish_reason is None and not self.calls.started:
            # [DONE] without a finish reason: complete tool calls still run (their JSON is
            # checked), but text alone cannot show it was finished.
            raise errors.unfinished_error()
        events: list[LLMEvent] = []
        if thought := self.thought.flush():
            events.append(ThoughtDelta(thought))
        if text := self.text.flush():
            events.extend(self.think.feed(text))
        events.extend(self.think.flush())
        named, calls = self.calls.finish()
        events.extend(named)
        events.append(Finished(self.finish_reason, calls, self.usage))
        return events

    def _not_a_stream(self, body: str) -> list[LLMEvent]:
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and answer.get("error"):
            raise errors.stream_error(answer)
        if isinstance(answer, dict) and answer.get("choices"):
            # A server that ignored `stream: true` and sent the whole answer at once.
            self.saw_event = True
            events = self.chunk(answer)
            return events + self.finish()
        raise LLMError(
            "The model server answered 200 but not with an event stream, so the answer was "
            f"cut off: {errors.trim(clean(body)) or '(empty body)'!r}"
        )
