"""Session store figures against the fake OpenAI server (no network, no model time):

- `session/load` of a stored session of 500 turns (about 5000 updates): request → answer;
- `session/list` over 10,000 stored sessions: time per page (first page and deep pages);
- a 2000-delta reply ("flood"): prompt → answer, with the store and with the store off
  (its data directory unusable, so nothing is written: the same code without SQLite);
- `initialize` (process start → answer) and `session/new`, with and without a big store.

    .venv/bin/python scripts/bench_sessions.py [--repeat 7]

Prints medians; asserts nothing. Targets: load <= 300 ms, list <= 50 ms per page, flood within
10% of no store, initialize and session/new unchanged.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from conftest import _heron_executable, heron_env  # noqa: E402
from fake_openai import FakeOpenAI, text  # noqa: E402

from agent.store import db  # noqa: E402


class RawClient:
    """A bare ACP client: writes requests, reads lines, validates nothing. The test client
    checks every message against the schema, which would cost more than Heron itself here."""

    def __init__(self, fake: FakeOpenAI, home: Path, env: dict[str, str] | None) -> None:
        overrides = {"HERON_LOG_LEVEL": "warning", **(env or {})}
        self.proc = subprocess.Popen(
            [_heron_executable()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=heron_env(fake, home, overrides),
        )
        self.ids = itertools.count(1)
        self.notes = 0

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """The result; `self.notes` counts the notifications that came before it."""
        assert self.proc.stdin and self.proc.stdout
        rid = next(self.ids)
        line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(line).encode() + b"\n")
        self.proc.stdin.flush()
        self.notes = 0
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == rid and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.notes += 1

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def start(fake: FakeOpenAI, home: Path, env: dict[str, str] | None = None):
    started = time.perf_counter()
    client = RawClient(fake, home, env)
    client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return client, (time.perf_counter() - started) * 1000


def new_session(client: RawClient, workspace: Path) -> str:
    return client.request("session/new", {"cwd": str(workspace), "mcpServers": []})["sessionId"]


def prompt(client: RawClient, session_id: str, words: str) -> None:
    blocks = [{"type": "text", "text": words}]
    result = client.request("session/prompt", {"sessionId": session_id, "prompt": blocks})
    assert result["stopReason"] == "end_turn", result


def seed_long_session(path: Path, workspace: str, turns: int) -> str:
    """A session of `turns` turns, each: prompt, thought, text, an edit with a diff, a plan."""
    session_id = "sess_long"
    history: list[str] = []
    updates: list[str] = []
    for n in range(turns):
        call_id = f"call_{n}"
        args = {"path": "app.py", "old_string": f"v{n}", "new_string": f"v{n + 1}"}
        history += [
            json.dumps({"role": "user", "content": f"Change v{n} to v{n + 1} please"}),
            json.dumps(
                {
                    "role": "assistant",
                    "content": "Let me edit it.",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "edit_file", "arguments": json.dumps(args)},
                        }
                    ],
                }
            ),
            json.dumps({"role": "tool", "tool_call_id": call_id, "content": "Edited app.py."}),
            json.dumps({"role": "assistant", "content": f"Done: v{n + 1}. " * 20}),
        ]
        diff = {
            "type": "diff",
            "path": f"{workspace}/app.py",
            "oldText": f"x = v{n}\n" * 20,
            "newText": f"x = v{n + 1}\n" * 20,
        }
        turn = [
            {
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": f"Change v{n} to v{n + 1} please"},
            },
            {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "Thinking about it. " * 10},
            },
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Let me edit it."},
            },
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": "edit_file",
                "kind": "edit",
                "status": "pending",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "title": "Edit app.py",
                "content": [diff],
                "locations": [{"path": f"{workspace}/app.py", "line": 1}],
                "rawInput": args,
            },
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"},
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "completed",
                "content": [diff],
            },
            {
                "sessionUpdate": "plan",
                "entries": [{"content": f"Step {n}", "priority": "medium", "status": "completed"}],
            },
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"Done: v{n + 1}. " * 20},
            },
            {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "Checked."},
            },
        ]
        updates += [json.dumps(u) for u in turn]
    conn = db.connect(path)
    conn.execute("BEGIN IMMEDIATE")
    stamp = "2025-06-01T00:00:00.000000Z"
    db.upsert_session(
        conn, db.SessionRow(session_id, workspace, [], "Long", stamp, stamp, "ask", "fake-model")
    )
    db.put_history(conn, session_id, 0, history, replace_from=0)
    db.put_updates(conn, session_id, 0, updates)
    conn.execute("COMMIT")
    conn.close()
    return session_id


def seed_many_sessions(path: Path, workspace: str, count: int) -> None:
    conn = db.connect(path)
    conn.execute("BEGIN IMMEDIATE")
    for n in range(count):
        stamp = f"2025-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000000Z"
        db.upsert_session(
            conn,
            db.SessionRow(f"sess_{n:06d}", workspace, [], f"Session {n}", stamp, stamp, "ask", "m"),
        )
    conn.execute("COMMIT")
    conn.close()


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home = Path(tmp, "home")
        (home / ".config").mkdir(parents=True)
        workspace = Path(tmp, "ws")
        workspace.mkdir()
        store = home / ".local" / "share" / "heron" / "sessions.db"
        broken = {"HERON_DATA_DIR": str(Path(tmp, "ws", "app.py", "nowhere"))}
        (workspace / "app.py").write_text("x = 1\n")

        # initialize and session/new: an empty home, then a home with a big store
        for label, env in (("no store", broken), ("store", None)):
            inits, news = [], []
            for _ in range(args.repeat):
                client, init_ms = start(fake, home, env)
                inits.append(init_ms)
                news.append(timed(lambda c=client: new_session(c, workspace)))
                client.kill()
            print(
                f"initialize ({label}): {statistics.median(inits):.1f} ms; "
                f"session/new: {statistics.median(news):.2f} ms"
            )

        session_id = seed_long_session(store, str(workspace), args.turns)
        seed_many_sessions(store, str(workspace), args.sessions)
        client, _ = start(fake, home)
        loads, counts = [], []
        for _ in range(args.repeat):
            params = {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
            loads.append(timed(lambda p=params: client.request("session/load", p)))
            counts.append(client.notes)
        print(
            f"session/load of {args.turns} turns ({counts[0]} updates replayed, "
            f"{args.turns * 10} stored): {statistics.median(loads):.1f} ms "
            f"(min {min(loads):.1f}, max {max(loads):.1f})"
        )

        firsts, deep = [], []
        for _ in range(args.repeat):
            firsts.append(timed(lambda: client.request("session/list", {})))
        cursor = None
        for _ in range(40):
            params = {"cursor": cursor} if cursor else {}
            started = time.perf_counter()
            page = client.request("session/list", params)
            deep.append((time.perf_counter() - started) * 1000)
            cursor = page.get("nextCursor")
        print(
            f"session/list over {args.sessions + 1} sessions: first page "
            f"{statistics.median(firsts):.2f} ms, pages 1-40 median "
            f"{statistics.median(deep):.2f} ms (max {max(deep):.2f})"
        )
        client.kill()

        # the 2000-delta flood, alternating with and without the store
        deltas = [f"w{n} " for n in range(2000)]
        with_store, without = [], []
        clients = {
            "store": start(fake, home)[0],
            "none": start(fake, home, broken)[0],
        }
        sessions = {k: new_session(c, workspace) for k, c in clients.items()}
        for key, c in clients.items():  # warm up: openai imported, store opened
            fake.script(text("warm"))
            prompt(c, sessions[key], "warm up")
        for _ in range(args.repeat):
            for key, out in (("store", with_store), ("none", without)):
                fake.script(text(*deltas))
                out.append(timed(lambda k=key: prompt(clients[k], sessions[k], "flood")))
        for c in clients.values():
            c.kill()
        a, b = statistics.median(with_store), statistics.median(without)
        print(
            f"2000-delta turn: with store {a:.1f} ms, store off {b:.1f} ms "
            f"({(a / b - 1) * 100:+.1f}%)"
        )


if __name__ == "__main__":
    main()
