"""One streamed chat-completions request → a flat stream of events.

Any OpenAI-compatible server works through the `openai` package. The package is heavy (about
half a second to import), so it is imported on first use, in a worker thread, never before the
editor's first answer. Transient failures (429, 5xx, connection errors, timeouts) are retried
by the client with backoff; a stream that breaks before yielding anything is retried here.
Whatever still fails becomes an `LLMError` whose message a user can act on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from agent.config import Settings

log = logging.getLogger("heron.llm")


@dataclass
class TextDelta:
    text: str


@dataclass
class ThoughtDelta:
    text: str


@dataclass
class ToolCallNamed:
    """A tool call's name is known; its arguments are still streaming."""

    index: int
    call_id: str
    name: str


@dataclass
class RawToolCall:
    index: int
    call_id: str
    name: str
    arguments: str  # JSON text as the model wrote it; may be invalid


@dataclass
class Finished:
    finish_reason: str | None
    tool_calls: list[RawToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None


LLMEvent = TextDelta | ThoughtDelta | ToolCallNamed | Finished


class LLMError(Exception):
    """The model could not be reached or refused the request; the message says why."""


_client: Any = None
_client_key: tuple[Any, ...] | None = None


async def get_client(settings: Settings) -> Any:
    """The shared AsyncOpenAI client, created (and openai imported) off the event loop."""
    global _client, _client_key
    key = (settings.api_key, settings.base_url, settings.request_timeout, settings.max_retries)
    if _client is None or _client_key != key:
        _client = await anyio.to_thread.run_sync(_make_client, settings)
        _client_key = key
    return _client


def prewarm() -> None:
    """Import openai now (call from a worker thread) so the first prompt does not wait."""
    import openai  # noqa: F401


def _make_client(settings: Settings) -> Any:
    import openai

    return openai.AsyncOpenAI(
        # Local servers (Ollama, llama.cpp, vLLM) need no key, but the client insists on one.
        api_key=settings.api_key or "not-needed",
        base_url=settings.base_url,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
    )


async def stream_chat(
    settings: Settings, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> AsyncIterator[LLMEvent]:
    client = await get_client(settings)
    import openai

    # The client checks every message against its TypedDicts before sending: most of Heron's
    # CPU per request, and it grows with the conversation. Ours are plain JSON already, so they
    # travel in `extra_body`, which is sent as it is and takes precedence over `messages=[]`.
    body: dict[str, Any] = {"messages": messages}
    if tools:
        body["tools"] = tools
    # Token counts for usage_update; servers that do not know the option ignore it.
    body["stream_options"] = {"include_usage": True}
    request: dict[str, Any] = {
        "model": settings.model,
        "messages": [],
        "stream": True,
        "extra_body": body,
    }
    attempts = 0
    while True:
        attempts += 1
        yielded = False
        stream = None
        try:
            stream = await client.chat.completions.create(**request)
            accumulator = _ToolCallAccumulator()
            think_tags = ThinkTagSplitter()
            finish_reason: str | None = None
            usage: dict[str, Any] | None = None
            async for chunk in stream:
                if getattr(chunk, "usage", None):
                    usage = chunk.usage.model_dump()
                for choice in chunk.choices or ():
                    delta = choice.delta
                    for event in _delta_events(delta, accumulator, think_tags):
                        yielded = True
                        yield event
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
            for event in think_tags.flush():
                yield event
            yield Finished(finish_reason, accumulator.calls(), usage)
            return
        except openai.APIStatusError as exc:
            raise LLMError(_status_message(exc, settings)) from exc
        except _stream_errors() as exc:
            # The client has already retried failures to open the stream; one that broke off
            # before saying anything is retried here. After output, a retry would repeat it.
            if stream is not None and not yielded and attempts <= settings.max_retries:
                log.warning("model stream failed before any output (%s); retrying", exc)
                await anyio.sleep(min(0.5 * 2 ** (attempts - 1), 8))
                continue
            raise LLMError(_failure_message(exc, settings, yielded)) from exc
        finally:
            if stream is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await stream.close()


def _stream_errors() -> tuple[type[BaseException], ...]:
    # Errors raised while iterating an already-open stream (a dropped connection).
    import openai

    errors: list[type[BaseException]] = [openai.APIError]  # includes connection errors
    try:
        import httpx2 as httpx  # the transport of openai 3.x
    except ImportError:  # pragma: no cover - older openai releases use httpx
        import httpx  # type: ignore[no-redef]
    errors.append(httpx.TransportError)
    return tuple(errors)


def _delta_events(
    delta: Any, accumulator: _ToolCallAccumulator, think_tags: ThinkTagSplitter
) -> list[LLMEvent]:
    if delta is None:
        return []
    events: list[LLMEvent] = []
    extra = delta.model_extra or {}
    # vLLM and DeepSeek send `reasoning_content`; OpenRouter and Ollama send `reasoning`.
    for key in ("reasoning_content", "reasoning"):
        thought = extra.get(key) if key in extra else getattr(delta, key, None)
        if isinstance(thought, str) and thought:
            events.append(ThoughtDelta(thought))
            break
    if delta.content:
        events.extend(think_tags.feed(delta.content))
    for call in delta.tool_calls or ():
        named = accumulator.add(call)
        if named is not None:
            events.append(named)
    return events


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


class _ToolCallAccumulator:
    """Tool-call arguments arrive split across many chunks, keyed by index."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, delta: Any) -> ToolCallNamed | None:
        index = delta.index
        if index is None:  # some servers omit the index: a new id means a new call
            index = len(self._calls) if delta.id or not self._calls else max(self._calls)
        call = self._calls.setdefault(
            index, {"id": "", "name": "", "arguments": "", "announced": False}
        )
        if delta.id:
            call["id"] = delta.id
        function = delta.function
        if function is not None:
            if function.name:
                call["name"] += function.name
            if function.arguments:
                call["arguments"] += function.arguments
        if call["name"] and not call["announced"]:
            call["announced"] = True
            return ToolCallNamed(index, call["id"], call["name"])
        return None

    def calls(self) -> list[RawToolCall]:
        return [
            RawToolCall(index, c["id"], c["name"], c["arguments"])
            for index, c in sorted(self._calls.items())
            if c["name"]
        ]


def _failure_message(exc: BaseException, settings: Settings, yielded: bool) -> str:
    if "Timeout" in type(exc).__name__:
        return (
            f"The model server at {_where(settings)} sent nothing for "
            f"{settings.request_timeout:g} s. Try again, or raise request_timeout."
        )
    if yielded:
        return f"The model's answer broke off mid-stream: {exc}. Try again."
    return (
        f"Cannot reach the model server at {_where(settings)}: {exc}. "
        "Is it running, and is OPENAI_BASE_URL (or --base-url) right?"
    )


def _where(settings: Settings) -> str:
    return settings.base_url or "https://api.openai.com/v1"


def _status_message(exc: Any, settings: Settings) -> str:
    status = exc.status_code
    detail = _error_detail(exc)
    if status == 401:
        return (
            f"The model server at {_where(settings)} rejected the API key (401): {detail}. "
            "Check OPENAI_API_KEY."
        )
    if status == 404:
        return (
            f"Model {settings.model!r} was not found at {_where(settings)} (404): {detail}. "
            "Check HERON_MODEL (or --model) and OPENAI_BASE_URL."
        )
    if status == 429:
        return f"The model server is rate limiting requests (429), even after retries: {detail}"
    return f"The model server answered HTTP {status}: {detail}"


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return str(getattr(exc, "message", exc))
