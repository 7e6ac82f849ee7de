"""Picker figures against the fake OpenAI server (no network, no model time):

- `session/new` while model discovery runs: in fresh processes, the first session starts the
  endpoint's `GET /v1/models` (answered after 3 s, 300 models); `session/new` is then timed
  while that request is in flight, and again once the 300 models are cached (a bigger option
  list to build). Beside it, the round trip of a request Heron answers at once (an unknown
  method) and `python -c pass`. Target: `session/new` within 20 ms.
- a model switch: a one-chunk prompt turn timed with no switch, right after switching the
  model on the same endpoint, and right after switching to another provider (alternating, so
  each turn changes endpoint), plus the `session/set_config_option` round trip itself.
  Target: a turn after a switch costs no more than one without.

    python scripts/bench_options.py [--runs 10] [--turns 30]

Prints medians; asserts nothing.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import _heron_executable, heron_env
from fake_openai import FakeOpenAI, text


class Raw:
    """Heron over its pipes with no checking at all: the test harness validates every message
    against the schema, which would be most of what is measured for a 300-model list."""

    def __init__(self, fake: FakeOpenAI, home: Path, workspace: str) -> None:
        env = heron_env(fake, home, {"HERON_LOG_LEVEL": "warning", "OTHER_KEY": "sk-other"})
        self.proc = subprocess.Popen(
            [_heron_executable()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.ids = itertools.count(1)
        self.notes: list[dict[str, Any]] = []
        self.workspace = workspace
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        rid = next(self.ids)
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == rid and "method" not in answer:
                return answer
            self.notes.append(answer)

    def wait_for_note(self, needle: str) -> None:
        assert self.proc.stdout
        while not any(needle in json.dumps(n) for n in self.notes):
            self.notes.append(json.loads(self.proc.stdout.readline()))

    def new_session(self) -> str:
        return self.request("session/new", {"cwd": self.workspace, "mcpServers": []})["result"][
            "sessionId"
        ]

    def prompt(self, session_id: str, text_: str) -> None:
        blocks = [{"type": "text", "text": text_}]
        answer = self.request("session/prompt", {"sessionId": session_id, "prompt": blocks})
        assert answer["result"]["stopReason"] == "end_turn", answer

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def models_asked(fake: FakeOpenAI) -> int:
    return sum(r.path == "/v1/models" for r in fake.other_requests)


def discovery_run(client: Raw, fake: FakeOpenAI) -> tuple[float, ...]:
    """(session/new in flight, session/new cached, floor) in one fresh process."""
    before = models_asked(fake)
    client.new_session()  # cold (imports), starts discovery
    while models_asked(fake) == before:  # openai imported, GET /v1/models sent
        time.sleep(0.01)
    time.sleep(0.2)  # the list is still on its way (the fake answers after 3 s)
    asked = models_asked(fake)
    in_flight = timed(client.new_session)
    floor = timed(lambda: client.request("heron/no_such_method", {}))
    client.wait_for_note("config_option_update")
    cached = timed(client.new_session)
    assert models_asked(fake) == asked  # the list was cached, not asked for again
    return in_flight, cached, floor


def session_new_figures(runs: int, workspace: str, home: Path) -> None:
    figures = []
    with FakeOpenAI() as fake:
        fake.models = ["fake-model", *(f"model-{i:03d}" for i in range(299))]
        fake.models_delay = 3.0
        for _ in range(runs):
            client = Raw(fake, home, workspace)
            try:
                figures.append(discovery_run(client, fake))
            finally:
                client.close()
    in_flight, cached, floor = zip(*figures, strict=True)
    report("session/new, discovery in flight", list(in_flight))
    report("session/new, 300 models cached", list(cached))
    report("for scale, a request answered at once (unknown method)", list(floor))


def switch_figures(turns: int, workspace: str, home: Path) -> None:
    with FakeOpenAI() as fake, FakeOpenAI() as other:
        fake.models = ["fake-model", "fake-model-mini"]
        other.models = ["other-model"]
        config = home / ".config" / "heron" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'[providers.other]\nbase_url = "{other.base_url}"\napi_key_env = "OTHER_KEY"\n'
        )
        client = Raw(fake, home, workspace)
        try:
            session_id = client.new_session()

            def pick(value: str) -> None:
                params = {"sessionId": session_id, "configId": "model", "value": value}
                assert "result" in client.request("session/set_config_option", params)

            def turn(server: FakeOpenAI) -> float:
                server.script(text("ok"))
                return timed(lambda: client.prompt(session_id, "hi"))

            for _ in range(3):  # warm: the model client, the store, both endpoints
                pick("other/other-model")
                turn(other)
                pick("fake-model")
                turn(fake)
            plain = [turn(fake) for _ in range(turns)]
            same_endpoint, provider, set_ms = [], [], []
            for i in range(turns):
                model = "fake-model-mini" if i % 2 == 0 else "fake-model"
                set_ms.append(timed(lambda model=model: pick(model)))
                same_endpoint.append(turn(fake))
            for i in range(turns):
                server, value = (other, "other/other-model") if i % 2 == 0 else (fake, "fake-model")
                pick(value)
                provider.append(turn(server))
            # Each switch reached its server: the last request of each names its model.
            assert other.requests[-1].model == "other-model"
            assert fake.requests[-1].model == "fake-model"
        finally:
            client.close()
    report("prompt turn, no switch", plain)
    report("prompt turn right after a model switch", same_endpoint)
    report("prompt turn right after a provider switch", provider)
    report("session/set_config_option (model)", set_ms)


def report(what: str, figures: list[float]) -> None:
    figures = sorted(figures)
    print(
        f"{what}: median {statistics.median(figures):.1f} ms "
        f"(min {figures[0]:.1f}, max {figures[-1]:.1f}, {len(figures)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / ".config").mkdir(parents=True)
        workspace = str(Path(tmp) / "ws")
        Path(workspace).mkdir()
        session_new_figures(args.runs, workspace, home)
        switch_figures(args.turns, workspace, home)
    python_pass = [sys.executable, "-c", "pass"]
    baseline = [timed(lambda: subprocess.run(python_pass, check=True)) for _ in range(10)]
    report("for scale, `python -c pass`", baseline)


if __name__ == "__main__":
    main()
