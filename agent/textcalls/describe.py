"""The tools as the system prompt describes them in text mode."""

from __future__ import annotations

import json
from typing import Any

INSTRUCTIONS = """\
# Tools

You act in the workspace by calling tools. Each tool, as a JSON schema of its arguments:
<tools>
{tools}
</tools>

To call a tool, write a block like this in your answer (the JSON object on one line):
<tool_call>
{{"name": "{example}", "arguments": {{"path": "README.md"}}}}
</tool_call>
You may write several blocks in one answer. Stop after them: the results come back in the \
next message, each in a <tool_response> block. Write no <tool_call> block when you need no \
tool; then your answer goes to the user."""


# A well-formed call, as the model is shown it when it wrote one Heron could not read.
EXAMPLE = '<tool_call>\n{"name": "read_file", "arguments": {"path": "README.md"}}\n</tool_call>'


def tools_prompt(specs: list[dict[str, Any]]) -> str:
    """The tools section of the system prompt, from the OpenAI function specs; the same specs
    give the same text byte for byte (a prompt cache reuses it)."""
    functions = [spec.get("function", spec) for spec in specs]
    lines = "\n".join(json.dumps(f, ensure_ascii=False, separators=(",", ":")) for f in functions)
    names = [f.get("name") for f in functions]
    example = "read_file" if "read_file" in names else (names[0] if names else "tool")
    return INSTRUCTIONS.format(tools=lines, example=example)
