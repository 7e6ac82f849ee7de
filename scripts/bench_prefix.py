"""How much of each model request repeats the previous one (what a prompt cache can reuse).

llama.cpp, vLLM, Ollama and hosted APIs cache the longest unchanged prefix of a request. This
runs a 20-turn conversation with tool calls (read_file, list_directory, grep, write_file, one
per turn, in turn) against the fake OpenAI server, in native and in text tool-call mode, and
prints for each request the share of the previous request's messages (as JSON text, message by
message) that it starts with byte for byte: 100% everywhere outside compaction. Then the fixed
part every request carries: the system prompt plus the tool schemas (native) or the tools
described in the system prompt (text), in estimated tokens (4 characters a token, Heron's own
estimate; a real tokenizer gives roughly the same for English and JSON).

Then small windows, as a local server has them: a 10-turn tool session against the fake
behaving like llama-server (tests/fake_local.py) with a 4,096- and an 8,192-token window (told
in `/props`, enforced: a longer request is refused with llama-server's error; the fake counts
tokens its own way, not as Heron estimates them), in native and text mode, and in text mode
with a model that writes on after its tool call until the token limit. For each: requests per
turn, summary requests, requests refused, turns that failed, how much of each request the
server's one-slot cache reused (what it did not have to evaluate again), how many requests do
not start with the previous one byte for byte (at most one per compaction), the largest prompt
as a share of the window (what is left is all the answer gets), and the tokens sent.

    python scripts/bench_prefix.py [--turns 20] [--window-turns 10] [--windows 4096,8192]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient, RpcError
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, Recorded, text, tool_calls

CALLS = (
    lambda i: Call("read_file", {"path": "notes.txt"}),
    lambda i: Call("list_directory", {"path": "."}),
    lambda i: Call("grep", {"pattern": "milk"}),
    lambda i: Call("write_file", {"path": f"out{i}.txt", "content": f"turn {i}\n"}),
)


def shared_prefix(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> float:
    """The share of `previous` (characters of its messages as JSON) that `current` repeats."""
    before = [json.dumps(m, ensure_ascii=False) for m in previous]
    after = [json.dumps(m, ensure_ascii=False) for m in current]
    total = sum(len(m) for m in before)
    same = 0
    for old, new in zip(before, after, strict=False):
        if old != new:
            common = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), 0)
            same += common
            break
        same += len(old)
    return same / total if total else 1.0


def run(mode: str, turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home, workspace = Path(tmp, "home"), Path(tmp, "ws")
        (home / ".config").mkdir(parents=True)
        workspace.mkdir()
        (workspace / "notes.txt").write_text("remember the milk\n" * 20)
        (workspace / "AGENTS.md").write_text("Run the tests before saying you are done.\n")
        fake.text_tool_calls = mode == "text"
        for i in range(turns):
            fake.script(tool_calls(CALLS[i % len(CALLS)](i)), text(f"Done with step {i}."))
        client = AcpClient(str(workspace))
        env = heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"})
        client.start([_heron_executable(), "--mode", "full-access"], env=env)
        try:
            client.initialize()
            session_id = client.new_session(str(workspace))
            for i in range(turns):
                client.prompt(session_id, f"Step {i}: do the next thing.")
        finally:
            client.kill()
        bodies = [r.body for r in fake.requests]
    pairs = list(itertools.pairwise(bodies))
    shares = [shared_prefix(a["messages"], b["messages"]) for a, b in pairs]
    tools_same = all(json.dumps(a.get("tools")) == json.dumps(b.get("tools")) for a, b in pairs)
    system = bodies[0]["messages"][0]["content"]
    tools = json.dumps(bodies[0].get("tools") or [], ensure_ascii=False)
    print(f"{mode} tool calls: {len(bodies)} requests over {turns} turns")
    print("  share of the previous request repeated, per request:")
    print("   ", " ".join(f"{s:.0%}" for s in shares))
    print(f"  minimum {min(shares):.1%}; requests below 100%: {sum(s < 1 for s in shares)}")
    print(f"  tool schemas identical in every request: {tools_same}")
    print(
        f"  fixed part: system prompt {len(system) // 4} tokens + tool schemas "
        f"{len(tools) // 4} tokens = {(len(system) + len(tools)) // 4} tokens (estimated)"
    )


SOURCE = "".join(
    f'def step_{i}(value):\n    """Step {i} of the pipeline."""\n    return value + {i}\n\n'
    for i in range(12)
)
SUMMARY = (
    "The user asked for a series of steps. Files read: notes.txt, app.py. Written: the out "
    "files of each step so far. Nothing failed; the next step is the one the user asks for. "
) * 3


def is_summary(request: Recorded) -> bool:
    return "You summarize a coding session" in str(request.body["messages"][0].get("content"))


def summarize(body: dict[str, Any]) -> Any:
    """The fake's answer to a summary request (not from the script: it comes when it comes)."""
    return text(SUMMARY) if "You summarize" in str(body["messages"][0].get("content")) else None


def run_window(mode: str, window: int, turns: int, writes_on: bool = False) -> dict[str, Any]:
    """A `turns`-turn tool session against a fake llama-server with a `window`-token window."""
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home, workspace = Path(tmp, "home"), Path(tmp, "ws")
        (home / ".config").mkdir(parents=True)
        workspace.mkdir()
        (workspace / "notes.txt").write_text("remember the milk\n" * 20)
        (workspace / "app.py").write_text(SOURCE)
        fake.window = window
        fake.writes_on = writes_on
        fake.props = {
            "default_generation_settings": {"n_ctx": window},
            "chat_template_caps": {"supports_tools": mode == "native"},
            "total_slots": 1,
        }
        fake.before_script = summarize
        fake.text_tool_calls = mode == "text"
        calls = (
            lambda i: Call("read_file", {"path": "notes.txt" if i % 8 == 0 else "app.py"}),
            lambda i: Call("list_directory", {"path": "."}),
            lambda i: Call("grep", {"pattern": "milk"}),
            lambda i: Call("write_file", {"path": f"out{i}.txt", "content": f"turn {i}\n"}),
        )
        for i in range(turns):
            fake.script(tool_calls(calls[i % len(calls)](i)), text(f"Done with step {i}."))
        client = AcpClient(str(workspace))
        env = heron_env(fake, home, {"HERON_LOG_LEVEL": "warning", "HERON_TOOL_CALLS": mode})
        client.start([_heron_executable(), "--mode", "full-access"], env=env)
        failed = 0
        try:
            client.initialize()
            session_id = client.new_session(str(workspace))
            for i in range(turns):
                try:
                    client.prompt(session_id, f"Step {i}: do the next thing.")
                except RpcError:
                    failed += 1
            shown = [
                u["content"].get("text", "")
                for u in client.updates(session_id)
                if u["sessionUpdate"] == "agent_message_chunk"
            ]
        finally:
            client.kill()
        requests = fake.requests
        ran = sum(1 for f in workspace.glob("out*.txt"))
    accepted = [r for r in requests if r.status == 200]
    main = [r for r in accepted if not is_summary(r)]
    reuse = [r.cached_tokens / r.prompt_tokens for r in main[1:] if r.prompt_tokens]
    breaks = 0
    for previous, current in itertools.pairwise(main):
        before = [json.dumps(m) for m in previous.body["messages"]]
        after = [json.dumps(m) for m in current.body["messages"]]
        breaks += after[: len(before)] != before
    return {
        "requests per turn": len(requests) / turns,
        "summary requests": sum(is_summary(r) for r in requests),
        "refused": len(requests) - len(accepted),
        "turns failed": failed,
        "writes run": ran,
        "cache reuse": statistics.median(reuse) if reuse else 0.0,
        "reuse min": min(reuse, default=0.0),
        # Requests that do not start with the previous one, and how many compactions Heron
        # told of (each may rewrite the history once): the first may not exceed the second.
        "prefix breaks/compactions": f"{breaks}/{sum('(Compacted the' in t for t in shown)}",
        "peak prompt": max((r.prompt_tokens for r in accepted), default=0) / window,
        "tokens sent": sum(r.prompt_tokens for r in requests),
        "tokens evaluated": sum(r.prompt_tokens - r.cached_tokens for r in accepted),
    }


def report_windows(windows: list[int], turns: int) -> None:
    print(f"\nSmall windows: a {turns}-turn tool session (a write_file every 4th turn) against")
    print("a fake llama-server that counts its own tokens and refuses requests over its window")
    rows = [
        (f"{mode}{' (writes on)' if on else ''}", window, run_window(mode, window, turns, on))
        for window in windows
        for mode, on in (("native", False), ("text", False), ("text", True))
    ]
    columns = list(rows[0][2])
    print(f"{'mode':<18}{'window':>7}  " + "  ".join(columns))
    for mode, window, figures in rows:
        cells = []
        for name in columns:
            value = figures[name]
            if name.startswith(("cache", "reuse", "peak")):
                value = f"{value:.1%}"
            elif isinstance(value, float):
                value = f"{value:.2f}"
            cells.append(f"{value!s:>{len(name)}}")
        print(f"{mode:<18}{window:>7}  " + "  ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--window-turns", type=int, default=10)
    parser.add_argument("--windows", default="4096,8192")
    args = parser.parse_args()
    for mode in ("native", "text"):
        run(mode, args.turns)
    report_windows([int(w) for w in args.windows.split(",")], args.window_turns)


if __name__ == "__main__":
    main()
