"""The stdio JSON-RPC core, driven through the real executable like an editor drives it."""

from __future__ import annotations

import json
import subprocess

import pytest
from acp_client import RpcError


def test_initialize_negotiates_version_1_and_describes_heron(heron):
    client = heron(initialize=False)
    result = client.initialize(
        {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
    )
    assert result["protocolVersion"] == 1
    assert result["agentInfo"]["name"] == "heron"
    assert result["agentInfo"]["version"]
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": True, "audio": True, "embeddedContext": True}


@pytest.mark.parametrize("asked", [0, 2, 999])
def test_unsupported_protocol_version_is_answered_with_1_never_echoed(heron, asked):
    client = heron(initialize=False)
    assert client.initialize(protocol_version=asked)["protocolVersion"] == 1


def test_initialize_with_bad_params_is_invalid_params(heron):
    client = heron(initialize=False)
    with pytest.raises(RpcError) as err:
        client.request("initialize", {"protocolVersion": "one"})
    assert err.value.code == -32602
    # ... and the connection still works
    assert client.initialize()["protocolVersion"] == 1


def test_bad_lines_get_the_right_errors_and_the_server_keeps_serving(heron, workspace):
    client = heron()
    client.send_raw(b"this is not json\n")
    client.send_raw(b'{"jsonrpc":"2.0","id":41,"method":"no/such_method","params":{}}\n')
    client.send_raw(
        b'{"jsonrpc":"2.0","id":42,"method":"session/new","params":{"cwd":"relative/path","mcpServers":[]}}\n'
    )
    client.send_raw(
        b'{"jsonrpc":"2.0","id":43,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}\n'
    )
    client.send_raw(b'{"jsonrpc":"2.0","id":44,"method":"_heron/unknown","params":{}}\n')
    client.send_raw(b'{"jsonrpc":"2.0","method":"_heron/unknown_notification","params":{}}\n')
    client.send_raw(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}\n')
    assert client.next_response_for(None)["error"]["code"] == -32700
    assert client.next_response_for(41)["error"]["code"] == -32601
    assert client.next_response_for(42)["error"]["code"] == -32602
    assert client.next_response_for(43)["error"]["code"] == -32602
    assert client.next_response_for(44)["error"]["code"] == -32601
    # a good request after all that still works
    session_id = client.new_session(workspace)
    assert session_id.startswith("sess_")
    # notifications were never answered: exactly one response per request id sent
    ids = [r.get("id") for r in client.responses]
    assert sorted(i for i in ids if i is not None) == sorted(set(i for i in ids if i is not None))


def test_session_new_requires_an_absolute_existing_cwd(heron, workspace):
    client = heron()
    with pytest.raises(RpcError) as err:
        client.request("session/new", {"cwd": "not/absolute", "mcpServers": []})
    assert err.value.code == -32602
    with pytest.raises(RpcError) as err:
        client.request("session/new", {"mcpServers": []})
    assert err.value.code == -32602
    first = client.new_session(workspace)
    second = client.new_session(workspace)
    assert first != second


def test_a_50_mb_line_is_read(heron, workspace):
    client = heron()
    session_id = client.new_session(workspace)
    big = "x" * (50 * 1024 * 1024)
    # A huge (invalid) prompt block list: the line must be read whole and answered.
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "session/prompt",
            "params": {
                "sessionId": "unknown-" + session_id,
                "prompt": [{"type": "text", "text": big}],
            },
        }
    )
    client.send_raw(line.encode() + b"\n")
    answer = client.next_response_for(77, timeout=60)
    assert answer["error"]["code"] == -32602  # unknown session: it parsed the whole line


def test_exits_promptly_when_stdin_closes(heron, workspace):
    client = heron()
    client.new_session(workspace)
    client.close_stdin()
    assert client.wait_exit(timeout=30) == 0  # how fast: scripts/bench_startup.py's business


def test_help_and_version(tmp_path):
    from conftest import _heron_executable

    exe = _heron_executable()
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    assert version.returncode == 0 and version.stdout.startswith("heron ")
    helped = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10)
    assert helped.returncode == 0 and "--model" in helped.stdout and "--base-url" in helped.stdout


def test_python_dash_m_agent_speaks_acp(tmp_path):
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "agent"],
        input=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
        capture_output=True,
        timeout=20,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["result"]["agentInfo"]["name"] == "heron"


@pytest.mark.parametrize(
    ("config_text", "complaint"),
    [
        ('modle = "x"\n', "unknown setting"),
        ('mode = "yolo"\n', "mode must be one of"),
        ("max_turn_requests = 'lots'\n", "must be a number"),
        ("not toml [", "cannot read config"),
    ],
)
def test_a_bad_config_file_is_reported_on_stderr_and_stdout_stays_clean(
    tmp_path, config_text, complaint
):
    from conftest import _heron_executable

    config = tmp_path / "config.toml"
    config.write_text(config_text)
    proc = subprocess.run(
        [_heron_executable(), "--config", str(config)], input=b"", capture_output=True, timeout=10
    )
    # Heron keeps serving (the first prompt explains, see test_auth_e2e); here stdin is empty.
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert complaint in proc.stderr.decode()


def test_an_editor_that_stops_reading_makes_heron_exit(tmp_path):
    """stdout breaks (the editor closed its end): Heron notices on the next write and exits."""
    from conftest import _heron_executable

    proc = subprocess.Popen(
        [_heron_executable()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    initialize = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    proc.stdin.write(initialize)
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    proc.stdout.close()
    proc.stdin.write(initialize.replace(b'"id":1', b'"id":2'))
    proc.stdin.flush()
    try:
        assert proc.wait(timeout=5) == 0
    finally:
        proc.kill()
    stderr = proc.stderr.read().decode()
    assert "stdout is gone" in stderr and "Traceback" not in stderr
