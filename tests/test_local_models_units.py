"""Units of issue 19: sizes named by overflow errors, refused `tools`, `<tool_call>` parsing,
and compaction's shortening (end to end: test_local_models_e2e)."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import BaseModel, Field

from agent.context.compaction import fit, shorten, unseen_step
from agent.llm.errors import context_size_in, refuses_tools, will_not_change
from agent.textcalls.parse import call_of
from agent.textcalls.render import as_text
from agent.textcalls.scan import Block, BlockScanner
from agent.tools import builtin_tools
from agent.tools.base import lean_schema


@pytest.mark.parametrize(
    ("body", "size"),
    [
        # Ollama wraps llama-server's error body in its own, as a string.
        (
            '{"error":"{\\"error\\":{\\"code\\":400,\\"message\\":\\"request (8889 tokens) '
            'exceeds the available context size (4096 tokens), try increasing it\\",\\"type\\":'
            '\\"exceed_context_size_error\\",\\"n_prompt_tokens\\":8889,\\"n_ctx\\":4096}}"}',
            4096,
        ),
        # vLLM, three generations of wording.
        ("This model's maximum context length is 16384 tokens. However, you requested", 16384),
        (
            "The prompt (total length 25938) is too long to fit into the model (context length "
            "4096). Make sure that `max_model_len` is no smaller",
            4096,
        ),
        ("Prompt length of 2049 is longer than the maximum model length of 2048.", 2048),
        # LM Studio: the first number is the prompt, not the context.
        (
            "Trying to keep the first 15857 tokens when context the overflows. However, the model "
            "is loaded with context length of only 7866 tokens, which is not enough.",
            7866,
        ),
        ("Reached context length of 4096 tokens with model (arch: qwen3vlmoe)", 4096),
        ("prompt is too long", None),
    ],
)
def test_the_context_size_named_by_an_overflow(body, size):
    assert context_size_in(body) == size


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser', True),
        ("registry.ollama.ai/library/gemma:2b does not support tools", True),
        ("tools param requires --jinja flag", True),
        ("Unsupported parameter: 'tools' is not supported with this model.", True),
        ('[{"type": "extra_forbidden", "loc": ["body", "tools"], "msg": "Extra inputs"}]', True),
        # OpenAI and Azure for models without tools; OpenAI's error naming the parameter.
        ("Unrecognized request argument supplied: tools", True),
        (
            '{"error": {"message": "Invalid value.", "type": "invalid_request_error", '
            '"param": "tools", "code": null}}',
            True,
        ),
        # Hosted models without function calling; TGI; serde-based servers.
        ("Function calling is not enabled for this model", True),
        ("deepseek-reasoner does not support Function Calling", True),
        ("Tools are not supported for this model", True),
        ("unknown field `tools`, expected one of `messages`, `model`", True),
        # Not about tools: a context overflow, a busy server.
        ("This model's maximum context length is 8192 tokens.", False),
        ("The server is overloaded, try again later", False),
        # llama-cpp-python's 500 for a null content names the tool message class: not a refusal.
        ("'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'role')", False),
    ],
)
def test_a_refused_tools_parameter_is_recognised(body, refused):
    assert refuses_tools(body) is refused


def test_blocks_split_anywhere_come_out_whole_and_the_text_around_them_too():
    answer = (
        'Sure <b>.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a<b>.txt"}}\n'
        '</tool_call>\n<tool_call>{"name": "grep", "arguments": {"pattern": "x"}}</tool_call>'
        "\nand <tool_c"
    )
    rng = random.Random(7)
    for _ in range(200):
        parser, out, at = BlockScanner(), [], 0
        while at < len(answer):
            step = rng.randint(1, 9)
            out += parser.feed(answer[at : at + step])
            at += step
        out += parser.finish()
        text = "".join(p for p in out if isinstance(p, str))
        blocks = [p.body for p in out if isinstance(p, Block)]
        assert text == "Sure <b>.\n\n\nand <tool_c"  # (the turn drops blank lines after blocks)
        calls = [call_of(b, i) for i, b in enumerate(blocks)]
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [
            ("read_file", {"path": "a<b>.txt"}),
            ("grep", {"pattern": "x"}),
        ]


def test_a_broken_block_keeps_its_name_and_its_broken_arguments():
    call = call_of('{"name": "read_file", "arguments": {"path": ', 1000)
    assert call.name == "read_file"
    with pytest.raises(ValueError):
        json.loads(call.arguments)


def test_text_rendering_alternates_roles_and_is_stable():
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "b", "content": "two"},
        {"role": "user", "content": "next"},  # the turn was cut short
    ]
    rendered = as_text(history)
    assert [m["role"] for m in rendered] == ["user", "assistant", "user"]
    assert rendered[2]["content"].count("<tool_response>") == 2
    assert rendered[2]["content"].endswith("\n\nnext")
    assert as_text(history) == rendered


def test_the_unseen_step_and_shortening():
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "w",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": json.dumps({"path": "big.txt", "content": "x" * 600_000}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "w", "content": "y" * 50_000},
    ]
    assert unseen_step(history) == 1
    assert unseen_step(history[:2]) == 2
    short, count = shorten(history, 10_000, tools_only=True)
    assert count == 2 and short[0] is history[0]
    args = json.loads(short[1]["tool_calls"][0]["function"]["arguments"])
    assert args == {"path": "big.txt", "content": "[600 kB written to big.txt]"}
    fitted, _ = fit(history, 4_000)
    assert sum(len(json.dumps(m)) for m in fitted) <= 4_000
    assert fitted[2]["tool_call_id"] == "w"


def test_a_long_block_streamed_finely_is_parsed_whole():
    content = "z" * 200_000
    answer = json.dumps({"name": "write_file", "arguments": {"path": "a", "content": content}})
    parser, out = BlockScanner(), []
    out += parser.feed("before <tool_")
    out += parser.feed("call>")
    for at in range(0, len(answer), 3):  # tens of thousands of deltas: linear, not quadratic
        out += parser.feed(answer[at : at + 3])
    out += parser.feed("</tool_")
    out += parser.feed("call> after")
    out += parser.finish()
    blocks = [p.body for p in out if isinstance(p, Block)]
    assert blocks == [answer]
    assert "".join(p for p in out if isinstance(p, str)) == "before  after"


def test_a_block_left_open_at_the_end_still_counts():
    parser = BlockScanner()
    out = parser.feed('<tool_call>{"name": "grep", "arguments": {"pattern": "x"}}</tool_')
    out += parser.finish()
    assert out == [Block('{"name": "grep", "arguments": {"pattern": "x"}}', closed=False)]


@pytest.mark.parametrize(
    ("body", "final"),
    [
        ('{"error":{"code":500,"message":"tools param requires --jinja flag"}}', True),
        ("1 validation error for ChatCompletionRequest", True),  # the request's own shape
        (
            '{"error": {"message": "request (8088 tokens) exceeds the available context size"}}',
            True,
        ),
        ("The server is overloaded, try again later", False),
        ("upstream connect error or disconnect/reset before headers", False),
    ],
)
def test_a_refusal_that_will_not_change_is_not_retried(body, final):
    assert will_not_change(body) is final


class _Entry(BaseModel):
    title: str = Field(description="The entry's title.")
    multi_select: bool = False


class _Entries(BaseModel):
    entries: list[_Entry]


def test_tool_schemas_carry_no_derived_titles_but_keep_a_property_named_title() -> None:
    schema = lean_schema(_Entries.model_json_schema())
    assert '"title": "' not in json.dumps(schema)  # no "Multi Select", "Entries", "_Entry"
    entry = schema["$defs"]["_Entry"]
    assert entry["properties"]["title"] == {"description": "The entry's title.", "type": "string"}
    assert entry["required"] == ["title"]
    # Every built-in tool's schema is lean (what every request carries).
    for tool in builtin_tools():
        assert '"title": "' not in json.dumps(tool.input_schema()), tool.name
