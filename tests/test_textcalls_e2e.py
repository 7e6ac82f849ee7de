"""The native tool-call scenarios of test_tools_e2e, run in text mode.

The fake's model writes each scripted tool call as a `<tool_call>` block in its text (cut into
small deltas) and Heron runs with `tool_calls = "text"` (tests/conftest.py): the same turns must
give the editor the same tool calls and the model the same results, now as `<tool_response>`
blocks. Only scenarios that look at what the model was sent through `tool_result(s)` (not at
the native `tool_calls` / `tool` message shape itself) are repeated here; several blocks in one
answer and broken blocks are in test_local_models_e2e.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import test_tools_e2e
from fake_openai import FakeOpenAI

# Collected here again, with this module's `fake_llm`.
from test_tools_e2e import (  # noqa: F401
    test_bash,
    test_delete_path,
    test_edit_file,
    test_find_path,
    test_grep,
    test_list_directory,
    test_max_turn_requests_stops_a_model_that_keeps_calling_tools,
    test_move_path,
    test_read_only_calls_in_one_response_run_side_by_side,
    test_todo_write,
    test_write_file_creates_a_new_file,
)


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        fake.text_tool_calls = True
        test_tools_e2e.TEXT_FAKE = fake
        try:
            yield fake
        finally:
            test_tools_e2e.TEXT_FAKE = None
