"""Unit tests of agent.acp.stdout: non-blocking writes that leave stdout's own flags alone."""

from __future__ import annotations

import io
import os
import socket
import sys
from pathlib import Path

import pytest

from agent.acp.stdout import open_nonblocking

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd")


@linux_only
def test_a_full_pipe_takes_nothing_instead_of_blocking_and_fd_1_stays_blocking():
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "wb") as stdout:
        sink = open_nonblocking(stdout)
        assert sink is not None and sink.fileno() != write_end
        assert os.get_blocking(write_end)  # the shared description keeps its flags
        data = memoryview(b"x" * (1 << 20))
        sent = sink.write(data)
        assert 0 < sent < len(data)  # a pipe holds far less than 1 MiB
        assert sink.write(data[sent:]) == 0
        assert len(os.read(read_end, 1 << 20)) > 0  # room again
        assert sink.write(data[sent:]) > 0
    os.close(read_end)


def test_a_socket_is_written_without_changing_its_blocking_mode():
    ours, theirs = socket.socketpair()
    with ours, theirs, os.fdopen(os.dup(theirs.fileno()), "wb") as stdout:
        sink = open_nonblocking(stdout)
        assert sink is not None
        data = memoryview(b"y" * (8 << 20))
        sent = sink.write(data)
        assert 0 < sent < len(data) and sink.write(data[sent:]) == 0
        assert theirs.getblocking() and os.get_blocking(stdout.fileno())


def test_regular_files_and_fake_streams_are_written_from_a_thread(tmp_path: Path):
    assert open_nonblocking(io.BytesIO()) is None
    with (tmp_path / "out").open("wb") as regular:
        assert open_nonblocking(regular) is None
