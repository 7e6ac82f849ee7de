"""The history (kept in the native tool-call shape) as a text-mode model reads it.

An assistant message's tool calls become `<tool_call>` blocks after its text; tool results
become user messages of `<tool_response>` blocks, those of one step (and a user message after
them) in one message, since some chat templates, Gemma's among them, insist that user and
assistant alternate (agent.context.history.alternating). The same history gives the same
messages byte for byte, so each request starts with the previous one.
"""

from __future__ import annotations

import json
from typing import Any

from agent.context.history import alternating


def as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            blocks = [_call_block(call) for call in message["tool_calls"]]
            text = "\n".join(filter(None, [(message.get("content") or "").rstrip(), *blocks]))
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            result = _text(message.get("content"))
            out.append({"role": "user", "content": f"<tool_response>\n{result}\n</tool_response>"})
        else:
            out.append(message)
    return alternating(out)


def _call_block(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = function.get("arguments")
    block = {"name": function.get("name"), "arguments": arguments}
    return f"<tool_call>\n{json.dumps(block, ensure_ascii=False)}\n</tool_call>"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
