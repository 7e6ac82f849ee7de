"""A scripted fake of the OpenAI chat-completions API, served over real HTTP.

The agent under test talks to it through its normal OpenAI client, so the whole
network path (SSE parsing, chunked transfer, errors, dropped connections,
cancellation closing the socket) is exercised. Each POST /v1/chat/completions
consumes the next scripted response, in order.

Streams use HTTP/1.1 chunked encoding with ``Connection: close``: chunked framing
is what lets a client notice a connection dropped mid-body (``disconnect``), and
one request per connection keeps shutdown and "client went away" detection simple.

Besides the wire format, it can behave like a local server (fake_local.py): count tokens and
report them with the cache's reuse, refuse requests over a context window (`window`), demand
alternating roles (`alternation`), honour stop sequences, and write on after a tool call until
the token limit (`writes_on`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeAlias

import fake_local

__all__ = [
    "Call",
    "Disconnect",
    "Error",
    "FakeOpenAI",
    "Raw",
    "Recorded",
    "Silent",
    "Stall",
    "Streamed",
    "as_text_calls",
    "disconnect",
    "error",
    "raw",
    "silent",
    "sse",
    "stall",
    "text",
    "tool_calls",
]


# --------------------------------------------------------------------------- responses


@dataclass(frozen=True)
class Streamed:
    """A complete SSE stream: one chunk per delta, then the finish chunk, usage, [DONE].

    ``comment`` is sent as an SSE comment line before every event (llama-cpp-python's
    ``: ping``, OpenRouter's ``: OPENROUTER PROCESSING``); ``null_fields`` adds the
    ``role``/``content``/``tool_calls``: null and ``logprobs`` fields some servers send.
    """

    deltas: tuple[dict[str, Any], ...]
    finish: str = "stop"
    delay: float = 0.0
    usage: dict[str, Any] | None = None
    comment: str | None = None
    null_fields: bool = False


@dataclass(frozen=True)
class Raw:
    """Exactly these body bytes (captured from a real server, or deliberately broken).

    ``cuts``: byte offsets where the body is cut into separate network writes, ``delay``
    seconds apart, so the client reads them separately (e.g. inside a UTF-8 character).
    """

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"
    cuts: tuple[int, ...] = ()
    delay: float = 0.0


@dataclass(frozen=True)
class Silent:
    """Accept the request and never answer, not even the status line."""


@dataclass(frozen=True)
class Error:
    """A non-200 answer with an OpenAI-style JSON error body."""

    status: int
    message: str
    type: str
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Disconnect:
    """Send the first ``chunks`` SSE events of ``after``, then drop the TCP connection."""

    after: Streamed
    chunks: int


@dataclass(frozen=True)
class Stall:
    """Send the deltas of ``first`` (no finish chunk, no [DONE]), then go silent."""

    first: Streamed | None = None


Response: TypeAlias = (
    "Streamed | Error | Disconnect | Stall | Raw | Silent | Callable[[dict[str, Any]], Response]"
)


@dataclass(frozen=True)
class Call:
    """One tool call the fake model makes. ``arguments`` given as str are sent verbatim."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None = None


_call_ids = itertools.count(1)


def text(
    *chunks: str,
    reasoning: Sequence[str] = (),
    reasoning_field: str = "reasoning_content",
    finish: str = "stop",
    delay: float = 0.0,
    usage: dict[str, Any] | None = None,
    comment: str | None = None,
    null_fields: bool = False,
) -> Streamed:
    """Stream an assistant message: role chunk, reasoning deltas, one delta per text chunk."""
    # Like OpenAI, the first chunk only announces the role (with empty content).
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{reasoning_field: r} for r in reasoning]
    deltas += [{"content": c} for c in chunks]
    return Streamed(tuple(deltas), finish, delay, usage, comment, null_fields)


TOOL_CALL_STYLES = (
    "openai",
    "repeated",
    "grown",
    "whole",
    "interleaved",
    "no-index",
    "index-zero",
    "empty-name",
)  # the native shapes; "text" (tool calls written in the answer) comes on top


def tool_calls(
    *calls: Call,
    text: str = "",
    finish: str = "tool_calls",
    split: int = 3,
    delay: float = 0.0,
    usage: dict[str, Any] | None = None,
    style: str = "openai",
    comment: str | None = None,
    null_fields: bool = False,
) -> Streamed:
    """Stream tool calls in one server's shape (``style``):

    - ``openai``: a header delta per call (id, type, name), then argument fragments;
    - ``repeated``: llama-cpp-python: id, type and the full name in every delta, mirrored in
      a legacy ``function_call``, a final empty argument piece and a trailing space;
    - ``grown``: llama.cpp: the name re-sent in full each time it grows;
    - ``whole``: Ollama: each call complete in one delta;
    - ``interleaved``: the argument fragments of all calls alternate, keyed by ``index``;
    - ``no-index``: no ``index`` field at all (a new id starts a new call; Ollama before
      0.4.7, ollama/ollama#7881);
    - ``index-zero``: every call has index 0 and its own id (ollama/ollama#15457);
    - ``empty-name``: ``"name": ""`` beside every argument piece (LM Studio,
      lmstudio-ai/lmstudio-bug-tracker#649);
    - ``text``: no native calls at all: the model writes ``<tool_call>{"name": …,
      "arguments": …}</tool_call>`` blocks in its text (the Hermes/Qwen convention, as in
      Qwen2.5's chat template and NousResearch's Hermes-Function-Calling), cut into small
      content deltas at arbitrary places, finish ``stop``, as a server with no tool parser
      (llama-cpp-python without a function-calling chat format) passes them on.
    """
    assert style in (*TOOL_CALL_STYLES, "text"), style
    if style == "text":
        parts = []
        for c in calls:
            # Arguments given as str go in verbatim: broken JSON makes a broken block.
            args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
            # An id given to the Call goes in the block as Mistral's format has it, so tests
            # can name the call in text mode too.
            extra = f', "id": {json.dumps(c.id)}' if c.id else ""
            parts.append(
                f'<tool_call>\n{{"name": {json.dumps(c.name)}, "arguments": {args}{extra}}}\n'
                "</tool_call>"
            )
        written = (text + "\n" if text else "") + "\n".join(parts)
        pieces_ = [written[i : i + 5] for i in range(0, len(written), 5)]
        deltas_ = [{"role": "assistant", "content": ""}, *({"content": p} for p in pieces_)]
        return Streamed(tuple(deltas_), "stop", delay, usage, comment, null_fields)
    deltas: list[dict[str, Any]] = []
    if text:
        deltas += [{"role": "assistant", "content": ""}, {"content": text}]
    headers, pieces = [], []
    for index, call in enumerate(calls):
        args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        call_id = call.id or f"call_fake{next(_call_ids):04d}"
        frags = _fragments(args, split)
        headers.append((index, call_id, call.name, args))
        pieces.append(frags)
        if style == "interleaved":
            continue
        # OpenAI folds the role into the first tool-call chunk when there is no text.
        first = {"role": "assistant", "content": None} if not deltas else {}
        if style == "whole":
            part = {"index": index, "id": call_id, "type": "function"}
            part["function"] = {"name": call.name, "arguments": args}
            deltas.append({**first, "tool_calls": [part]})
        elif style == "repeated":
            for frag in [*frags[:-1], frags[-1] + " " if frags else " ", ""]:
                function = {"name": call.name, "arguments": frag}
                part = {"index": index, "id": call_id, "type": "function", "function": function}
                deltas.append({**first, "function_call": function, "tool_calls": [part]})
                first = {}
        elif style == "grown":
            for size in range(1, len(call.name) + 1, max(1, len(call.name) // 3)):
                part = {"index": index, "function": {"name": call.name[:size]}}
                if size == 1:
                    part |= {"id": call_id, "type": "function"}
                deltas.append({**first, "tool_calls": [part]})
                first = {}
            deltas.append({"tool_calls": [{"index": index, "function": {"name": call.name}}]})
            deltas += [
                {"tool_calls": [{"index": index, "function": {"arguments": frag}}]}
                for frag in frags
            ]
        else:
            header = {"index": index, "id": call_id, "type": "function"}
            header["function"] = {"name": call.name, "arguments": ""}
            if style == "no-index":
                del header["index"]
            if style == "index-zero":
                header["index"] = 0
            deltas.append({**first, "tool_calls": [header]})
            for frag in frags:
                part: dict[str, Any] = {"index": index, "function": {"arguments": frag}}
                if style == "no-index":
                    del part["index"]
                if style == "index-zero":
                    part["index"] = 0
                if style == "empty-name":
                    part["function"]["name"] = ""
                deltas.append({"tool_calls": [part]})
    if style == "interleaved":
        for index, call_id, name, _ in headers:
            function = {"name": name, "arguments": ""}
            part = {"index": index, "id": call_id, "type": "function", "function": function}
            deltas.append({"tool_calls": [part]})
        for round_ in range(max((len(p) for p in pieces), default=0)):
            for index, frags in enumerate(pieces):
                if round_ < len(frags):
                    part = {"index": index, "function": {"arguments": frags[round_]}}
                    deltas.append({"tool_calls": [part]})
    return Streamed(tuple(deltas), finish, delay, usage, comment, null_fields)


def as_text_calls(resp: Streamed) -> Streamed:
    """The same answer with its native tool calls written as ``<tool_call>`` text (see
    ``tool_calls(style="text")``): how a model without native tool calling answers."""
    calls: dict[Any, dict[str, str]] = {}
    text_parts: list[str] = []
    for delta in resp.deltas:
        if isinstance(delta.get("content"), str):
            text_parts.append(delta["content"])
        for part in delta.get("tool_calls") or ():
            key = part.get("index", part.get("id"))
            if key is None:
                key = max(calls, default=0)
            call = calls.setdefault(key, {"name": "", "arguments": "", "id": ""})
            call["id"] = call["id"] or part.get("id") or ""
            function = part.get("function") or {}
            if len(function.get("name") or "") > len(call["name"]):
                call["name"] = function["name"]
            call["arguments"] += function.get("arguments") or ""
    if not calls:
        return resp
    made = []
    for call in calls.values():
        try:
            arguments: Any = json.loads(call["arguments"] or "{}")
        except ValueError:
            arguments = call["arguments"]  # broken JSON stays broken
        made.append(Call(call["name"], arguments, id=call["id"] or None))
    return tool_calls(*made, text="".join(text_parts), style="text", usage=resp.usage)


def _fragments(s: str, n: int) -> list[str]:
    """Split ``s`` into at most ``n`` non-empty, roughly equal pieces."""
    n = max(1, min(n, len(s)))
    size = -(-len(s) // n) if s else 0
    return [s[i : i + size] for i in range(0, len(s), size)] if s else []


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def error(
    status: int,
    message: str = "fake error",
    headers: dict[str, str] | None = None,
    *,
    type: str | None = None,
    code: str | None = None,
) -> Error:
    """An HTTP error answer; type/code default to what OpenAI sends for that status."""
    default_type, default_code = _ERROR_TYPES.get(status, ("server_error", None))
    return Error(status, message, type or default_type, code or default_code, dict(headers or {}))


def disconnect(after: Streamed, chunks: int) -> Disconnect:
    return Disconnect(after, chunks)


def stall(first: Streamed | None = None) -> Stall:
    return Stall(first)


def raw(
    body: bytes | str,
    status: int = 200,
    content_type: str | None = None,
    *,
    cuts: Sequence[int] = (),
    delay: float = 0.0,
) -> Raw:
    data = body.encode() if isinstance(body, str) else body
    content_type = content_type or "text/event-stream; charset=utf-8"
    return Raw(data, status, content_type, tuple(sorted(cuts)), delay)


def silent() -> Silent:
    return Silent()


def sse(*events: dict[str, Any] | str) -> bytes:
    """An SSE body: dicts become ``data:`` events, strings are sent as they are."""
    parts = [e if isinstance(e, str) else f"data: {json.dumps(e)}\n\n" for e in events]
    return "".join(parts).encode()


# --------------------------------------------------------------------------- server


@dataclass
class Recorded:
    """One request as the fake saw it. ``body`` is None when it was not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    # Chat requests: the prompt's size in the fake's tokens (fake_local.count_tokens), how many
    # of them the previous request's cache covered, and the status the fake answered with.
    prompt_tokens: int = 0
    cached_tokens: int = 0
    status: int = 200

    @property
    def model(self) -> Any:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def reasoning_effort(self) -> Any:
        """The field's value, or None when the request did not carry it."""
        return self.body.get("reasoning_effort") if isinstance(self.body, dict) else None


class _ClientGone(Exception):
    """The client closed the connection while we were streaming."""


class _ClosedByServer(Exception):
    """FakeOpenAI.close() cut the connection while we were streaming."""


class FakeOpenAI:
    """Scripted OpenAI server. Use as a context manager; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._script: deque[Response] = deque()
        self._requests: list[Recorded] = []
        self._other: list[Recorded] = []
        self._sockets: set[socket.socket] = set()
        self._closing = threading.Event()
        self.client_gone = threading.Event()
        self.disconnects = 0
        self.send_seconds: list[float] = []  # per complete stream: first event → last byte
        self.stream_starts: list[float] = []  # perf_counter() as each stream's first event goes
        # Validate requests like llama-cpp-python: an assistant message's content must be a
        # string (null is a 500 with a pydantic dump), and the body must be valid UTF-8 JSON.
        self.strict = False
        self.models_body: bytes | None = None  # GET /v1/models answer; None: see `models`
        # The ids GET /v1/models lists. Only the model the tests configure by default, so
        # Heron's model picker has no news for the editor (no config_option_update arriving
        # in the middle of tests about something else); tests about lists set their own.
        self.models: list[str] = ["fake-model"]
        self.models_status: int | None = None  # answer GET /v1/models with this error (404...)
        self.models_delay = 0.0  # seconds before GET /v1/models answers
        # Request fields this server refuses, each in a real server's words: "openai" (400,
        # `Unsupported parameter`, as OpenAI answers reasoning_effort for a non-reasoning
        # model) or "pydantic" (422 `extra_forbidden`, FastAPI servers with strict models).
        # A refused request is recorded but consumes no scripted response.
        self.reject_fields: dict[str, str] = {}
        # Refuse a request with an `input_audio` part, as a model without audio input does
        # (400; recorded, consumes no scripted response). The words do not say "audio": Heron
        # must know what it sent.
        self.rejects_audio = False
        self.props: dict[str, Any] | None = None  # llama-server's GET /props; None: 404
        # Ollama's POST /api/show answer (its `parameters` text names `num_ctx` when the model
        # was set up with one, ollama/ollama docs/api.md "Show Model Information"); None: 404.
        self.ollama_show: dict[str, Any] | None = None
        # Answer every scripted tool-call stream as `<tool_call>` text instead (a model without
        # native tool calling; `as_text_calls`), so native scenarios run in text mode too.
        self.text_tool_calls = False
        self.text_call_ids: list[str] = []  # the ids of the calls written as text, in order
        # Like a local server (fake_local.py): refuse a request over this many tokens with
        # llama-server's error body, and end an answer that would overflow it (`length`).
        self.window: int | None = None
        # Refuse messages whose roles do not alternate, with the body Gemma's template gave.
        self.alternation = False
        # A text answer with a `<tool_call>` goes on after it (an imitated result, more text)
        # until a stop sequence, max_tokens, the window or WRITE_ON_TOKENS ends it.
        self.writes_on = False
        # Asked before the script: a response it returns answers the request without using
        # up a scripted one (e.g. the summary requests of compaction); None: the script's.
        self.before_script: Callable[[dict[str, Any]], Response | None] | None = None
        self._last_prompt = ""  # the last prompt evaluated: what the one slot's cache holds
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            # A short poll interval keeps close() fast: shutdown() waits for one poll.
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
        )
        self._thread.start()

    # ---- public API

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[Recorded]:
        """Chat-completion requests, in arrival order (one per consumed script entry)."""
        with self._lock:
            return list(self._requests)

    @property
    def other_requests(self) -> list[Recorded]:
        """Everything else (GET /v1/models, unknown paths)."""
        with self._lock:
            return list(self._other)

    @property
    def pending(self) -> int:
        """Scripted responses not consumed yet."""
        with self._lock:
            return len(self._script)

    def script(self, *responses: Response) -> None:
        with self._lock:
            self._script.extend(responses)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[Recorded]:
        """Wait until at least ``n`` chat-completion requests arrived; AssertionError if not."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= n, timeout):
                raise AssertionError(f"expected {n} chat requests, got {len(self._requests)}")
            return list(self._requests)

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            for sock in list(self._sockets):
                _shutdown(sock)  # wakes handlers blocked on stalled streams
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- used by the handler

    def _record(self, rec: Recorded, chat: bool, consume: bool = True) -> Response | None:
        """Record a request; for chat requests also pop the next scripted response."""
        with self._lock:
            (self._requests if chat else self._other).append(rec)
            self._lock.notify_all()
            if chat and consume and self._script:
                return self._script.popleft()
            return None

    def _refusal(self, body: dict[str, Any], tokens: int) -> Error | Raw | None:
        if self.alternation and not fake_local.roles_alternate(body.get("messages") or []):
            return Raw(fake_local.ROLES_MUST_ALTERNATE, 400, "application/json")
        if self.window is not None and tokens > self.window:
            answer = fake_local.exceed_context_size(tokens, self.window)
            return Raw(json.dumps(answer).encode(), 400, "application/json")
        if self.rejects_audio and _has_audio(body):
            return error(400, "Invalid content part type. Supported: text, image_url.")
        for name, style in self.reject_fields.items():
            if name not in body:
                continue
            if style == "pydantic":
                detail = [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", name],
                        "msg": "Extra inputs are not permitted",
                        "input": body[name],
                    }
                ]
                return Error(422, json.dumps(detail), "pydantic", "detail")
            return error(
                400,
                f"Unsupported parameter: '{name}' is not supported with this model.",
                code="unsupported_parameter",
            )
        return None

    def _as_served(self, response: Streamed, body: dict[str, Any]) -> Streamed:
        """The answer as a local server sends it: written on after a text tool call
        (`writes_on`), cut at a stop sequence, and at max_tokens or the end of the window."""
        deltas, finish = list(response.deltas), response.finish
        if self.writes_on:
            deltas = fake_local.written_on(deltas)
        deltas, finish = fake_local.stopped(deltas, finish, body.get("stop"))
        limits = [body["max_tokens"]] if isinstance(body.get("max_tokens"), int) else []
        if self.window is not None:
            limits.append(self.window - fake_local.count_tokens(fake_local.rendered(body)))
        if self.writes_on:
            limits.append(fake_local.WRITE_ON_TOKENS)
        if limits:
            deltas, finish = fake_local.limited(deltas, finish, min(limits))
        if (tuple(deltas), finish) == (response.deltas, response.finish):
            return response
        return Streamed(
            tuple(deltas),
            finish,
            response.delay,
            response.usage,
            response.comment,
            response.null_fields,
        )

    def _usage(self, response: Streamed, recorded: Recorded) -> dict[str, Any]:
        """What the server counted: the prompt, the answer, the prefix its cache reused."""
        answer = "".join(
            (d.get("content") or "") + json.dumps(d.get("tool_calls") or "")
            for d in response.deltas
        )
        prompt_tokens, cached = recorded.prompt_tokens, recorded.cached_tokens
        completion = fake_local.count_tokens(answer)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def _note_client_gone(self) -> None:
        with self._lock:
            self.disconnects += 1
        self.client_gone.set()


def _has_audio(body: dict[str, Any]) -> bool:
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "input_audio" for p in content
        ):
            return True
    return False


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any
    recorded: Recorded | None = None  # the chat request being answered

    @property
    def fake(self) -> FakeOpenAI:
        return self.server.fake

    def setup(self) -> None:
        super().setup()
        # Deliver every SSE event immediately rather than letting Nagle batch them.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.fake._lock:
            self.fake._sockets.add(self.connection)

    def finish(self) -> None:
        with self.fake._lock:
            self.fake._sockets.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    # ---- routes

    def do_GET(self) -> None:
        self.fake._record(self._recorded(None), chat=False)
        models_path = self.path.rstrip("/") == "/v1/models"
        if models_path and self.fake.models_delay:
            time.sleep(self.fake.models_delay)
        if models_path and self.fake.models_status is not None:
            self._send_error(error(self.fake.models_status, f"fake: GET {self.path} refused"))
        elif models_path and self.fake.models_body is not None:
            self._raw(Raw(self.fake.models_body, 200, "application/json"))
        elif self.path.rstrip("/") == "/props" and self.fake.props is not None:
            self._json(200, self.fake.props)
        elif models_path:
            models = [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
                for m in self.fake.models
            ]
            self._json(200, {"object": "list", "data": models})
        else:
            self._send_error(error(404, f"fake: no route GET {self.path}"))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        chat = self.path.rstrip("/") == "/v1/chat/completions"
        if not chat:
            self.fake._record(self._recorded(body), chat=False)
            if self.path.rstrip("/") == "/api/show" and self.fake.ollama_show is not None:
                return self._json(200, self.fake.ollama_show)
            return self._send_error(error(404, f"fake: no route POST {self.path}"))
        if not isinstance(body, dict):
            self.fake._record(self._recorded(body), chat=False)
            return self._send_error(error(400, "fake: request body is not a JSON object"))
        if not body.get("stream"):
            # Not consumed from the script: Heron is expected to always stream.
            self.fake._record(self._recorded(body), chat=False)
            return self._send_error(error(400, "fake: streaming is required (stream: true)"))
        self.recorded = recorded = self._recorded(body)
        prompt = fake_local.rendered(body)
        recorded.prompt_tokens = fake_local.count_tokens(prompt)
        refusal = self.fake._refusal(body, recorded.prompt_tokens)
        if refusal is not None:
            recorded.status = refusal.status
            self.fake._record(recorded, chat=True, consume=False)
            self._respond(refusal, body)
            self.close_connection = True
            return None
        with self.fake._lock:
            recorded.cached_tokens = fake_local.shared_tokens(self.fake._last_prompt, prompt)
            self.fake._last_prompt = prompt
        early = self.fake.before_script(body) if self.fake.before_script else None
        response = early or self.fake._record(recorded, chat=True, consume=early is None)
        if early is not None:
            self.fake._record(recorded, chat=True, consume=False)
        if self.fake.strict and (problem := _strict_problem(raw, body)):
            response = error(500, problem, type="internal_server_error")
        try:
            while callable(response):
                response = response(body)
        except Exception as exc:  # a broken test callback must fail loudly, not hang
            response = error(500, f"fake: response callable raised {exc!r}")
        if response is None:
            response = error(500, "fake: no scripted response left")
        try:
            self._respond(response, body)
        except _ClientGone:
            self.fake._note_client_gone()
        except _ClosedByServer:
            pass
        self.close_connection = True

    def _recorded(self, body: Any) -> Recorded:
        headers = {k.lower(): v for k, v in self.headers.items()}
        return Recorded(self.command, self.path, headers, body)

    # ---- writing

    def _respond(self, response: Response, body: dict[str, Any]) -> None:
        if isinstance(response, Error):
            return self._send_error(response)
        if isinstance(response, Streamed):
            if self.fake.text_tool_calls:
                response = as_text_calls(response)
                written = "".join(d.get("content") or "" for d in response.deltas)
                ids = re.findall(r'"id": "([^"]*)"}\n</tool_call>', written)
                with self.fake._lock:
                    self.fake.text_call_ids.extend(ids)
            response = self.fake._as_served(response, body)
            counted = self.fake._usage(response, self.recorded) if self.recorded else None
            events = _events(response, body, counted)
            return self._stream(events, response.delay, comment=response.comment)
        if isinstance(response, Disconnect):
            events = _events(response.after, body)[: response.chunks]
            self._stream(events, response.after.delay, end=False)
            # Drop the connection mid-body: no terminating chunk, so the client errors.
            _shutdown(self.connection)
            return None
        if isinstance(response, Raw):
            return self._raw(response)
        if isinstance(response, Silent):
            return self._wait_for_hangup()
        if isinstance(response, Stall):
            first = response.first
            events = _events(first, body)[: len(first.deltas)] if first else []
            self._stream(events, first.delay if first else 0.0, end=False)
            return self._wait_for_hangup()
        raise TypeError(f"fake: not a response: {response!r}")

    def _raw(self, response: Raw) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Connection", "close")
        self.end_headers()
        bounds = [0, *response.cuts, len(response.body)]
        with contextlib.suppress(OSError):
            for i, (start, end) in enumerate(itertools.pairwise(bounds)):
                if i and response.delay:
                    time.sleep(response.delay)
                self.wfile.write(response.body[start:end])
                self.wfile.flush()
        self.close_connection = True

    def _stream(
        self, events: list[str], delay: float, end: bool = True, comment: str | None = None
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.send_header("x-request-id", "req_fake")
        self.end_headers()
        started = time.perf_counter()
        with self.fake._lock:
            self.fake.stream_starts.append(started)
        for i, data in enumerate(events):
            if i and delay:
                time.sleep(delay)
            if comment:
                self._chunk(f": {comment}\n\n".encode())
            self._chunk(f"data: {data}\n\n".encode())
        if end:
            self._chunk(b"")  # zero-length chunk terminates the body
            with self.fake._lock:
                self.fake.send_seconds.append(time.perf_counter() - started)

    def _chunk(self, payload: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()
        except OSError as exc:
            if self.fake._closing.is_set():
                raise _ClosedByServer from exc
            raise _ClientGone from exc

    def _wait_for_hangup(self) -> None:
        """Block until the client closes the socket (-> _ClientGone) or the fake closes."""
        sock = self.connection
        while not self.fake._closing.is_set():
            readable, _, _ = select.select([sock], [], [], 0.05)
            if not readable:
                continue
            try:
                data = sock.recv(1, socket.MSG_PEEK)
            except OSError:
                data = b""
            if self.fake._closing.is_set():
                return
            if not data:
                raise _ClientGone
            sock.recv(4096)  # unexpected bytes from the client: discard and keep stalling

    def _send_error(self, err: Error) -> None:
        if err.type == "pydantic":  # FastAPI's validation error: {"detail": [...]}, no "error"
            return self._json(err.status, {"detail": json.loads(err.message)}, err.headers)
        detail = {"message": err.message, "type": err.type, "param": None, "code": err.code}
        if err.code == "unsupported_parameter":
            detail["param"] = err.message.split("'")[1]
        payload = {"error": detail}
        self._json(err.status, payload, err.headers)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(data)
        self.close_connection = True


def _strict_problem(raw: bytes, body: dict[str, Any]) -> str | None:
    try:
        raw.decode("utf-8")
        json.dumps(body).encode("utf-8")
    except UnicodeError as exc:
        return f"fake strict: request is not valid UTF-8 JSON: {exc}"
    for i, message in enumerate(body.get("messages") or ()):
        if message.get("role") == "assistant" and not isinstance(message.get("content"), str):
            return (
                f"1 validation error:\n  {{'type': 'string_type', 'loc': ('body', 'messages', {i},"
                f" 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be "
                "a valid string'}"
            )
    return None


def _events(
    resp: Streamed, body: dict[str, Any], counted: dict[str, Any] | None = None
) -> list[str]:
    """SSE data payloads for a stream, exactly as OpenAI would send them for ``body``;
    ``counted`` is the usage reported unless the response scripts its own."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
    }
    # With include_usage OpenAI puts "usage": null on every regular chunk.
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        if resp.null_fields:
            nulls = {"role": None, "content": None, "function_call": None, "tool_calls": None}
            delta = {**nulls, **delta}
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        if resp.null_fields:
            choice["logprobs"] = None
        return json.dumps({**base, "choices": [choice], **extra})

    events = [chunk(d, None) for d in resp.deltas]
    events.append(chunk({}, resp.finish))
    if include_usage:
        completion = len(resp.deltas)
        usage = (
            resp.usage
            or counted
            or {
                "prompt_tokens": 10,
                "completion_tokens": completion,
                "total_tokens": 10 + completion,
            }
        )
        events.append(json.dumps({**base, "choices": [], "usage": usage}))
    events.append("[DONE]")
    return events
