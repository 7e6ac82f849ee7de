"""What a local model server does beyond the OpenAI wire format, for the fake (fake_openai.py).

Modelled on llama.cpp's llama-server as captured in tests/data/real-servers/xllamacpp-11549/:

- it counts tokens (`count_tokens`: a rough BPE stand-in, not Heron's estimate), reports them
  in `usage`, and how much of the prompt its one slot's cache reused
  (`prompt_tokens_details.cached_tokens`: the prefix shared with the previous request);
- it refuses a request over its context window with its own error body
  (`exceed_context_size`), and stops an answer that would overflow the window (`length`);
- a chat template such as Gemma's or Mistral's refuses messages whose roles do not alternate,
  with the captured error body (`roles_alternate`);
- stop sequences end an answer where they start (`stopped`);
- a small model does not stop after a tool call written as text: it writes on, imitating the
  tool's result, until the token limit (`written_on`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).parent / "data" / "real-servers" / "xllamacpp-11549"
ROLES_MUST_ALTERNATE = (CAPTURES / "error-400-gemma-roles-must-alternate.json").read_bytes()

# A special token, a word piece, up to three digits or two other characters (each with the
# space before it), or a run of white space: roughly what a small BPE vocabulary makes of text.
# Heron's first request comes to about 2,700 tokens (SmolLM2 counted 2,608), English prose to
# about 4.5 characters a token, dense text such as `x=1;y=22;` to about 1.2.
_TOKEN = re.compile(r"<\|im_(?:start|end)\|>| ?[A-Za-z]{1,10}| ?\d{1,3}| ?[^\sA-Za-z\d]{1,2}|\s+")
WRITE_ON_TOKENS = 300  # what a model writes on for when nothing else stops it (n_predict)
RAMBLE = (
    "\n<tool_response>\n"
    '{"result": "The file says what I expected."}\n'
    "</tool_response>\n"
    "Now I have the result, so I will go on with the next step. "
)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def rendered(body: dict[str, Any]) -> str:
    """The prompt as a ChatML template renders the request (the tools in the system turn)."""
    parts: list[str] = []
    tools = body.get("tools")
    for index, message in enumerate(body.get("messages") or ()):
        if not isinstance(message, dict):
            continue
        text = _content_text(message.get("content"))
        if index == 0 and message.get("role") == "system" and tools:
            text += "\n\n# Tools\n" + "\n".join(json.dumps(t) for t in tools)
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            text += f'\n<tool_call>\n{{"name": "{function.get("name")}", "arguments": '
            text += f"{function.get('arguments')}}}\n</tool_call>"
        parts.append(f"<|im_start|>{message.get('role')}\n{text}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "<image>") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def shared_tokens(previous: str, current: str) -> int:
    """Tokens of the longest common prefix: what a one-slot prompt cache reuses."""
    size = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        size += 1
    return count_tokens(current[:size])


def exceed_context_size(n_prompt: int, n_ctx: int) -> dict[str, Any]:
    """llama-server's answer (HTTP 400) to a request over its context window, as captured
    (error-400-exceed-context-4096.json)."""
    return {
        "error": {
            "code": 400,
            "message": (
                f"request ({n_prompt} tokens) exceeds the available context size ({n_ctx} "
                "tokens), try increasing it"
            ),
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n_prompt,
            "n_ctx": n_ctx,
        }
    }


def roles_alternate(messages: list[Any]) -> bool:
    """Whether a template that demands user/assistant/user/… accepts these messages: system
    first (optional), then user, then turns that alternate; tool results follow the assistant
    turn that called them, and either role may come after them (Mistral's rule; Gemma has no
    tool role at all)."""
    roles = [m.get("role") for m in messages if isinstance(m, dict)]
    if roles and roles[0] == "system":
        roles = roles[1:]
    expected: str | None = "user"  # None: either (after tool results)
    for index, role in enumerate(roles):
        if role == "tool":
            if index == 0 or roles[index - 1] not in ("assistant", "tool"):
                return False
            expected = None
            continue
        if expected is not None and role != expected:
            return False
        expected = "assistant" if role == "user" else "user"
    return True


def stopped(
    deltas: list[dict[str, Any]], finish: str, stop: Any
) -> tuple[list[dict[str, Any]], str]:
    """The answer cut where the first stop sequence starts (finish `stop`), as servers do."""
    stops = [stop] if isinstance(stop, str) else [s for s in stop or () if isinstance(s, str)]
    text = "".join(d.get("content") or "" for d in deltas)
    ends = [text.find(s) for s in stops if s and s in text]
    if not ends:
        return deltas, finish
    return _cut(deltas, min(ends)), "stop"


def limited(deltas: list[dict[str, Any]], finish: str, tokens: int) -> tuple[list[Any], str]:
    """The answer cut after `tokens` tokens of text (finish `length`) when it is longer."""
    text = "".join(d.get("content") or "" for d in deltas)
    pieces = _TOKEN.findall(text)
    if len(pieces) <= tokens:
        return deltas, finish
    return _cut(deltas, len("".join(pieces[: max(tokens, 0)]))), "length"


def written_on(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A text answer with a tool call, written on as a small model does: an imitated tool
    result and more text, well past any token limit (`limited` then ends it)."""
    text = "".join(d.get("content") or "" for d in deltas)
    if "</tool_call>" not in text:
        return deltas
    more = RAMBLE + "And then I will check it again. " * 200
    return [*deltas, *({"content": more[i : i + 16]} for i in range(0, len(more), 16))]


def _cut(deltas: list[dict[str, Any]], at: int) -> list[dict[str, Any]]:
    """The deltas with their text cut after `at` characters (other deltas kept as they are)."""
    out: list[dict[str, Any]] = []
    seen = 0
    for delta in deltas:
        content = delta.get("content")
        if not isinstance(content, str):
            out.append(delta)
            continue
        if seen >= at and content:
            break
        kept = content[: at - seen]
        seen += len(content)
        out.append({**delta, "content": kept})
    return out
