"""Model-server failures → messages a user can act on (the server's own words, trimmed)."""

from __future__ import annotations

import json
import re
from typing import Any

from agent.config import Settings
from agent.llm.events import ContextTooLong, LLMError

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


def context_error(detail: str) -> ContextTooLong:
    return ContextTooLong(
        "The conversation no longer fits the model's context window: "
        + then(
            detail, "Start a new session, or use a model (or server setting) with a larger context."
        )
    )


def status_error(status: int, body: Any, settings: Settings) -> LLMError:
    detail, too_long = error_detail(body)
    if too_long:
        return context_error(detail)
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
        return context_error(detail)
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
