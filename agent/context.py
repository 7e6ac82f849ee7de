"""What the model reads besides the conversation: the system prompt and the user's prompt.

ACP prompt content → OpenAI message content. `text` and `resource_link` always work (Heron
reads linked files itself, through the editor when it offers fs); `image` and embedded
`resource` work because `initialize` advertises them.
"""

from __future__ import annotations

import datetime
import logging
import platform
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from agent.protocol import (
    EmbeddedResourceIn,
    ImageBlockIn,
    PromptBlock,
    ResourceLinkIn,
    TextBlockIn,
)
from agent.tools.files_backend import Files

log = logging.getLogger("heron.context")

MAX_ATTACHED_CHARS = 200_000  # one linked or embedded file, as the model sees it
AGENTS_FILES = ("AGENTS.md",)

SYSTEM_PROMPT = """\
You are Heron, a coding agent working inside the user's editor through the Agent Client \
Protocol. You help with software engineering tasks: reading, searching and editing code, \
running commands and tests, and explaining what you find.

Working directory (the project root): {cwd}
Platform: {platform}
Today's date: {date}

How to work:
- Use the tools to look before you change anything: read files before editing them, search \
rather than guess paths.
- Make focused edits with edit_file (old_string must match the file exactly, once); use \
write_file for new files or complete rewrites.
- Paths may be relative to the working directory.
- The user may reject a tool call; then do not retry the same call, adjust or ask.
- For multi-step work, keep a plan with todo_write and update it as you go.
- Be concise. When you are done, say what you changed and how you verified it."""


def system_prompt(cwd: Path) -> str:
    text = SYSTEM_PROMPT.format(
        cwd=cwd,
        platform=f"{platform.system()} {platform.release()} ({platform.machine()})",
        date=datetime.date.today().isoformat(),
    )
    for name in AGENTS_FILES:
        path = cwd / name
        try:
            instructions = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        text += (
            f"\n\nThe project's {name} gives these instructions; follow them:\n"
            f"<{name}>\n{instructions[:MAX_ATTACHED_CHARS]}\n</{name}>"
        )
    return text


async def user_message(blocks: list[PromptBlock], files: Files) -> dict[str, Any]:
    """One OpenAI user message for an ACP prompt."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlockIn):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ResourceLinkIn):
            parts.append({"type": "text", "text": await _linked(block, files)})
        elif isinstance(block, EmbeddedResourceIn):
            parts.append(_embedded(block))
        elif isinstance(block, ImageBlockIn):
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            log.warning("ignoring prompt content of type %r", getattr(block, "type", "?"))
    if all(p["type"] == "text" for p in parts):
        # Plain string content: the widest support among OpenAI-compatible servers.
        return {"role": "user", "content": "\n\n".join(p["text"] for p in parts)}
    return {"role": "user", "content": parts}


async def _linked(link: ResourceLinkIn, files: Files) -> str:
    path = _file_path(link.uri)
    if path is None:
        return f"[Linked resource: {link.name} <{link.uri}>]"
    try:
        text = await files.read_text(path)
    except (OSError, UnicodeError) as exc:
        return f"[Linked file {path} could not be read: {exc}]"
    if "\x00" in text[:8192]:
        return f"[Linked file {path} is binary; not included]"
    return _attachment(str(path), text)


def _embedded(block: EmbeddedResourceIn) -> dict[str, Any]:
    resource = block.resource
    if resource.text is not None:
        name = str(_file_path(resource.uri) or resource.uri)
        return {"type": "text", "text": _attachment(name, resource.text)}
    mime = resource.mime_type or ""
    if resource.blob and mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{resource.blob}"}}
    return {
        "type": "text",
        "text": f"[Attached binary resource {resource.uri} ({mime or 'unknown type'})]",
    }


def _attachment(name: str, text: str) -> str:
    note = ""
    if len(text) > MAX_ATTACHED_CHARS:
        note = f"\n[... truncated: showing {MAX_ATTACHED_CHARS} of {len(text)} characters]"
        text = text[:MAX_ATTACHED_CHARS]
    return f'<file path="{name}">\n{text}{note}\n</file>'


def _file_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if not parsed.scheme and uri.startswith("/"):
        return Path(uri)
    return None
