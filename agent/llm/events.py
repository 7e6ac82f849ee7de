"""What one streamed model request yields, and how it fails."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    # Why the call cannot run, known from how it was written (a text block cut off by the
    # token limit, one Heron could not read): it fails with this, without asking anyone.
    problem: str | None = None


@dataclass
class Finished:
    finish_reason: str | None
    tool_calls: list[RawToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None


LLMEvent = TextDelta | ThoughtDelta | ToolCallNamed | Finished


class LLMError(Exception):
    """The model could not be reached or refused the request; the message says why.
    `status`: the HTTP status of a refusal that has no more specific reading."""

    def __init__(self, message: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ContextTooLong(LLMError):
    """The request does not fit the model's context window (the server said so). `size`: the
    context size in tokens the server named, when it named one; `prompt_tokens`: what it
    counted for the request, when it said."""

    def __init__(
        self, message: str, size: int | None = None, prompt_tokens: int | None = None
    ) -> None:
        super().__init__(message)
        self.size = size
        self.prompt_tokens = prompt_tokens


class ToolsRefused(LLMError):
    """The server refused the request's `tools` parameter (no native tool calling)."""
