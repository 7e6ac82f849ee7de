"""Session titles: the first real request, a pasted diff or log described."""

from __future__ import annotations

import pytest

from agent.store.titles import first_request_text, make_title

DIFF = """diff --git a/agent/cli.py b/agent/cli.py
index 1..2 100644
--- a/agent/cli.py
+++ b/agent/cli.py
@@ -1,3 +1,3 @@
-old
+new
diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-a
+b
"""
TRACEBACK = """Traceback (most recent call last):
  File "x.py", line 3, in <module>
    main()
KeyError: 'user'
"""
LOG = """2026-11-24 10:00:01 INFO starting
2026-11-24 10:00:02 INFO listening on :8080
2026-11-24 10:00:05 ERROR database connection refused
2026-11-24 10:00:06 INFO retrying
"""


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        (DIFF, "Diff of agent/cli.py, README.md"),
        ("Why does this fail?\n" + DIFF, "Why does this fail?"),
        (TRACEBACK, "Traceback: KeyError: 'user'"),
        (LOG, "Log: ERROR database connection refused"),
        ("Fix the bug", "Fix the bug"),
    ],
    ids=["diff", "prose-then-diff", "traceback", "log", "prose"],
)
def test_pasted_text_is_described(prompt: str, title: str):
    assert make_title(prompt) == title


def chunk(text: str) -> dict:
    return {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}


def test_slash_commands_are_not_requests():
    transcript = [chunk("/help"), chunk("/mode ask"), chunk("/etc/hosts is wrong")]
    assert first_request_text(transcript) == "/etc/hosts is wrong"
    assert first_request_text([chunk("/help"), chunk("  ")]) == ""
