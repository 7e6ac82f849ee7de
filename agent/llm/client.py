"""One streamed chat-completions request → a flat stream of events.

Any OpenAI-compatible server works through the `openai` package (auth, base URL, retries of
429/5xx/connection errors, error classes). The package is heavy (about half a second to
import), so it is imported on first use, in a worker thread, never before the editor's first
answer. The answer is read as raw server-sent events (`sse.StreamReader`), not as the SDK's
pydantic chunks. Whatever fails becomes an `LLMError` whose message a user can act on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

import anyio

from agent.config import Settings
from agent.llm import errors
from agent.llm.events import LLMError, LLMEvent
from agent.llm.sse import StreamReader
from agent.llm.text import clean_in_place

log = logging.getLogger("heron.llm")

# Optional request fields a server may reject (400/422 naming them): dropped and remembered
# per endpoint, so only the first request to such a server pays for the retry.
OPTIONAL_FIELDS = ("stream_options", "max_tokens", "reasoning_effort", "stop")
_rejected: dict[str, set[str]] = {}

# One AsyncOpenAI client per endpoint (and key, timeout, retries): sessions that pick another
# model or provider reuse its connections; a switch costs nothing beyond the next request.
_clients: dict[tuple[Any, ...], Any] = {}
MAX_CLIENTS = 16  # a config that changes keys again and again does not grow this for ever


async def get_client(settings: Settings) -> Any:
    """The endpoint's AsyncOpenAI client, created (and openai imported) off the event loop."""
    key = _client_key_of(settings)
    client = _clients.get(key)
    if client is None:
        client = await anyio.to_thread.run_sync(_make_client, settings)
        keep_client(settings, client)
        client = _clients[key]  # another task may have made one meanwhile
    return client


def prewarm(settings: Settings) -> Any:
    """Import openai and create the client now (call from a worker thread), so the first
    prompt waits for neither; give the result to `keep_client` on the event loop."""
    client = _make_client(settings)
    # The client imports the module of each API on first use: these are the first prompt's
    # (the request, and the context window asked from `/models`).
    client.chat.completions.with_streaming_response  # noqa: B018
    client.models  # noqa: B018
    return client


def keep_client(settings: Settings, client: Any) -> None:
    """Keep a client made off the event loop (`prewarm`, `get_client`) for its endpoint,
    unless one is kept already."""
    _clients.setdefault(_client_key_of(settings), client)
    while len(_clients) > MAX_CLIENTS:
        del _clients[next(iter(_clients))]  # the oldest; a request using it keeps it alive


def _client_key_of(settings: Settings) -> tuple[Any, ...]:
    return (settings.api_key, settings.base_url, settings.request_timeout, settings.max_retries)


def _make_client(settings: Settings) -> Any:
    import openai

    return openai.AsyncOpenAI(
        # Local servers (Ollama, llama.cpp, vLLM) need no key, but the client insists on one.
        api_key=settings.api_key or "not-needed",
        base_url=settings.base_url,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        http_client=openai.DefaultAsyncHttpxClient(event_hooks={"response": [_final_refusals]}),
    )


RETRIED = {408, 409, 429}  # and every 5xx: what the client sends again


async def _final_refusals(response: Any) -> None:
    """An answer the client would retry (a 5xx, a 429) that refuses the request itself ("tools
    param requires --jinja flag" is a 500) is marked so the client does not send it again:
    the same request gets the same answer, and `auto` can switch to text at once."""
    if response.status_code < 500 and response.status_code not in RETRIED:
        return
    await response.aread()  # an error body: small, and the client reads it anyway
    if errors.will_not_change(response.content):
        log.debug(
            "not retrying HTTP %s: the server refused the request itself", response.status_code
        )
        response.headers["x-should-retry"] = "false"


def request_body(
    settings: Settings,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    stop: list[str] | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """What goes to the server besides `model` and `stream`; optional fields only when wanted.
    `max_tokens`: this request's own limit (a summary's), below the setting's."""
    body: dict[str, Any] = {"messages": messages}
    if tools:
        body["tools"] = tools
    if stop:
        body["stop"] = stop
    # Usage lets the session see how full the context is; servers that reject it lose nothing.
    body["stream_options"] = {"include_usage": True}
    limits = [n for n in (settings.max_tokens, max_tokens) if n]
    if limits:
        body["max_tokens"] = min(limits)
    if settings.reasoning_effort:
        body["reasoning_effort"] = settings.reasoning_effort
    for name in _rejected.get(errors.where(settings), ()):
        body.pop(name, None)
    return body


def _serializable(body: dict[str, Any]) -> str:
    """The body as JSON text; text that cannot be encoded (lone surrogates) is repaired in
    place, so one bad string does not make every later request of the session fail."""
    text = json.dumps(body, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        log.warning("repairing text that cannot be encoded in the request to the model")
        clean_in_place(body["messages"])
        text = json.dumps(body, ensure_ascii=False)
    return text


async def stream_chat(
    settings: Settings,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    stop: list[str] | None = None,
    max_tokens: int | None = None,
) -> AsyncGenerator[LLMEvent, None]:
    client = await get_client(settings)
    import openai

    # Whatever happens before the first event, retries included, fits in request_timeout.
    deadline = anyio.current_time() + settings.request_timeout
    attempts = 0
    while True:
        attempts += 1
        body = request_body(settings, messages, tools, stop, max_tokens)
        text = _serializable(body)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request to %s: %s", errors.where(settings), text)
        # Messages travel in `extra_body`, sent as it is: the client would otherwise walk
        # every message through its TypedDicts, most of Heron's CPU per request.
        opener = client.chat.completions.with_streaming_response.create(
            model=settings.model, messages=[], stream=True, extra_body=body
        )
        reader = StreamReader()
        response = None
        yielded = False
        try:
            with anyio.move_on_after(max(deadline - anyio.current_time(), 0)):
                response = await opener.__aenter__()
            if response is None:
                raise errors.timeout_error(settings)
            http = response.http_response
            log.debug("response: HTTP %s %s", http.status_code, http.headers.get("content-type"))
            lines = response.iter_lines().__aiter__()
            answered = False  # any line, even a `: ping` comment, shows the server is working
            while True:
                if not answered:
                    line = _END
                    with anyio.move_on_after(max(deadline - anyio.current_time(), 0)):
                        line = await anext(lines, None)
                    if line is _END:
                        raise errors.timeout_error(settings)
                    answered = True
                else:
                    line = await anext(lines, None)
                if line is None:
                    break
                for event in reader.feed(line):
                    yielded = True
                    yield event
            for event in reader.finish():
                yield event
            return
        except openai.APIStatusError as exc:
            body_text = _error_body(exc)
            log.debug("response: HTTP %s %s", exc.status_code, body_text)
            if exc.status_code in (400, 422) and _drop_rejected(settings, body, body_text):
                continue
            if "tools" in body and errors.refuses_tools(body_text):
                raise errors.tools_refused_error(exc.status_code, body_text, settings) from exc
            raise errors.status_error(exc.status_code, body_text, settings) from exc
        except openai.APITimeoutError as exc:
            raise errors.timeout_error(settings) from exc
        except openai.APIConnectionError as exc:
            raise errors.unreachable_error(exc.__cause__ or exc, settings) from exc
        except _transport_errors() as exc:
            # The client has already retried failures to open the stream; one that broke off
            # before saying anything is retried here, while there is time left. After
            # output, a retry would repeat it.
            if "Timeout" in type(exc).__name__:
                raise errors.timeout_error(settings) from exc
            time_left = deadline - anyio.current_time()
            if not yielded and attempts <= settings.max_retries and time_left > 1:
                log.warning("model stream failed before any output (%s); retrying", exc)
                await anyio.sleep(min(0.5 * 2 ** (attempts - 1), 8, time_left / 2))
                continue
            if yielded:
                raise LLMError(
                    "The model's answer broke off mid-stream: "
                    + errors.then(errors.trim(str(exc)), "Try again.")
                ) from exc
            raise errors.unreachable_error(exc, settings) from exc
        finally:
            if response is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    await opener.__aexit__(None, None, None)


_END: Any = object()


def _error_body(exc: Any) -> Any:
    body = getattr(exc, "body", None)
    if body is not None:
        return body
    try:
        return exc.response.text
    except Exception:  # a streamed error body that was never read
        return str(getattr(exc, "message", exc))


def rejected(settings: Settings, name: str) -> bool:
    """Whether the endpoint has refused the optional request field `name` (see OPTIONAL_FIELDS)."""
    return name in _rejected.get(errors.where(settings), ())


def _drop_rejected(settings: Settings, body: dict[str, Any], error_body: Any) -> bool:
    """Drop the optional fields the server's error names; True if any was dropped."""
    text = error_body if isinstance(error_body, str) else json.dumps(error_body)
    named = {name for name in OPTIONAL_FIELDS if name in body and name in text}
    if not named:
        return False
    log.warning("the model server rejected %s; sending without it", ", ".join(sorted(named)))
    _rejected.setdefault(errors.where(settings), set()).update(named)
    return True


def _transport_errors() -> tuple[type[BaseException], ...]:
    # Errors raised while reading an already-open stream (a dropped connection).
    import openai

    errors_: list[type[BaseException]] = [openai.APIError]
    import httpx2 as httpx  # openai's transport (pyproject: openai>=3.57, httpx2)

    errors_.append(httpx.TransportError)
    return tuple(errors_)
