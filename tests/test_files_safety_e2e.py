"""No lost edits, and no hangs on odd files: the real `heron`, a scripted model, a test editor.

write_file needs the model to have seen a file's current text; writes keep symlinks, hard
links, owner, mode and xattrs and leave the original alone when the disk refuses; a client with
only one fs capability gets the disk for both; text that is not UTF-8 is never rewritten as
text; FIFOs are refused before they are opened (AGENTS.md, read_file, write_file, edit_file,
linked files); AGENTS.md stays inside the workspace and under 64 KB.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Call, text, tool_calls

NO_CAPS: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
FS_CAPS: dict[str, Any] = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
FULL = ("--mode", "full-access")


def run(heron, fake_llm, workspace, *calls: Call, caps=NO_CAPS, args=FULL, buffers=None):
    """One prompt turn in which the model makes `calls` one after the other; returns
    (client, turn, {call id: what the model read back}, {call id: final status})."""
    fake_llm.script(*[tool_calls(c) for c in calls], text("done"))
    client = heron(*args, client_capabilities=caps)
    client.buffers.update(buffers or {})
    turn = client.prompt(client.new_session(workspace), "go", timeout=60)
    assert turn["stopReason"] == "end_turn"
    results: dict[str, str] = {}
    for request in fake_llm.requests:
        for m in request.body["messages"]:
            if m["role"] == "tool":
                results[m["tool_call_id"]] = m["content"]
    status = {
        u["toolCallId"]: u["status"]
        for u in turn["updates"]
        if u.get("sessionUpdate", "").startswith("tool_call") and "status" in u
    }
    return client, turn, results, status


def read(path: str, id: str) -> Call:
    return Call("read_file", {"path": path}, id=id)


def write(path: str, content: str, id: str, **more: Any) -> Call:
    return Call("write_file", {"path": path, "content": content, **more}, id=id)


def edit(path: str, old: str, new: str, id: str) -> Call:
    return Call("edit_file", {"path": path, "old_string": old, "new_string": new}, id=id)


# ------------------------------------------------------------------ write_file needs a fresh read


def test_write_over_an_unread_file_fails_then_works_after_reading(heron, fake_llm, workspace):
    path = Path(workspace, "a.txt")
    path.write_text("the user's text\n")
    _, _, results, status = run(
        heron,
        fake_llm,
        workspace,
        write("a.txt", "model's text\n", "w1"),
        read("a.txt", "r"),
        write("a.txt", "model's text\n", "w2"),
    )
    assert status["w1"] == "failed"
    assert "not read it" in results["w1"] and "read_file" in results["w1"]
    assert status["w2"] == "completed"
    assert path.read_text() == "model's text\n"


def test_write_after_an_external_change_fails(heron, fake_llm, workspace):
    path = Path(workspace, "a.txt")
    path.write_text("v1\n")
    _, _, results, status = run(
        heron,
        fake_llm,
        workspace,
        read("a.txt", "r"),
        # Same size, right after the read: the digest catches what a coarse mtime would not.
        Call("bash", {"command": "printf 'v2\\n' > a.txt"}, id="b"),
        write("a.txt", "model\n", "w"),
    )
    assert status["b"] == "completed"
    assert status["w"] == "failed"
    assert "changed since you read it" in results["w"] and "read it again" in results["w"].lower()
    assert path.read_text() == "v2\n"


def test_a_file_the_model_wrote_or_edited_counts_as_seen(heron, fake_llm, workspace):
    path = Path(workspace, "n.txt")
    _, _, results, status = run(
        heron,
        fake_llm,
        workspace,
        write("n.txt", "one\n", "w1"),
        edit("n.txt", "one", "two", "e"),
        write("n.txt", "three\n", "w2"),
    )
    assert [status[i] for i in ("w1", "e", "w2")] == ["completed"] * 3, results
    assert path.read_text() == "three\n"


# ------------------------------------------------------------------ what a write keeps


def test_symlink_hard_link_mode_and_xattr_survive_a_write(heron, fake_llm, workspace):
    ws = Path(workspace)
    target = ws / "real.txt"
    target.write_text("real\n")
    (ws / "link.txt").symlink_to("real.txt")
    hard = ws / "hard.txt"
    hard.write_text("hard\n")
    os.link(hard, ws / "hard2.txt")
    inode = hard.stat().st_ino
    private, script = ws / "private.txt", ws / "run.sh"
    private.write_text("p\n")
    private.chmod(0o640)
    script.write_text("s\n")
    script.chmod(0o755)
    tagged = ws / "tagged.txt"
    tagged.write_text("t\n")
    try:
        os.setxattr(tagged, "user.heron", b"keep me")
        xattrs = True
    except OSError as exc:
        if exc.errno not in (errno.ENOTSUP, errno.EPERM):
            raise
        xattrs = False
    names = ["link.txt", "hard.txt", "private.txt", "run.sh", "tagged.txt"]
    calls = [read(n, f"r{i}") for i, n in enumerate(names)]
    calls += [write(n, f"new {n}\n", f"w{i}") for i, n in enumerate(names)]
    _, _, results, status = run(heron, fake_llm, workspace, *calls)
    assert all(status[f"w{i}"] == "completed" for i in range(len(names))), results
    assert (ws / "link.txt").is_symlink() and os.readlink(ws / "link.txt") == "real.txt"
    assert target.read_text() == "new link.txt\n"
    assert hard.stat().st_ino == inode and (ws / "hard2.txt").read_text() == "new hard.txt\n"
    assert private.stat().st_mode & 0o7777 == 0o640
    assert script.stat().st_mode & 0o7777 == 0o755
    if xattrs:
        assert os.getxattr(tagged, "user.heron") == b"keep me"
    assert not [p for p in ws.iterdir() if p.name.endswith(".heron-tmp")]


def test_a_new_file_gets_the_umask_mode(heron, fake_llm, workspace):
    old = os.umask(0o027)  # inherited by heron: its new files must honour it, never 0
    try:
        _, _, _, status = run(heron, fake_llm, workspace, write("new.txt", "x\n", "w"))
    finally:
        os.umask(old)
    assert status["w"] == "completed"
    assert Path(workspace, "new.txt").stat().st_mode & 0o777 == 0o640


def test_a_refused_write_leaves_the_original_and_no_temp_file(heron, fake_llm, workspace):
    """The disk refusing is simulated with RLIMIT_FSIZE (inherited by heron, which ignores
    SIGXFSZ like every Python program): writing past 64 KB fails with EFBIG, exactly where a
    full disk would fail with ENOSPC, deterministically and without root."""
    ws = Path(workspace)
    plain, hard = ws / "plain.txt", ws / "hard.txt"
    plain.write_text("original\n")
    hard.write_text("original hard\n")
    os.link(hard, ws / "hard2.txt")
    big = "y" * 100_000 + "\n"
    soft, hard_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    fake_llm.script(
        tool_calls(read("plain.txt", "r1")),
        tool_calls(read("hard.txt", "r2")),
        tool_calls(write("plain.txt", big, "w1")),
        tool_calls(write("hard.txt", big, "w2")),
        text("done"),
    )
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard_limit))
    try:
        client = heron(*FULL, client_capabilities=NO_CAPS)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard_limit))
    turn = client.prompt(client.new_session(workspace), "go", timeout=60)
    assert turn["stopReason"] == "end_turn"
    last = {
        m["tool_call_id"]: m["content"]
        for m in fake_llm.requests[-1].body["messages"]
        if m["role"] == "tool"
    }
    for call_id in ("w1", "w2"):
        assert "Could not write" in last[call_id] and "left as it was" in last[call_id]
    assert plain.read_text() == "original\n"
    assert (
        hard.read_text() == "original hard\n" and (ws / "hard2.txt").read_text() == hard.read_text()
    )
    assert not [p for p in ws.iterdir() if p.name.endswith(".heron-tmp")]


# ------------------------------------------------------------------ one source per file


@pytest.mark.parametrize("only", ["readTextFile", "writeTextFile"])
def test_a_client_with_one_fs_capability_gets_the_disk_for_both(heron, fake_llm, workspace, only):
    path = Path(workspace, "a.txt")
    path.write_text("on disk\nsecond disk line\n")
    caps = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    caps["fs"][only] = True
    client, _, results, status = run(
        heron,
        fake_llm,
        workspace,
        read("a.txt", "r"),
        edit("a.txt", "on disk", "edited", "e"),
        caps=caps,
        buffers={str(path): "unsaved buffer\n"},
    )
    assert results["r"] == "     1\ton disk\n     2\tsecond disk line"
    assert status["e"] == "completed"
    assert path.read_text() == "edited\nsecond disk line\n"  # no disk-only line lost
    assert client.buffers[str(path)] == "unsaved buffer\n"  # the buffer untouched
    assert [r.method for r in client.agent_requests if r.method.startswith("fs/")] == []


def test_a_new_file_is_asked_of_the_editor_and_not_found_means_new(heron, fake_llm, workspace):
    path = Path(workspace, "brand-new.txt")
    client, turn, _, status = run(
        heron, fake_llm, workspace, write("brand-new.txt", "hi\n", "w"), caps=FS_CAPS
    )
    assert status["w"] == "completed"
    fs = [(r.method, r.params["path"]) for r in client.agent_requests if r.method.startswith("fs/")]
    # Asked first (an unsaved buffer may hold it), written once the editor said "not found".
    assert fs[-1] == ("fs/write_text_file", str(path))
    assert fs[:-1] and set(fs[:-1]) == {("fs/read_text_file", str(path))}
    assert path.read_text() == "hi\n"
    shown = [u for u in turn["updates"] if u.get("toolCallId") == "w" and u.get("title")]
    assert shown[-1]["title"].startswith("Create brand-new.txt")


def test_through_the_editor_the_buffer_counts_as_seen_and_is_checked(heron, fake_llm, workspace):
    path = Path(workspace, "a.txt")
    path.write_text("disk\n")
    fake_llm.script(
        tool_calls(read("a.txt", "r")),
        tool_calls(write("a.txt", "model\n", "w1")),
        tool_calls(write("a.txt", "again\n", "w2")),
        text("done"),
    )
    client = heron(*FULL, client_capabilities=FS_CAPS)
    client.buffers[str(path)] = "unsaved\n"
    session = client.new_session(workspace)
    turn = client.prompt(session, "go")
    assert turn["stopReason"] == "end_turn"
    assert client.buffers[str(path)] == "again\n"
    # the user types in the buffer: the next write must not replace it
    client.buffers[str(path)] = "the user typed this\n"
    fake_llm.script(tool_calls(write("a.txt", "model\n", "w3")), text("done"))
    client.prompt(session, "again")
    result = next(
        m["content"]
        for m in fake_llm.requests[-1].body["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == "w3"
    )
    assert "changed since you read it" in result
    assert client.buffers[str(path)] == "the user typed this\n"


# ------------------------------------------------------------------ encodings


def test_latin1_and_binary_files_are_never_rewritten_as_text(heron, fake_llm, workspace):
    ws = Path(workspace)
    latin = "café = 'crème brûlée'\n".encode("latin-1")
    (ws / "latin.txt").write_bytes(latin)
    blob = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\xfe"
    (ws / "img.png").write_bytes(blob)
    (ws / "old.bin").write_bytes(blob)
    _, _, results, status = run(
        heron,
        fake_llm,
        workspace,
        read("latin.txt", "r1"),
        write("latin.txt", "cafe\n", "w1"),
        edit("latin.txt", "caf", "CAF", "e1"),
        read("img.png", "r2"),
        write("img.png", "text\n", "w2"),
        edit("img.png", "PNG", "GIF", "e2"),
        write("old.bin", "replaced on purpose\n", "w3", overwrite_binary=True),
    )
    assert status["r1"] == "completed"
    assert "not valid UTF-8" in results["r1"] and "Windows-1252" in results["r1"]
    assert "café" in results["r1"] and "\ufffd" not in results["r1"]
    for call_id in ("w1", "e1"):
        assert status[call_id] == "failed" and "not UTF-8" in results[call_id]
    assert "overwrite_binary" in results["w1"]
    assert status["r2"] == "failed" and "binary" in results["r2"]
    for call_id in ("w2", "e2"):
        assert status[call_id] == "failed" and "binary" in results[call_id]
    assert (ws / "latin.txt").read_bytes() == latin
    assert (ws / "img.png").read_bytes() == blob
    assert status["w3"] == "completed"
    assert (ws / "old.bin").read_text() == "replaced on purpose\n"


# ------------------------------------------------------------------ FIFOs and AGENTS.md


def test_fifos_are_refused_before_they_are_opened(heron, fake_llm, workspace):
    ws = Path(workspace)
    os.mkfifo(ws / "pipe")
    os.mkfifo(ws / "AGENTS.md")  # opening it would block the turn before the model is asked
    fake_llm.script(
        tool_calls(read("pipe", "r")),
        tool_calls(write("pipe", "x\n", "w")),
        tool_calls(edit("pipe", "a", "b", "e")),
        text("done"),
    )
    client = heron(*FULL, client_capabilities=NO_CAPS)
    session = client.new_session(workspace)
    link = {"type": "resource_link", "uri": f"file://{ws / 'pipe'}", "name": "pipe"}
    # Opening any of the FIFOs would block the turn for good: that it ends is the check.
    turn = client.prompt(session, [{"type": "text", "text": "go"}, link], timeout=60)
    assert turn["stopReason"] == "end_turn"
    first = fake_llm.requests[0].body["messages"]
    assert "<AGENTS.md>" not in first[0]["content"]
    assert "FIFO" in first[-1]["content"]  # the linked pipe: named, not read
    last = {
        m["tool_call_id"]: m["content"]
        for m in fake_llm.requests[-1].body["messages"]
        if m["role"] == "tool"
    }
    for call_id in ("r", "w", "e"):
        assert "FIFO" in last[call_id] and "not a regular file" in last[call_id]
    assert (ws / "pipe").is_fifo()


def test_agents_md_stays_inside_the_workspace_and_under_64_kb(heron, fake_llm, workspace, tmp_path):
    ws = Path(workspace)
    outside = tmp_path / "secret.md"
    outside.write_text("SECRET INSTRUCTIONS")
    (ws / "AGENTS.md").symlink_to(outside)
    fake_llm.script(text("a"), text("b"))
    client = heron("--mode", "ask")
    session = client.new_session(workspace)
    client.prompt(session, "hi")
    assert "SECRET" not in fake_llm.requests[0].body["messages"][0]["content"]

    (ws / "AGENTS.md").unlink()
    (ws / "AGENTS.md").write_text("Be brief.\n" + "z" * (10 * 1024 * 1024))
    client.prompt(client.new_session(workspace), "hi")  # a session reads its rules once
    system = fake_llm.requests[1].body["messages"][0]["content"]
    assert "Be brief." in system and "the rest is left out" in system
    assert len(system) < 64 * 1024 + 4000


def test_in_full_access_agents_md_may_be_a_link_out(heron, fake_llm, workspace, tmp_path):
    outside = tmp_path / "shared.md"
    outside.write_text("Shared rules.")
    Path(workspace, "AGENTS.md").symlink_to(outside)
    fake_llm.script(text("a"))
    client = heron(*FULL)
    client.prompt(client.new_session(workspace), "hi")
    assert "Shared rules." in fake_llm.requests[0].body["messages"][0]["content"]


# ------------------------------------------------------------------ large files


def test_reading_a_huge_file_reads_only_what_it_shows(heron, fake_llm, workspace):
    big = Path(workspace, "big.log")
    with open(big, "wb") as f:
        f.write(b"".join(b"log line %d\n" % n for n in range(1, 5001)))
        f.truncate(500 * 1024 * 1024)  # sparse: 500 MB on paper, a few KB on disk
    fake_llm.script(text("warm up"))
    client = heron(*FULL, client_capabilities=NO_CAPS)
    session = client.new_session(workspace)
    client.prompt(session, "hi")  # loads the model client, so the baseline is realistic
    fake_llm.script(tool_calls(read("big.log", "r")), text("done"))
    turn = client.prompt(session, "go", timeout=60)
    assert turn["stopReason"] == "end_turn"
    result = next(
        m["content"]
        for m in fake_llm.requests[-1].body["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == "r"
    )
    assert result.startswith("     1\tlog line 1\n") and "offset=2001" in result
    # The memory it takes (reading it whole would be 500 MB): scripts/bench_memory.py.


def test_cancel_answers_while_the_editor_sits_on_a_read(heron, fake_llm, workspace):
    Path(workspace, "a.txt").write_text("x\n")
    release = threading.Event()
    fake_llm.script(tool_calls(read("a.txt", "r")), text("done"))
    client = heron(*FULL, client_capabilities=FS_CAPS)
    client.handlers["fs/read_text_file"] = lambda params: (release.wait(30), {"content": ""})[1]
    session = client.new_session(workspace)
    try:
        pending = client.prompt_async(session, "go")
        client.wait_for_agent_request("fs/read_text_file")
        client.cancel(session)
        answer = pending.result(20)  # the editor holds the read for 30 s
    finally:
        release.set()
    assert answer["stopReason"] == "cancelled"
