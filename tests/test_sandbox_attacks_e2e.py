"""Auto mode under attack: one sandboxed command tries every way out, on every sandbox path.

For each path (bubblewrap, Heron's own namespaces, Landlock alone; the namespace paths also with
an emulated older Landlock ABI, and through the editor's terminal) the real `heron` runs, in
`--mode auto`, one command that makes every attempt of `sandbox_attack.py`: files, metadata and
devices outside, sockets (a Unix socket in the home folder, in $XDG_RUNTIME_DIR, in /tmp, an
abstract one, TCP and UDP to the host's loopback), signals to Heron and to the editor, ptrace,
a new user namespace, the keyring, git's hooks and config, `.heron/`, the size limits, and a
job that escapes with `setsid env -i`. Each test below then checks one attempt, from inside
(the call failed) and from outside (nothing changed, nothing arrived, nothing is left).
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp_client import DEFAULT_CAPABILITIES, AcpClient
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, text, tool_calls
from test_permissions_e2e import asked
from test_tools_e2e import TERMINAL_CAPS, tool_result

from agent.sandbox import bwrap, namespaces
from agent.sandbox.landlock import abi_version

ATTACK = Path(__file__).with_name("sandbox_attack.py")
SECRET = "SECRET-" + uuid.uuid4().hex
MEMORY_MB, FILE_MB = 256, 1

# name: (HERON_SANDBOX, HERON_LANDLOCK_ABI or None, through the editor's terminal)
PATHS = {
    "bwrap": ("bwrap", None, False),
    "userns": ("userns", None, False),
    "landlock": ("landlock", None, False),
    "bwrap-no-landlock": ("bwrap", "0", False),
    "userns-abi4": ("userns", "4", False),
    "bwrap-terminal": ("bwrap", None, True),
    "userns-terminal": ("userns", None, True),
}
NAMESPACED = {name for name, (path, _, _) in PATHS.items() if path != "landlock"}


def _skip_reason(name: str) -> str | None:
    path, _, _ = PATHS[name]
    if path == "bwrap" and bwrap.problem():
        return f"bwrap unusable here: {bwrap.problem()}"
    if path == "userns" and namespaces.available():
        return f"no user namespaces here: {namespaces.available()}"
    if path == "landlock" and abi_version() < 6:
        return "Landlock alone needs ABI 6"
    return None


@dataclass
class Attack:
    """One run of the attack and what the world looked like around it."""

    name: str
    results: dict[str, dict[str, Any]]
    model_read: str
    shown: str  # what the editor showed of the call
    asked: list[dict[str, Any]]
    targets: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any] = field(default_factory=dict)
    arrived: dict[str, list[bytes]] = field(default_factory=dict)
    survivors: list[int] = field(default_factory=list)

    def stopped(self, check: str) -> bool:
        assert check in self.results, f"{check} did not run: {self.model_read[-3000:]}"
        return bool(self.results[check]["stopped"])

    @property
    def namespaced(self) -> bool:
        return self.name in NAMESPACED


def _listen_unix(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()
    server.setblocking(False)
    return server


def _drain(server: socket.socket) -> list[bytes]:
    """What reached a server, without waiting: the turn is over, a connection or datagram sent
    on this machine would be queued by now."""
    got: list[bytes] = []
    with contextlib.suppress(BlockingIOError):
        while True:
            if server.type == socket.SOCK_DGRAM:
                got.append(server.recv(100))
                continue
            conn, _ = server.accept()
            with conn:
                conn.settimeout(1)
                got.append(conn.recv(100))
    return got


def _state(paths: list[Path]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for path in paths:
        try:
            st = path.stat()
            xattrs = os.listxattr(path)
        except OSError:
            state[str(path)] = None
            continue
        state[str(path)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid, xattrs)
    return state


def _run_attack(name: str, tmp: Path) -> Attack:
    sandbox, abi, terminal = PATHS[name]
    home, ws, outside, run = tmp / "home", tmp / "ws", tmp / "outside", tmp / "run"
    for folder in (home / ".ssh", home / "bin", home / ".config" / "heron", ws, outside, run):
        folder.mkdir(parents=True)
    (home / ".config" / "heron" / "config.toml").write_text(
        f"sandbox_max_memory_mb = {MEMORY_MB}\nsandbox_max_file_mb = {FILE_MB}\n"
    )
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    tool = home / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho tool\n")
    tool.chmod(0o755)
    (outside / "secret.txt").write_text("outside\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".heron" / "commands").mkdir(parents=True)
    marker = f"9999.{uuid.uuid4().int % 10**6:06d}"
    system_tmp = Path("/tmp") / f"heron-attack-{uuid.uuid4().hex}"
    tmp_socket = f"/tmp/heron-attack-{uuid.uuid4().hex[:12]}.sock"
    servers = {
        "home_socket": _listen_unix(str(home / ".docker.sock")),
        "runtime_socket": _listen_unix(str(run / "bus")),
        "tmp_socket": _listen_unix(tmp_socket),
    }
    abstract = f"heron-attack-{uuid.uuid4().hex}"
    servers["abstract"] = _listen_unix("\0" + abstract)
    tcp = socket.create_server(("127.0.0.1", 0))
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    servers |= {"tcp": tcp, "udp": udp}
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    watched = [tool, outside / "secret.txt", ws / ".git" / "config", ws / ".git" / "hooks"]
    targets = {
        "outside_file": str(outside / "secret.txt"),
        "home_secret": str(home / ".ssh" / "id_rsa"),
        "system_tmp_file": str(system_tmp),
        "visible_outside": str(tool),
        "home_socket": str(home / ".docker.sock"),
        "runtime_socket": str(run / "bus"),
        "tmp_socket": tmp_socket,
        "abstract_name": abstract,
        "tcp_port": tcp.getsockname()[1],
        "udp_port": udp.getsockname()[1],
        "editor_pid": os.getpid(),
        "other_pty": os.ttyname(slave),
        "git_hook": str(ws / ".git" / "hooks" / "pre-commit"),
        "git_config": str(ws / ".git" / "config"),
        "heron_command": str(ws / ".heron" / "commands" / "evil.md"),
        "big_file": str(ws / "big.bin"),
        "big_size": 2 * FILE_MB * 1024 * 1024,
        "big_memory": 2 * MEMORY_MB * 1024 * 1024,
        "escape_marker": marker,
    }
    fake = FakeOpenAI()
    client = AcpClient(str(ws))
    env = {
        "HERON_SANDBOX": sandbox,
        "HERON_LANDLOCK_ABI": abi,
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "XDG_RUNTIME_DIR": str(run),
    }
    try:
        with fake:
            client.start(
                [_heron_executable(), "--mode", "auto"],
                env=heron_env(fake, home, env),
                cwd=str(tmp),
            )
            client.initialize(TERMINAL_CAPS if terminal else DEFAULT_CAPABILITIES)
            targets["heron_pid"] = client.proc.pid if client.proc else 0
            (ws / "targets.json").write_text(json.dumps(targets))
            (ws / ATTACK.name).write_text(ATTACK.read_text())  # the tests folder is not visible
            command = f"{sys.executable} {ATTACK.name} targets.json"
            fake.script(tool_calls(Call("bash", {"command": command}, id="a")), text("done"))
            before = _state(watched)
            turn = client.prompt(client.new_session(ws), "attack", timeout=120)
            model_read = tool_result(fake.requests[1], "a")
            shown = json.dumps([u for u in turn["updates"] if u.get("toolCallId")])
            results = {}
            for line in model_read.splitlines():
                if line.startswith('{"check"'):
                    entry = json.loads(line)
                    results[entry["check"]] = entry
            attack = Attack(name, results, model_read, shown, asked(client), targets, before)
            attack.after = _state(watched)
            attack.after["system_tmp"] = system_tmp.exists()
            attack.arrived = {key: _drain(server) for key, server in servers.items()}
            try:
                attack.arrived["other_pty"] = [os.read(master, 100)]
            except BlockingIOError:
                attack.arrived["other_pty"] = []
            attack.survivors = _processes_with(marker)
            client.close_stdin()
            client.wait_exit(30)
            client.assert_clean()
            return attack
    finally:
        client.kill()
        for server in servers.values():
            server.close()
        os.close(master)
        os.close(slave)
        with contextlib.suppress(OSError):
            os.unlink(tmp_socket)
        with contextlib.suppress(OSError):
            system_tmp.unlink()
        for pid in _processes_with(marker):
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


def _processes_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
    return found


@pytest.fixture(scope="module", params=list(PATHS))
def attack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Attack]:
    if reason := _skip_reason(request.param):
        pytest.skip(reason)
    yield _run_attack(request.param, tmp_path_factory.mktemp(request.param))


def test_nothing_was_asked_and_every_attempt_ran(attack: Attack) -> None:
    assert attack.asked == []
    assert "escape_job" in attack.results, attack.model_read[-3000:]


def test_files_outside_the_workspace_are_neither_written_nor_read(attack: Attack) -> None:
    assert attack.stopped("write_outside")
    assert attack.stopped("read_home_secret")
    assert SECRET not in attack.model_read and SECRET not in attack.shown
    outside = attack.targets["outside_file"]
    assert attack.after[outside] == attack.before[outside]
    assert not attack.after["system_tmp"]  # /tmp is private, or not writable at all


@pytest.mark.parametrize("check", ["chmod", "utime", "truncate", "xattr", "chown"])
def test_metadata_outside_the_workspace_cannot_change(attack: Attack, check: str) -> None:
    assert attack.stopped(f"{check}_outside")
    tool = attack.targets["visible_outside"]
    assert attack.after[tool] == attack.before[tool]


@pytest.mark.parametrize("where", ["home_socket", "runtime_socket", "tmp_socket", "abstract"])
def test_unix_sockets_outside_cannot_be_reached(attack: Attack, where: str) -> None:
    check = "abstract_socket" if where == "abstract" else f"unix_socket_{where.split('_')[0]}"
    assert attack.stopped(check)
    assert attack.arrived[where] == []


def test_the_network_is_closed(attack: Attack) -> None:
    assert attack.stopped("tcp_loopback")
    assert attack.arrived["tcp"] == []
    assert attack.arrived["udp"] == []  # sent into an empty network, or not sent at all


def test_heron_and_the_editor_cannot_be_signalled_or_traced(attack: Attack) -> None:
    assert attack.stopped("signal_heron")
    assert attack.stopped("signal_editor")
    assert attack.stopped("ptrace_heron")


def test_other_terminals_cannot_be_written(attack: Attack) -> None:
    assert attack.stopped("other_terminal")
    assert attack.arrived["other_pty"] == []


def test_no_new_user_namespace_and_no_keyring(attack: Attack) -> None:
    assert attack.stopped("unshare_user")
    assert attack.stopped("keyctl")


def test_git_and_heron_settings_are_read_only_or_reported(attack: Attack) -> None:
    git_config = attack.targets["git_config"]
    if attack.namespaced:
        for check in ("git_hook", "git_config", "heron_folder"):
            assert attack.stopped(check), attack.results[check]
        assert attack.after[git_config] == attack.before[git_config]
        assert not Path(attack.targets["git_hook"]).exists()
    else:  # Landlock alone cannot keep them read-only: the change is said to both
        assert "Warning: the command changed" in attack.model_read
        assert "Warning: the command changed" in attack.shown
        assert ".git/config" in attack.model_read


def test_a_file_and_a_process_cannot_grow_past_the_limits(attack: Attack) -> None:
    assert attack.stopped("big_file")
    assert Path(attack.targets["big_file"]).stat().st_size <= FILE_MB * 1024 * 1024
    assert attack.stopped("big_memory")


def test_a_job_that_left_its_group_and_environment_ends_with_the_command(attack: Attack) -> None:
    assert attack.survivors == []
