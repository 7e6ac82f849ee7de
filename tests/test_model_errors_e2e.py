"""A model server's error reaches the user in the server's own words, and reads as one sentence
(issue 10): an Ollama 404 body is quoted, and a message that ends with a full stop does not get
a second one before Heron's advice."""

from __future__ import annotations

import subprocess

import pytest
from acp_client import RpcError
from conftest import _heron_executable, heron_env
from fake_openai import error, raw

OLLAMA_404 = (
    b'{"error":{"message":"model \\"qwen2.5-coder:7b\\" not found, try pulling it first",'
    b'"type":"api_error","param":null,"code":null}}'
)

CASES = [
    pytest.param(
        error(
            401,
            "Incorrect API key provided: sk-test. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
        ),
        "You can find your API key at https://platform.openai.com/account/api-keys. "
        "Check OPENAI_API_KEY.",
        id="openai-401",
    ),
    pytest.param(
        raw(OLLAMA_404, status=404, content_type="application/json"),
        '(404): model "qwen2.5-coder:7b" not found, try pulling it first. Check HERON_MODEL',
        id="ollama-404",
    ),
    pytest.param(
        raw(b'{"error":"model \'x\' not found"}', status=404, content_type="application/json"),
        "(404): model 'x' not found. Check HERON_MODEL",
        id="plain-error-string",
    ),
]


@pytest.mark.parametrize(("answer", "expected"), CASES)
def test_the_server_s_words_end_in_one_full_stop(heron, fake_llm, workspace, answer, expected):
    fake_llm.script(answer)
    client = heron()
    with pytest.raises(RpcError) as failure:
        client.prompt(client.new_session(workspace), "hi")
    assert expected in failure.value.message
    assert ".." not in failure.value.message.replace("…", "")


def test_heron_exec_prints_the_same_message(fake_llm, workspace, heron_home):
    fake_llm.script(raw(OLLAMA_404, status=404, content_type="application/json"))
    done = subprocess.run(
        [_heron_executable(), "exec", "--cwd", workspace, "hi"],
        input="",
        capture_output=True,
        text=True,
        env=heron_env(fake_llm, heron_home, None),
        timeout=60,
    )
    assert done.returncode == 1
    assert 'model "qwen2.5-coder:7b" not found, try pulling it first. Check' in done.stderr
    assert "Traceback" not in done.stderr
