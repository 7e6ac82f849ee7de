"""Start-up as an editor sees it: what may (not) happen before `initialize` and `session/new` are
answered. Figures are in scripts/bench_startup.py; these tests hold the behaviour behind them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from conftest import _heron_executable, heron_env

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def new_session(cwd: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/new",
        "params": {"cwd": cwd, "mcpServers": []},
    }


def lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def test_session_new_is_answered_without_pydantic_openai_or_jsonschema(
    fake_llm, heron_home, workspace
):
    """Those imports were most of the time to `session/new`: none of them is on its path.
    (Without a model configured nothing is warmed up after it either, so every import the
    process made is on the path.)"""
    env = heron_env(
        fake_llm, heron_home, {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "HERON_MODEL": None}
    )
    env["PYTHONPROFILEIMPORTTIME"] = "1"
    proc = subprocess.Popen(
        [_heron_executable()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = proc.communicate(lines(INITIALIZE, new_session(workspace)), timeout=30)
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    session_id = answers[1]["result"]["sessionId"]
    assert re.fullmatch(r"sess_[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}", session_id)  # UUID4
    imported = set(re.findall(r"^import time:.*\|\s*([\w.]+)\s*$", err.decode(), re.MULTILINE))
    assert "agent.app.server" in imported  # the listing is there
    heavy = {"pydantic", "openai", "jsonschema", "jsonrpcserver", "agent.acp.protocol"}
    assert not heavy & imported


def test_settings_read_after_the_fast_answer_still_keep_stdout_clean(
    fake_llm, heron_home, workspace, tmp_path: Path
):
    """The settings are read after `initialize` is answered: a complaint about them goes to
    stderr, and stdout carries exactly the two answers."""
    config = tmp_path / "config.toml"
    config.write_text('modle = "x"\n')
    proc = subprocess.run(
        [_heron_executable(), "--config", str(config)],
        input=lines(INITIALIZE, new_session(workspace)),
        capture_output=True,
        env=heron_env(fake_llm, heron_home, None),
        timeout=30,
    )
    assert proc.returncode == 0
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    assert "result" in answers[0] and "sessionId" in answers[1]["result"]
    assert "unknown setting" in proc.stderr.decode()


def test_a_usage_error_ends_heron_before_it_reads_anything(fake_llm, heron_home):
    """Flags are parsed before the first line is read: a bad one is a usage error, not an
    answered `initialize` followed by an exit."""
    proc = subprocess.Popen(
        [_heron_executable(), "--mode", "yolo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=heron_env(fake_llm, heron_home, None),
    )
    assert proc.stdin is not None
    proc.stdin.write(lines(INITIALIZE))
    proc.stdin.flush()  # and stdin stays open
    try:
        assert proc.wait(timeout=20) == 2
        assert proc.stdout is not None and proc.stdout.read() == b""
        assert proc.stderr is not None and b"--mode" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
