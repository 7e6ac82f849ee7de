"""How much of each model request repeats the previous one (what a prompt cache can reuse).

llama.cpp, vLLM, Ollama and hosted APIs cache the longest unchanged prefix of a request. This
runs a 20-turn conversation with tool calls (read_file, list_directory, grep, write_file, one
per turn, in turn) against the fake OpenAI server, in native and in text tool-call mode, and
prints for each request the share of the previous request's messages (as JSON text, message by
message) that it starts with byte for byte: 100% everywhere outside compaction. Then the fixed
part every request carries: the system prompt plus the tool schemas (native) or the tools
described in the system prompt (text), in estimated tokens (4 characters a token, Heron's own
estimate; a real tokenizer gives roughly the same for English and JSON).

    python scripts/bench_prefix.py [--turns 20]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, text, tool_calls

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    for mode in ("native", "text"):
        run(mode, args.turns)


if __name__ == "__main__":
    main()
