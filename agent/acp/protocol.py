"""Pydantic models of the ACP v1 messages Heron sends and receives.

Two rules from the spec (ACP-NOTES §7) shape this module:
- Received messages are read leniently: unknown fields are kept, a malformed optional field
  becomes its default and a malformed list item is dropped (the schema's
  `x-deserialize-default-on-error` / `x-deserialize-skip-invalid-items`).
- Emitted messages are strict: unknown fields are forbidden and `dump()` produces exactly the
  camelCase JSON the schema describes, with unset optional fields left out.

The initialize answer is built in `agent.acp.handshake` without pydantic, to keep start-up fast,
and every model here is built on first use (`defer_build`), not at import: most are not needed
before the first prompt, some never.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_serializer,
)
from pydantic.alias_generators import to_camel

# ---------------------------------------------------------------------------------------------
# Lenient receiving


def _default_on_error(default: Any) -> WrapValidator:
    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            return default

    return WrapValidator(validate)


def _skip_invalid_items(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    if not isinstance(value, list):
        return []
    kept: list[Any] = []
    for item in value:
        with contextlib.suppress(ValidationError):
            kept.extend(handler([item]))
    return kept


SkipInvalid = WrapValidator(_skip_invalid_items)


class Incoming(BaseModel):
    """Base of everything Heron receives: camelCase on the wire, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", defer_build=True
    )


class FileSystemCapabilities(Incoming):
    read_text_file: Annotated[bool, _default_on_error(False)] = False
    write_text_file: Annotated[bool, _default_on_error(False)] = False


class ClientCapabilities(Incoming):
    fs: Annotated[FileSystemCapabilities, _default_on_error(FileSystemCapabilities())] = Field(
        default_factory=FileSystemCapabilities
    )
    terminal: Annotated[bool, _default_on_error(False)] = False
    # Read as raw objects (agent.acp.params decides what they advertise).
    session: Annotated[dict[str, Any] | None, _default_on_error(None)] = None
    elicitation: Annotated[dict[str, Any] | None, _default_on_error(None)] = None


class Implementation(Incoming):
    name: str
    version: str = ""
    title: str | None = None


class InitializeParams(Incoming):
    protocol_version: int
    client_capabilities: Annotated[ClientCapabilities, _default_on_error(ClientCapabilities())] = (
        Field(default_factory=ClientCapabilities)
    )
    client_info: Annotated[Implementation | None, _default_on_error(None)] = None


class NewSessionParams(Incoming):
    cwd: str
    # Raw objects, checked by agent.mcp.config (an unusable entry is skipped, not an error).
    mcp_servers: Annotated[list[dict[str, Any]], SkipInvalid] = Field(default_factory=list)
    additional_directories: Annotated[list[str], SkipInvalid] = Field(default_factory=list)


class TextBlockIn(Incoming):
    type: Literal["text"]
    text: str


class ImageBlockIn(Incoming):
    type: Literal["image"]
    data: str
    mime_type: str
    uri: Annotated[str | None, _default_on_error(None)] = None


class AudioBlockIn(Incoming):
    type: Literal["audio"]
    data: str
    mime_type: str


class ResourceLinkIn(Incoming):
    type: Literal["resource_link"]
    uri: str
    name: str
    mime_type: Annotated[str | None, _default_on_error(None)] = None
    title: Annotated[str | None, _default_on_error(None)] = None


class ResourceContentsIn(Incoming):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: Annotated[str | None, _default_on_error(None)] = None


class EmbeddedResourceIn(Incoming):
    type: Literal["resource"]
    resource: ResourceContentsIn


class UnknownBlockIn(Incoming):
    """A content type this version of Heron does not know: kept, not rejected."""

    type: str


PromptBlock = Annotated[
    TextBlockIn
    | ImageBlockIn
    | AudioBlockIn
    | ResourceLinkIn
    | EmbeddedResourceIn
    | UnknownBlockIn,
    Field(union_mode="left_to_right"),
]


class PromptParams(Incoming):
    session_id: str
    prompt: Annotated[list[PromptBlock], SkipInvalid]


class SessionIdParams(Incoming):
    session_id: str


class PermissionOutcome(Incoming):
    outcome: str  # "selected" or "cancelled"; unknown values are kept and treated as cancelled
    option_id: str | None = None


class RequestPermissionResult(Incoming):
    outcome: PermissionOutcome


class CreateTerminalResult(Incoming):
    terminal_id: str


class TerminalExitStatus(Incoming):
    exit_code: Annotated[int | None, _default_on_error(None)] = None
    signal: Annotated[str | None, _default_on_error(None)] = None


class TerminalOutputResult(Incoming):
    output: str
    truncated: bool = False
    exit_status: Annotated[TerminalExitStatus | None, _default_on_error(None)] = None


# ---------------------------------------------------------------------------------------------
# Strict emitting


class Outgoing(BaseModel):
    """Base of everything Heron sends: camelCase, no unknown fields, unset fields omitted."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class TextContent(Outgoing):
    type: Literal["text"] = "text"
    text: str


class ImageContent(Outgoing):
    type: Literal["image"] = "image"
    data: str  # base64
    mime_type: str


class TextResourceContents(Outgoing):
    uri: str
    text: str
    mime_type: str | None = None


class BlobResourceContents(Outgoing):
    uri: str
    blob: str  # base64
    mime_type: str | None = None


class EmbeddedResource(Outgoing):
    type: Literal["resource"] = "resource"
    resource: TextResourceContents | BlobResourceContents


class ResourceLink(Outgoing):
    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str
    mime_type: str | None = None
    title: str | None = None
    description: str | None = None


class ContentItem(Outgoing):
    """Tool-call content that is an ordinary content block (text; images and resources from
    MCP tools)."""

    type: Literal["content"] = "content"
    content: TextContent | ImageContent | EmbeddedResource | ResourceLink

    @classmethod
    def of(cls, text: str) -> ContentItem:
        return cls(content=TextContent(text=text))


class DiffItem(Outgoing):
    type: Literal["diff"] = "diff"
    path: str
    old_text: str | None  # None for a new file: always sent, as `null`
    new_text: str

    @model_serializer(mode="wrap")
    def _keep_old_text(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        data.setdefault("oldText", None)
        return data


class TerminalItem(Outgoing):
    type: Literal["terminal"] = "terminal"
    terminal_id: str


ToolCallContent = Annotated[ContentItem | DiffItem | TerminalItem, Field(discriminator="type")]


class ToolCallLocation(Outgoing):
    path: str
    line: int | None = None


class ToolCallFields(Outgoing):
    """The fields of a tool call; on updates only the changed ones are set."""

    tool_call_id: str
    title: str | None = None
    name: str | None = None  # the tool's own name (stable, for programs), beside the title
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None
    raw_output: Any = None


class ToolCallStart(ToolCallFields):
    session_update: Literal["tool_call"] = "tool_call"
    title: str  # required when a tool call is announced


class ToolCallProgress(ToolCallFields):
    session_update: Literal["tool_call_update"] = "tool_call_update"


# A chunk's `messageId` comes before its content: streamed text merges in the outbox only when
# the text is the last thing on its line (agent.acp.outbox).


class AgentMessageChunk(Outgoing):
    session_update: Literal["agent_message_chunk"] = "agent_message_chunk"
    message_id: str | None = None  # the same for every chunk of one message
    content: TextContent


class AgentThoughtChunk(Outgoing):
    session_update: Literal["agent_thought_chunk"] = "agent_thought_chunk"
    message_id: str | None = None
    content: TextContent


class UserMessageChunk(Outgoing):
    session_update: Literal["user_message_chunk"] = "user_message_chunk"
    message_id: str | None = None
    content: TextContent


PlanPriority = Literal["high", "medium", "low"]
PlanStatus = Literal["pending", "in_progress", "completed"]


class PlanEntry(Outgoing):
    content: str
    priority: PlanPriority
    status: PlanStatus


class PlanUpdate(Outgoing):
    session_update: Literal["plan"] = "plan"
    entries: list[PlanEntry]


SessionUpdate = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | PlanUpdate
)


class SessionNotification(Outgoing):
    session_id: str
    update: SessionUpdate


PermissionOptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionOption(Outgoing):
    option_id: str
    name: str
    kind: PermissionOptionKind


class RequestPermissionParams(Outgoing):
    session_id: str
    tool_call: ToolCallFields
    options: list[PermissionOption]


class EnvVariable(Outgoing):
    name: str
    value: str


class CreateTerminalParams(Outgoing):
    session_id: str
    command: str
    args: list[str] = Field(default_factory=list)
    env: list[EnvVariable] = Field(default_factory=list)
    cwd: str | None = None
    output_byte_limit: int | None = None


class TerminalParams(Outgoing):
    session_id: str
    terminal_id: str
