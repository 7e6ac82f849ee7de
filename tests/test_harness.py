"""The test client itself: an agent that is gone fails the test at once, with its stderr."""

from __future__ import annotations

import sys
import time

import pytest
from acp_client import AcpClient


def test_a_dead_agent_fails_the_wait_at_once_with_its_stderr():
    # The agent exits, but a child it left behind keeps its stdout open: no EOF ever comes,
    # so only noticing the exit itself can end the wait before its timeout.
    script = (
        "import subprocess, sys; subprocess.Popen(['sleep', '30']); sys.exit('boom: bad config')"
    )
    client = AcpClient()
    client.start([sys.executable, "-c", script])
    started = time.monotonic()
    try:
        with pytest.raises(ConnectionError) as failure:
            client.initialize()
    finally:
        client.kill()
    assert time.monotonic() - started < 20  # not the 30 s the child holds stdout
    assert "boom: bad config" in str(failure.value)
    assert "exit code: 1" in str(failure.value)
