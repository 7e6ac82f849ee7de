"""An MCP server's tool behind Heron's one tool contract (`agent.tools.base.Tool`).

The arguments are a free-form JSON object that the server validates; the permission key names
the server and the tool unambiguously (`agent.permissions.policy.mcp_key`), so "always allow"
covers exactly that tool of that server. Results are
read by attribute (duck-typed), so this module does not import the SDK.

A server is bounded like every other tool: what the editor shows and the store keeps of a
result is cut as `bash` output is (head and tail, with a note), images past a size are
replaced by a note, and a description or input schema past a size is shortened before it goes
into every model request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agent.acp.protocol import (
    BlobResourceContents,
    ContentItem,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolCallContent,
    ToolKind,
)
from agent.permissions.policy import mcp_key
from agent.tools.base import Preview, Safety, Tool, ToolContext, ToolError, ToolEvent, ToolResult
from agent.tools.shell import HEAD_BYTES, TAIL_BYTES, OutputBuffer

if TYPE_CHECKING:
    from agent.mcp.client import McpConnection

MAX_DESCRIPTION = 2_000  # characters of a tool's description sent to the model
MAX_SCHEMA = 16_000  # characters of a tool's input schema (JSON) sent to the model
MAX_SHOWN = HEAD_BYTES + TAIL_BYTES  # bytes of text the editor is shown per result
MAX_IMAGE = 5_000_000  # bytes of one image (or binary resource) passed on to the editor
MAX_IMAGES = 10_000_000  # bytes of images of one result
MAX_BLOCKS = 100  # content blocks of one result shown to the editor


class McpArgs(BaseModel):
    """Whatever JSON object the model sent; the MCP server checks it against its schema."""

    arguments: dict[str, Any]


class McpTool(Tool[McpArgs]):
    Args = McpArgs

    def __init__(self, name: str, connection: McpConnection, definition: Any) -> None:
        self.name = name  # type: ignore[misc]  # per instance, unlike the built-in tools
        self.connection = connection
        self.server = connection.name
        self.tool = definition.name
        self.title = _short(getattr(definition, "title", None) or definition.name, 200)
        self.schema, cut = _bounded_schema(_object_schema(definition.input_schema))
        description = _short(
            definition.description or f"The {definition.name} tool of MCP server {self.server}.",
            MAX_DESCRIPTION,
        )
        if cut:
            description += f"\n({cut})"
        self.description = description  # type: ignore[misc]
        hints = definition.annotations
        read_only = bool(hints and hints.read_only_hint)
        open_world = bool(hints and hints.open_world_hint)
        # Kind is what the editor shows: a read-only or open-world hint says it; a destructive
        # hint does not make a tool a deletion, so it stays `other`.
        self.kind: ToolKind = (  # type: ignore[misc]
            "fetch" if open_world else "read" if read_only else "other"
        )
        # Only a read-only hint lets a call run unasked; anything else asks in ask, auto
        # and accept-edits modes and is refused in read-only mode.
        self.default_safety = Safety.READ_ONLY if read_only else Safety.DESTRUCTIVE  # type: ignore[misc]

    def input_schema(self) -> dict[str, Any]:
        return self.schema

    def parse_args(self, raw: dict[str, Any]) -> McpArgs:
        return McpArgs(arguments=raw)

    def permission_keys(self, args: McpArgs) -> list[str]:
        return [mcp_key(self.server, self.tool)]

    def runs_programs(self, args: McpArgs) -> bool:
        return True  # the server runs outside the sandbox, perhaps git in the workspace

    async def describe(self, args: McpArgs, ctx: ToolContext) -> Preview:
        return Preview(title=f"{self.title} ({self.server})")

    async def execute(
        self, args: McpArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        from agent.mcp.client import ServerUnavailable

        try:
            result = await self.connection.call_tool(self.tool, args.arguments, preview.call_id)
        except ServerUnavailable as exc:
            raise ToolError(str(exc)) from exc
        yield to_tool_result(result)


def _object_schema(schema: Any) -> dict[str, Any]:
    """OpenAI wants an object schema for parameters; MCP requires one but not every server obeys."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    return schema


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _bounded_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The schema, or when its JSON is over MAX_SCHEMA a smaller one (the property names and
    types, what is required), or an open object; and what was cut, for the description."""
    if len(json.dumps(schema, ensure_ascii=False)) <= MAX_SCHEMA:
        return schema, ""
    properties = schema.get("properties")
    if isinstance(properties, dict):
        slim: dict[str, Any] = {
            "type": "object",
            "properties": {
                str(name): {"type": spec["type"]}
                if isinstance(spec, dict) and isinstance(spec.get("type"), str)
                else {}
                for name, spec in properties.items()
            },
        }
        if isinstance(schema.get("required"), list):
            slim["required"] = [r for r in schema["required"] if isinstance(r, str)]
        if len(json.dumps(slim, ensure_ascii=False)) <= MAX_SCHEMA:
            return slim, "Its input schema was shortened to the parameters' names and types."
    return {"type": "object", "properties": {}}, "Its input schema was too large to send."


class _Shown:
    """What the editor is shown (and the store keeps) of one result, bounded."""

    def __init__(self) -> None:
        self.text_room = MAX_SHOWN
        self.image_room = MAX_IMAGES

    def text(self, text: str) -> str:
        data = text.encode("utf-8", errors="replace")
        if len(data) <= self.text_room:
            self.text_room -= len(data)
            return text
        room, self.text_room = self.text_room, 0
        if room < 1000:
            return f"[{len(data):,} bytes not shown: the result is too long]"
        buffer = OutputBuffer(head=room // 3, tail=room - room // 3)
        buffer.add(data)
        return buffer.render()

    def binary(self, size: int) -> bool:
        """Whether a binary block of `size` bytes may still be passed on."""
        if size > MAX_IMAGE or size > self.image_room:
            return False
        self.image_room -= size
        return True


def to_tool_result(result: Any) -> ToolResult:
    """An MCP CallToolResult: text for the model, ACP content for the editor (bounded)."""
    texts: list[str] = []
    shown: list[ToolCallContent] = []
    bounds = _Shown()
    blocks = list(result.content or [])
    for block in blocks:
        text, content = _convert(block, bounds)
        texts.append(text)
        if content is not None and len(shown) < MAX_BLOCKS:
            shown.append(ContentItem(content=content))
    if len(shown) == MAX_BLOCKS and len(blocks) > MAX_BLOCKS:
        shown.append(ContentItem.of(f"[{len(blocks) - MAX_BLOCKS:,} more blocks not shown]"))
    if not texts and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
        texts.append(text)
        shown.append(ContentItem.of(bounds.text(text)))
    output = "\n".join(texts) or ("(no output)" if not result.is_error else "The tool failed.")
    if result.is_error:
        output = f"The tool reported an error: {output}"
    return ToolResult(
        ok=not result.is_error,
        output=output,
        content=shown or [ContentItem.of(bounds.text(output))],
    )


def _convert(block: Any, bounds: _Shown) -> tuple[str, Any]:
    """One MCP content block → (what the model reads, the ACP content block or None)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text, TextContent(text=bounds.text(block.text))
    if kind == "image":
        size = len(block.data) * 3 // 4
        if not bounds.binary(size):
            note = f"[image {block.mime_type}, about {size:,} bytes: too large, not shown]"
            return note, TextContent(text=note)
        return (
            f"[image {block.mime_type}, about {size} bytes, shown to the user]",
            ImageContent(data=block.data, mime_type=block.mime_type),
        )
    if kind == "resource":
        res = block.resource
        uri, mime = str(res.uri), getattr(res, "mime_type", None)
        if getattr(res, "text", None) is not None:
            return f"[resource {uri}]\n{res.text}", EmbeddedResource(
                resource=TextResourceContents(uri=uri, text=bounds.text(res.text), mime_type=mime)
            )
        size = len(res.blob) * 3 // 4
        label = f"[binary resource {uri} ({mime or 'unknown type'})"
        if not bounds.binary(size):
            note = f"{label}, about {size:,} bytes: too large, not shown]"
            return note, TextContent(text=note)
        return f"{label}]", EmbeddedResource(
            resource=BlobResourceContents(uri=uri, blob=res.blob, mime_type=mime)
        )
    if kind == "resource_link":
        uri = str(block.uri)
        return f"[resource link {uri}: {block.name}]", ResourceLink(
            uri=uri,
            name=block.name,
            mime_type=getattr(block, "mime_type", None),
            title=getattr(block, "title", None),
            description=getattr(block, "description", None),
        )
    if kind == "audio":
        return f"[audio {getattr(block, 'mime_type', '')}, not shown]", None
    return f"[{kind or 'unknown'} content, not shown]", None
