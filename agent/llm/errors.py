"""Model-server failures → messages a user can act on (the server's own words, trimmed)."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from agent.config import Settings
from agent.llm.events import ContextTooLong, LLMError, ToolsRefused

MAX_DETAIL = 300
# Traceback lines and absolute file paths say nothing to the user and leak the server's layout.
_TRACEBACK = re.compile(r'\s*File "[^"]*", line \d+, in \S+\s*')
_PATH = re.compile(r"(?<![\w.:/])/(?:[\w.+-]+/)+[\w.+-]+")
_CONTEXT = re.compile(
    r"context[ _-]?(length|size|window)|maximum context|too many tokens|prompt is too long|"
    r"exceeds? the (available )?context|input is too long",
    re.IGNORECASE,
)
_CONTEXT_CODES = {"context_length_exceeded", "exceed_context_size_error"}
# The context size a server names when it rejects a request for its length, in each server's
# words (the first pattern that matches wins; "Trying to keep the first N tokens" is the
# prompt's size, not the context's, and matches none of them).
_CONTEXT_SIZES = (
    # llama.cpp llama-server (tests/data/real-servers/llama-server-0c1e570/error-400-context-
    # size.json), and Ollama, which wraps llama-server's error body in its own as a string.
    re.compile(r"available context size \((\d+) tokens\)"),
    re.compile(r"n_ctx\\?\"?\s*:\s*(\d+)"),
    # OpenAI; vLLM; llama-cpp-python (…/llama-cpp-python-0.3.36/error-400-context-length-
    # nonstream.json): "This model's maximum context length is 8192 tokens."
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    # vLLM: "…is too long to fit into the model (context length 4096)"; V1: "Prompt length of
    # N is longer than the maximum model length of 4096"; `max_model_len` (4096).
    re.compile(r"\(context length (\d+)\)"),
    re.compile(r"maximum model length of (\d+)"),
    re.compile(r"max_model_len\W{0,4}(\d+)"),
    # LM Studio: "…the model is loaded with context length of only 4096 tokens…";
    # "Reached context length of 4096 tokens with model…".
    re.compile(r"context length of (?:only )?(\d+) tokens"),
)
# The size of the refused prompt, in tokens, in each server's words: llama-server
# ("request (8088 tokens) exceeds…", `n_prompt_tokens`), OpenAI and llama-cpp-python ("you
# requested 25014 tokens (25014 in the messages, …)": the messages' part, not the completion's),
# OpenAI's newer "your messages resulted in N tokens", vLLM ("The prompt (total length N)",
# "Prompt length of N"), LM Studio ("Trying to keep the first N tokens").
_PROMPT_SIZES = (
    re.compile(r"request \((\d+) tokens\) exceeds"),
    re.compile(r"n_prompt_tokens\\?\"?\s*:\s*(\d+)"),
    re.compile(r"(\d+) in the messages"),
    re.compile(r"messages resulted in (\d+) tokens"),
    re.compile(r"you requested (\d+) tokens", re.IGNORECASE),
    re.compile(r"prompt \(total length (\d+)\)", re.IGNORECASE),
    re.compile(r"prompt length of (\d+)", re.IGNORECASE),
    re.compile(r"keep the first (\d+) tokens"),
)
# Servers refusing the `tools` parameter, in their words: vLLM without
# --enable-auto-tool-choice ('"auto" tool choice requires --enable-auto-tool-choice…'), Ollama
# ("… does not support tools"), llama-server without --jinja ("tools param requires --jinja
# flag", tests/data/real-servers/xllamacpp-11549/error-500-tools-param-requires-jinja.json),
# OpenAI and Azure ("Unrecognized request argument supplied: tools", "Unsupported parameter:
# 'tools'", `"param": "tools"`), hosted models without function calling ("Function calling is
# not enabled for this model", "… does not support Function Calling"), TGI ("Tools are not
# supported"), serde-based servers ("unknown field `tools`"), FastAPI servers that forbid extra
# fields (`"loc": ["body", "tools"]`).
_TOOLS_REFUSED = re.compile(
    r"does not support (?:tools|tool[ _-]?(?:use|calling|calls)|function[ _-]?calling|functions)"
    r"|(?:tools?|function)[ _-]?(?:param(?:eter)?|calling|calls|use|choice)s? (?:is |are )?"
    r"(?:not supported|requires|not enabled|not available|unsupported|disabled)"
    r"|(?:unrecognized|unsupported|unknown|unexpected|invalid) (?:request )?"
    r"(?:argument|parameter|field|property|key)s?(?: supplied)?\W{0,4}tools\b"
    r"|\btools\b.{0,40}(?:not supported|not permitted|not allowed|extra_forbidden|Extra inputs)"
    r'|\[\s*"body"\s*,\s*"tools"',
    re.IGNORECASE,
)
# A request the server refused for what it is, not for a passing trouble: the same request
# gets the same answer, so the client does not send it again (`will_not_change`). Pydantic's
# dump of a request that does not validate (llama-cpp-python answers it with a 500).
_INVALID_REQUEST = re.compile(r"\d+ validation errors?\b|Conversation roles must alternate")


def where(settings: Settings) -> str:
    return settings.base_url or "https://api.openai.com/v1"


def trim(text: str) -> str:
    text = _TRACEBACK.sub(" ", text)
    text = _PATH.sub("…", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1].rstrip() + "…"


def error_detail(body: Any) -> tuple[str, bool]:
    """(the server's message, whether it says the context is too long) from an error body."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            text = body.decode(errors="replace") if isinstance(body, bytes) else body
            return trim(text) or "(no details)", bool(_CONTEXT.search(text))
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail") or json.dumps(error)
        codes = {str(error.get("code")), str(error.get("type"))}
        too_long = bool(codes & _CONTEXT_CODES) or bool(_CONTEXT.search(str(message)))
        return trim(str(message)), too_long
    text = str(error)
    return trim(text), bool(_CONTEXT.search(text))


def then(detail: str, advice: str) -> str:
    """The server's words, then ours: one full stop between them, never two (`provided..`)."""
    detail = detail.rstrip().rstrip(",;:")
    return f"{detail} {advice}" if detail.endswith((".", "!", "?", "…")) else f"{detail}. {advice}"


def context_size_in(body: Any) -> int | None:
    """The context size (tokens) an overflow error names, if it names one."""
    text = body if isinstance(body, str) else _text_of(body)
    for pattern in _CONTEXT_SIZES:
        if match := pattern.search(text):
            size = int(match.group(1))
            if size > 0:
                return size
    return None


def prompt_tokens_in(body: Any) -> int | None:
    """The refused prompt's size (tokens) an overflow error names, if it names one."""
    text = body if isinstance(body, str) else _text_of(body)
    for pattern in _PROMPT_SIZES:
        if match := pattern.search(text):
            size = int(match.group(1))
            if size > 0:
                return size
    return None


def refuses_tools(body: Any) -> bool:
    """Whether an error body says the server cannot take the `tools` parameter (its words, or
    OpenAI's `"param": "tools"`)."""
    if isinstance(body, (str, bytes)):
        with contextlib.suppress(ValueError):
            body = json.loads(body)
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("param") == "tools":
        return True
    return bool(_TOOLS_REFUSED.search(body if isinstance(body, str) else _text_of(body)))


def will_not_change(body: Any) -> bool:
    """Whether an error (a 5xx or a 429 the client would retry) refuses the request itself:
    the `tools` parameter, its length, its shape. Sending it again only costs time."""
    text = body if isinstance(body, str) else _text_of(body)
    return refuses_tools(body) or error_detail(body)[1] or bool(_INVALID_REQUEST.search(text))


def _text_of(body: Any) -> str:
    if isinstance(body, bytes):
        return body.decode(errors="replace")
    try:
        return json.dumps(body, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(body)


def context_error(body: Any, detail: str) -> ContextTooLong:
    return ContextTooLong(
        "The conversation no longer fits the model's context window: "
        + then(
            detail,
            "Send the prompt again (Heron compacts the conversation to the size the server "
            "named), or use a model or server setting with a larger context.",
        ),
        context_size_in(body),
        prompt_tokens_in(body),
    )


def tools_refused_error(status: int, body: Any, settings: Settings) -> ToolsRefused:
    detail, _ = error_detail(body)
    return ToolsRefused(
        f"The model server at {where(settings)} refused the tools parameter (HTTP {status}): "
        + then(detail, 'Set tool_calls = "text" (or --tool-calls text) to call tools in text.')
    )


def status_error(status: int, body: Any, settings: Settings) -> LLMError:
    detail, too_long = error_detail(body)
    if too_long:
        return context_error(body, detail)
    if status == 401:
        return LLMError(
            f"The model server at {where(settings)} rejected the API key (401): "
            + then(detail, "Check OPENAI_API_KEY.")
        )
    if status == 404:
        return LLMError(
            f"Model {settings.model!r} was not found at {where(settings)} (404): "
            + then(detail, "Check HERON_MODEL (or --model) and OPENAI_BASE_URL.")
        )
    if status == 429:
        return LLMError(
            f"The model server is rate limiting requests (429), even after retries: {detail}"
        )
    return LLMError(f"The model server answered HTTP {status}: {detail}", status)


def stream_error(body: Any) -> LLMError:
    """An error the server reported inside a 200 stream."""
    detail, too_long = error_detail(body)
    if too_long:
        return context_error(body, detail)
    return LLMError(f"The model server reported an error mid-answer: {detail}")


def timeout_error(settings: Settings) -> LLMError:
    return LLMError(
        f"The model server at {where(settings)} sent nothing for "
        f"{settings.request_timeout:g} s (retries included). Try again, or raise request_timeout."
    )


def unreachable_error(exc: BaseException, settings: Settings) -> LLMError:
    return LLMError(
        f"Cannot reach the model server at {where(settings)}: "
        + then(trim(str(exc)), "Is it running, and is OPENAI_BASE_URL (or --base-url) right?")
    )


def unfinished_error() -> LLMError:
    """`[DONE]` came, but no choice ever said why the answer ended (llama-cpp-python does this
    to an answer when a second request reaches it): the answer is incomplete."""
    return LLMError(
        "The model's answer was cut off: the server ended the stream without saying the "
        "answer was complete (no finish reason). The text so far is kept; send the prompt "
        "again to continue. A server that serves one request at a time (llama-cpp-python) "
        "does this when another request reaches it meanwhile."
    )


def cut_off_error(saw_anything: bool) -> LLMError:
    if not saw_anything:
        return LLMError(
            "The model server accepted the request but its answer was empty: the answer was "
            "cut off before it began. The prompt may exceed the server's context size; check "
            "the server's log."
        )
    return LLMError(
        "The model's answer was cut off: the stream ended without a finish reason. The "
        "server may have crashed or hit its context size; try again."
    )
