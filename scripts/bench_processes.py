"""Process and memory figures for local `bash` commands, against the fake OpenAI server:

- RSS growth of Heron while a noisy command writes 1 MB/s for --seconds (default 60), next to a
  quiet command (`sleep`) of the same length as the baseline;
- cancel latency (session/cancel sent → `cancelled` answer) for a process tree that ignores
  SIGTERM and escapes the process group (setsid, nohup), next to a plain `sleep` as the
  baseline; median of --runs;
- how many processes of those trees survive (scanned in /proc by a tag in their environment).

    python scripts/bench_processes.py [--seconds 60] [--runs 5]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from acp_client import AcpClient
from conftest import _heron_executable, heron_env
from fake_openai import Call, FakeOpenAI, text, tool_calls

NO_CAPS = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
TAG = "BENCH_TAG"


def start(fake: FakeOpenAI, home: Path, workspace: str) -> AcpClient:
    client = AcpClient(workspace)
    env = heron_env(fake, home, {"HERON_LOG_LEVEL": "warning"})
    client.start([_heron_executable(), "--mode", "full-access"], env=env)
    client.initialize(NO_CAPS)
    return client


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def tagged(tag: str) -> int:
    needle = f"{TAG}={tag}".encode()
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            if state not in (b"Z", b"X") and needle in (entry / "environ").read_bytes().split(
                b"\0"
            ):
                count += 1
        except OSError:
            continue
    return count


def rss_growth(fake: FakeOpenAI, client: AcpClient, session: str, command: str) -> int:
    """kB Heron's RSS grew from the command's first second to its end."""
    fake.script(tool_calls(Call("bash", {"command": command, "timeout": 600}, id="c")), text("k"))
    pending = client.prompt_async(session, "go")
    client.wait_for_update(lambda u: u.get("status") == "in_progress", timeout=30)
    time.sleep(1)
    before = rss_kb(client.proc.pid)
    pending.result(timeout=900)
    return rss_kb(client.proc.pid) - before


def cancel_ms(fake: FakeOpenAI, client: AcpClient, session: str, command: str, tag: str) -> float:
    fake.script(tool_calls(Call("bash", {"command": command}, id="c")))  # cancelled: no reply
    pending = client.prompt_async(session, "go")
    deadline = time.monotonic() + 10
    while tagged(tag) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # let the whole tree start
    started = time.monotonic()
    client.cancel(session)
    pending.result(timeout=30)
    return (time.monotonic() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        home = Path(tmp, "home")
        (home / ".config").mkdir(parents=True)
        workspace = str(Path(tmp, "ws"))
        Path(workspace).mkdir()
        client = start(fake, home, workspace)
        session = client.new_session(workspace)
        fake.script(text("warm up"))
        client.prompt(session, "hi")

        n = opts.seconds
        quiet = rss_growth(fake, client, session, f"sleep {n}")
        noisy = rss_growth(
            fake,
            client,
            session,
            f"for i in $(seq {n * 10}); do head -c 100000 /dev/zero | tr '\\0' a; echo; "
            "sleep 0.1; done",
        )
        print(f"RSS growth over {n} s: quiet command {quiet} kB, noisy (1 MB/s) {noisy} kB")

        plain, stubborn, survivors = [], [], 0
        for _ in range(opts.runs):
            tag = uuid.uuid4().hex
            plain.append(cancel_ms(fake, client, session, f"export {TAG}={tag}; sleep 1000", tag))
            time.sleep(1)
            survivors += tagged(tag)
            tag = uuid.uuid4().hex
            tree = (
                f"export {TAG}={tag}; setsid sleep 1000 & nohup sleep 1000 & "
                "(trap '' TERM; sleep 1000) & trap '' TERM; sleep 1000"
            )
            stubborn.append(cancel_ms(fake, client, session, tree, tag))
            time.sleep(1)  # SIGKILL comes after a 0.5 s grace
            survivors += tagged(tag)
        print(
            f"cancel latency, median of {opts.runs}: plain sleep {statistics.median(plain):.1f} ms,"
            f" SIGTERM-ignoring escaping tree {statistics.median(stubborn):.1f} ms"
            f" (max {max(stubborn):.1f} ms)"
        )
        print(f"processes surviving 1 s after cancel: {survivors}")

        tag = uuid.uuid4().hex
        tree = (
            f"export {TAG}={tag}; setsid sleep 1000 & nohup sleep 1000 & "
            "(trap '' TERM; sleep 1000) & trap '' TERM; sleep 1000"
        )
        fake.script(tool_calls(Call("bash", {"command": tree}, id="c")))
        client.prompt_async(session, "go")
        while tagged(tag) < 4:
            time.sleep(0.01)
        started = time.monotonic()
        client.proc.terminate()
        code = client.proc.wait(10)
        exit_ms = (time.monotonic() - started) * 1000
        print(
            f"SIGTERM to Heron with that tree running: exit code {code} after {exit_ms:.0f} ms, "
            f"{tagged(tag)} processes left"
        )
        client.kill()


if __name__ == "__main__":
    main()
