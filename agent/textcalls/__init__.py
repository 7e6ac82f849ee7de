"""Tool calls written as text, for servers without native tool calling.

Many local servers (llama-cpp-python without a function-calling chat format, llama-server with
a model's own template, Ollama with a model it marks as tool-less) drop or refuse the `tools`
parameter. In `text` mode the model learns the tools from the system prompt (`describe`) and
calls one by writing `<tool_call>{"name": …, "arguments": {…}}</tool_call>` in its answer, the
Hermes/Qwen convention most local models were trained on. `scan` finds those blocks in the
streamed text (split across any deltas, several per answer, never inside markdown code) and
`parse` turns them into the same tool calls a native answer gives, so the turn runs them
through the same path (the request's stop sequence, `STOP`, ends an answer where the model
starts writing a tool's result itself); `render` writes the history (kept in the native shape)
the way the model reads it in this mode; `mode` decides, per endpoint and model, which way a
request goes.
"""

from agent.textcalls.describe import tools_prompt
from agent.textcalls.mode import Switch, parses_text, switch_to_text, switched, uses_text
from agent.textcalls.parse import STOP, is_text_call, text_tool_calls
from agent.textcalls.render import as_text

__all__ = [
    "STOP",
    "Switch",
    "as_text",
    "is_text_call",
    "parses_text",
    "switch_to_text",
    "switched",
    "text_tool_calls",
    "tools_prompt",
    "uses_text",
]
