"""An MCP server's tool behind Heron's one tool contract (`agent.tools.base.Tool`).

The arguments are a free-form JSON object that the server validates; the permission key is
`mcp:<server>:<tool>`, so "always allow" covers exactly that tool of that server. Results are
read by attribute (duck-typed), so this module does not import the SDK.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
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
from agent.tools.base import Preview, Safety, Tool, ToolContext, ToolError, ToolEvent, ToolResult

if TYPE_CHECKING:
    from agent.mcp.client import McpConnection


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
        self.title = getattr(definition, "title", None) or definition.name
        self.description = (  # type: ignore[misc]
            definition.description or f"The {definition.name} tool of MCP server {self.server}."
        )
        self.schema = _object_schema(definition.input_schema)
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
        return [f"mcp:{self.server}:{self.tool}"]

    async def describe(self, args: McpArgs, ctx: ToolContext) -> Preview:
        return Preview(title=f"{self.title} ({self.server})")

    async def execute(
        self, args: McpArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncIterator[ToolEvent]:
        from agent.mcp.client import ServerUnavailable

        try:
            result = await self.connection.call_tool(self.tool, args.arguments)
        except ServerUnavailable as exc:
            raise ToolError(str(exc)) from exc
        yield to_tool_result(result)


def _object_schema(schema: Any) -> dict[str, Any]:
    """OpenAI wants an object schema for parameters; MCP requires one but not every server obeys."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    return schema


def to_tool_result(result: Any) -> ToolResult:
    """An MCP CallToolResult: text for the model, ACP content for the editor."""
    texts: list[str] = []
    shown: list[ToolCallContent] = []
    for block in result.content or []:
        text, content = _convert(block)
        texts.append(text)
        if content is not None:
            shown.append(ContentItem(content=content))
    if not texts and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
        texts.append(text)
        shown.append(ContentItem.of(text))
    output = "\n".join(texts) or ("(no output)" if not result.is_error else "The tool failed.")
    if result.is_error:
        output = f"The tool reported an error: {output}"
    return ToolResult(
        ok=not result.is_error, output=output, content=shown or [ContentItem.of(output)]
    )


def _convert(block: Any) -> tuple[str, Any]:
    """One MCP content block → (what the model reads, the ACP content block or None)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text, TextContent(text=block.text)
    if kind == "image":
        size = len(block.data) * 3 // 4
        return (
            f"[image {block.mime_type}, about {size} bytes, shown to the user]",
            ImageContent(data=block.data, mime_type=block.mime_type),
        )
    if kind == "resource":
        res = block.resource
        uri, mime = str(res.uri), getattr(res, "mime_type", None)
        if getattr(res, "text", None) is not None:
            return f"[resource {uri}]\n{res.text}", EmbeddedResource(
                resource=TextResourceContents(uri=uri, text=res.text, mime_type=mime)
            )
        return f"[binary resource {uri} ({mime or 'unknown type'})]", EmbeddedResource(
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
