"""The model client: streamed chat completions from any OpenAI-compatible server.

- `client`: the request (optional fields, retries, time limit) → events;
- `sse`: the raw event stream → events; `toolcalls`: tool-call deltas → calls;
- `thinktags`: inline `<think>` reasoning; `text`: text that cannot be encoded;
- `errors`: failures → readable messages; `events`: what a stream yields.
"""

from agent.llm.client import get_client, keep_client, prewarm, stream_chat
from agent.llm.events import (
    ContextTooLong,
    Finished,
    LLMError,
    LLMEvent,
    RawToolCall,
    TextDelta,
    ThoughtDelta,
    ToolCallNamed,
)
from agent.llm.thinktags import ThinkTagSplitter

__all__ = [
    "ContextTooLong",
    "Finished",
    "LLMError",
    "LLMEvent",
    "RawToolCall",
    "TextDelta",
    "ThinkTagSplitter",
    "ThoughtDelta",
    "ToolCallNamed",
    "get_client",
    "keep_client",
    "prewarm",
    "stream_chat",
]
