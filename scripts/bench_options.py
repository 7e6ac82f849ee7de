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
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient, RpcError
from conftest import _heron_executable, heron_env
from fake_openai import FakeOpenAI, text


def start(fake: FakeOpenAI, home: Path, workspace: str) -> AcpClient:
    client = AcpClient(workspace)
    env = heron_env(fake, home, {"HERON_LOG_LEVEL": "warning", "OTHER_KEY": "sk-other"})
    client.start([_heron_executable()], env=env)
    client.initialize()
    return client


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def new_session(client: AcpClient, workspace: str) -> str:
    return client.new_session(workspace)


def unknown_method(client: AcpClient) -> None:
    with contextlib.suppress(RpcError):
        client.request("heron/no_such_method", {})


def discovery_run(client: AcpClient, fake: FakeOpenAI, workspace: str) -> tuple[float, ...]:
    """(session/new in flight, session/new cached, floor) in one fresh process."""
    first = new_session(client, workspace)  # cold (imports), starts discovery
    time.sleep(1.5)  # openai imported; the model list is still on its way
    asked = sum(r.path == "/v1/models" for r in fake.other_requests)
    in_flight = timed(lambda: new_session(client, workspace))
    floor = timed(lambda: unknown_method(client))
    client.wait_for_update(
        lambda u: u["sessionUpdate"] == "config_option_update", timeout=10, session_id=first
    )
    cached = timed(lambda: new_session(client, workspace))
    assert sum(r.path == "/v1/models" for r in fake.other_requests) == asked  # cached
    return in_flight, cached, floor


def session_new_figures(runs: int, workspace: str, home: Path) -> None:
    figures = []
    with FakeOpenAI() as fake:
        fake.models = ["fake-model", *(f"model-{i:03d}" for i in range(299))]
        fake.models_delay = 3.0
        for _ in range(runs):
            client = start(fake, home, workspace)
            try:
                figures.append(discovery_run(client, fake, workspace))
            finally:
                client.kill()
    in_flight, cached, floor = zip(*figures, strict=True)
    report("session/new, discovery in flight", list(in_flight))
    report("session/new, 300 models cached", list(cached))
    report("for scale, a request answered at once", list(floor))


def switch_figures(turns: int, workspace: str, home: Path) -> None:
    with FakeOpenAI() as fake, FakeOpenAI() as other:
        other.models = ["other-model"]
        config = home / ".config" / "heron" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'[providers.other]\nbase_url = "{other.base_url}"\napi_key_env = "OTHER_KEY"\n'
        )
        client = start(fake, home, workspace)
        try:
            session_id = new_session(client, workspace)

            def pick(value: str) -> None:
                params = {"sessionId": session_id, "configId": "model", "value": value}
                client.request("session/set_config_option", params)

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
                target = (other, "other/other-model") if i % 2 == 0 else (fake, "fake-model")
                pick(target[1])
                provider.append(turn(target[0]))
            # Each switch reached its server: the last request of each names its model.
            assert other.requests[-1].model == "other-model"
            assert fake.requests[-1].model == "fake-model"
        finally:
            client.kill()
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
