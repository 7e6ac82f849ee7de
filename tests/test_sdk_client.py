"""Conformance: the real `heron` executable driven by the official ACP Python SDK's client side.

Every other end-to-end test talks to Heron through our own `acp_client` and checks messages
against our copy of the schema. Here a second, independent implementation, the PyPI package
`agent-client-protocol` (import name `acp`), spawns the agent and parses every message with its
own pydantic models: a test passing here shows that what Heron sends is accepted by it.

The SDK is lenient in places (unknown fields are ignored, a malformed optional field falls
back to its default, invalid list items are dropped, a notification that fails validation is
only logged), so a raw-message observer also checks that each message from the agent reached
our handlers and parsed without losing anything.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import (
    PROTOCOL_VERSION,
    CreateElicitationResponse,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    ReadTextFileResponse,
    RequestError,
    RequestPermissionRequest,
    RequestPermissionResponse,
    SessionNotification,
    WriteTextFileResponse,
    spawn_agent_process,
    text_block,
)
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    CreateElicitationRequest,
    DeniedOutcome,
    FileEditToolCallContent,
    FileSystemCapabilities,
    ForkSessionResponse,
    Implementation,
    PermissionOption,
    ReadTextFileRequest,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
    WriteTextFileRequest,
)
from conftest import heron_env
from fake_openai import Call, FakeOpenAI, stall, text, tool_calls
from pydantic import BaseModel, TypeAdapter, ValidationError

# Seconds for a whole test, so a hang fails instead of blocking the run. asyncio.timeout cancels
# once (anyio.fail_after would keep cancelling), so the SDK can still shut the agent down.
TIMEOUT = 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ------------------------------------------------------------------------------ the SDK client


class SdkClient:
    """An `acp.Client`: records every call, allows once, serves fs from the disk."""

    def __init__(self) -> None:
        self.updates: list[SessionNotification] = []
        self.permission_requests: list[RequestPermissionRequest] = []
        self.reads: list[ReadTextFileRequest] = []
        self.writes: list[WriteTextFileRequest] = []
        self._changed = asyncio.Event()

    # ---- acp.Client

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(SessionNotification(session_id=session_id, update=update))
        self._changed.set()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(
            RequestPermissionRequest(session_id=session_id, tool_call=tool_call, options=options)
        )
        allow = next((o for o in options if o.kind == "allow_once"), None)
        if allow is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(
            ReadTextFileRequest(session_id=session_id, path=path, line=line, limit=limit)
        )
        try:
            content = Path(path).read_text()
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None
        if line is not None or limit is not None:
            lines = content.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            end = None if limit is None else start + limit
            content = "".join(lines[start:end])
        return ReadTextFileResponse(content=content)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes.append(WriteTextFileRequest(session_id=session_id, path=path, content=content))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        return WriteTextFileResponse()

    # No terminal capability is advertised: any terminal request is a protocol violation.
    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/kill")

    # ---- for the tests

    def session_updates(self, kind: type | None = None) -> list[Any]:
        """The `update` of every notification, optionally only those of one SDK model type."""
        return [n.update for n in self.updates if kind is None or isinstance(n.update, kind)]

    async def wait_for_update(self, predicate: Callable[[Any], bool]) -> Any:
        while True:
            found = [u for u in self.session_updates() if predicate(u)]
            if found:
                return found[0]
            self._changed.clear()
            await self._changed.wait()


# ------------------------------------------------------------------------------ raw traffic


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


# The SDK model for each message the agent may send, and for its results to our requests.
AGENT_MESSAGES: dict[str, type[BaseModel]] = {
    "session/update": SessionNotification,
    "session/request_permission": RequestPermissionRequest,
    "fs/read_text_file": ReadTextFileRequest,
    "fs/write_text_file": WriteTextFileRequest,
}
AGENT_RESULTS: dict[str, type[BaseModel]] = {
    "initialize": InitializeResponse,
    "session/new": NewSessionResponse,
    "session/prompt": PromptResponse,
    "session/fork": ForkSessionResponse,
}


class SteeringResponse(BaseModel):
    """`_session/steering`'s answer (an extension: the SDK has no model of it)."""

    outcome: str
    reason: str | None = None


AGENT_MESSAGES["elicitation/create"] = CreateElicitationRequest  # type: ignore[assignment]
AGENT_RESULTS["_session/steering"] = SteeringResponse


def _newer_than_the_sdk(message: dict[str, Any]) -> dict[str, Any]:
    """`message` without the fields of the ACP schema Heron follows that the SDK's older one
    (release 1.19) does not have yet: a tool call's `name` (schema 1.20)."""
    message = json.loads(json.dumps(message))
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    for call in (params.get("update"), params.get("toolCall")):
        if isinstance(call, dict) and ("toolCallId" in call):
            call.pop("name", None)
    return message


@dataclass
class Traffic:
    """Every JSON-RPC message on the wire, as the SDK's stream observer saw it."""

    incoming: list[dict[str, Any]] = field(default_factory=list)
    outgoing: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, event: StreamEvent) -> None:
        (self.incoming if event.direction == StreamDirection.INCOMING else self.outgoing).append(
            event.message
        )

    def from_agent(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.incoming if m.get("method") == method]

    def problems(self, client: SdkClient) -> list[str]:
        """What the SDK rejected, dropped or changed of what the agent sent."""
        found: list[str] = []
        sent_methods = {m["id"]: m["method"] for m in self.outgoing if "method" in m and "id" in m}
        for message in map(_newer_than_the_sdk, self.incoming):
            if "method" in message:  # a request or notification from the agent
                what = message["method"]
                model = AGENT_MESSAGES.get(what)
                params = message.get("params")
            elif "result" in message:  # the answer to one of our requests
                what = f"result of {sent_methods.get(message.get('id'))}"
                model = AGENT_RESULTS.get(sent_methods.get(message.get("id"), ""))
                params = message["result"]
            else:
                continue  # error answers surface as RequestError in the test itself
            if model is None:
                found.append(f"{what}: not a message the SDK client knows: {json.dumps(message)}")
                continue
            try:
                parsed = _dump(TypeAdapter(model).validate_python(params))
            except ValidationError as exc:
                found.append(f"{what} REJECTED by the SDK: {exc}\n  sent {json.dumps(params)}")
                continue
            if parsed != params:
                found.append(
                    f"{what} altered by SDK parsing (dropped/defaulted fields or items):"
                    f"\n  sent   {json.dumps(params, sort_keys=True)}"
                    f"\n  parsed {json.dumps(parsed, sort_keys=True)}"
                )
        updates = len(self.from_agent("session/update"))
        if updates != len(client.updates):
            found.append(
                f"{updates} session/update notifications on the wire, but only "
                f"{len(client.updates)} reached the SDK client's session_update handler"
            )
        errors = [m for m in self.outgoing if "error" in m and "id" in m]
        found += [f"the SDK client answered an agent request with an error: {e}" for e in errors]
        return found


@dataclass
class Heron:
    conn: ClientSideConnection
    client: SdkClient
    traffic: Traffic
    process: Any
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def _heron_executable() -> str:
    return str(Path(sys.executable).parent / "heron")


@pytest.fixture
def sdk_heron(
    fake_llm: FakeOpenAI, workspace: str, heron_home: Path, tmp_path: Path
) -> Callable[..., Any]:
    """``async with sdk_heron(*args, env=None) as h``: heron spawned by the SDK (not initialized).

    On exit the agent is shut down (stdin closed) and the test fails if the SDK rejected,
    dropped or altered anything the agent sent.
    """
    launch_dir = tmp_path / "launch"
    launch_dir.mkdir(exist_ok=True)
    counter = iter(range(1000))

    @asynccontextmanager
    async def start(*args: str, env: dict[str, str | None] | None = None) -> AsyncIterator[Heron]:
        client = SdkClient()
        traffic = Traffic()
        stderr_path = tmp_path / f"heron-{next(counter)}.stderr"
        process = None
        with stderr_path.open("wb") as stderr:
            try:
                async with spawn_agent_process(
                    client,
                    _heron_executable(),
                    *args,
                    env=heron_env(fake_llm, heron_home, env),
                    cwd=launch_dir,
                    # the agent logs at debug level: never let an unread stderr pipe block it
                    transport_kwargs={"stderr": stderr, "limit": 16 * 1024 * 1024},
                    observers=[traffic],
                    # elicitation/create is unstable in the SDK's schema (stable since 1.21)
                    use_unstable_protocol=True,
                ) as (conn, process):
                    heron = Heron(conn, client, traffic, process, stderr_path)
                    yield heron
            finally:
                if process is not None and process.returncode is None:
                    process.kill()  # the SDK's graceful shutdown was itself interrupted
            problems = traffic.problems(client)
            assert not problems, "\n".join(problems) + f"\n--- agent stderr:\n{heron.stderr()}"

    return start


async def initialize(conn: ClientSideConnection) -> Any:
    return await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False
        ),
        client_info=Implementation(name="acp-python-sdk-conformance", version="0"),
    )


def message_text(updates: list[Any]) -> list[str]:
    return [u.content.text for u in updates if isinstance(u, AgentMessageChunk)]


# -------------------------------------------------------------------------------------- tests


@pytest.mark.anyio
async def test_initialize(sdk_heron):
    async with asyncio.timeout(TIMEOUT):
        async with sdk_heron() as h:
            response = await initialize(h.conn)
    assert response.protocol_version == 1
    assert response.agent_info is not None
    assert response.agent_info.name == "heron"
    assert response.agent_info.version
    # the SDK's view of the capabilities matches what was on the wire
    (raw,) = [m for m in h.traffic.incoming if m.get("id") == 0]
    assert _dump(response) == raw["result"]


@pytest.mark.anyio
async def test_streamed_text_turn(sdk_heron, fake_llm, workspace):
    fake_llm.script(text("Hel", "lo, ", "world."))
    async with asyncio.timeout(TIMEOUT):
        async with sdk_heron() as h:
            await initialize(h.conn)
            session = await h.conn.new_session(cwd=workspace, mcp_servers=[])
            assert session.session_id
            response = await h.conn.prompt(
                session_id=session.session_id, prompt=[text_block("Say hello")]
            )
    assert response.stop_reason == "end_turn"
    chunks = h.client.session_updates(AgentMessageChunk)
    # Deltas that arrive together may be merged into one notification: the text is what counts.
    assert "".join(message_text(chunks)) == "Hello, world."
    assert all(u.content.type == "text" for u in chunks)
    assert {n.session_id for n in h.client.updates} == {session.session_id}
    assert fake_llm.requests[0].body["messages"][-1]["content"] == "Say hello"


@pytest.mark.anyio
async def test_edit_file_turn_with_permission_and_client_fs(sdk_heron, fake_llm, workspace):
    path = Path(workspace, "app.py")
    before = "def main():\n    print('hi')\n"
    after = "def main():\n    print('hello')\n"
    path.write_text(before)
    args = {"path": "app.py", "old_string": "print('hi')", "new_string": "print('hello')"}
    fake_llm.script(tool_calls(Call("edit_file", args, id="e1")), text("Edited ", "it."))
    async with asyncio.timeout(TIMEOUT):
        async with sdk_heron("--mode", "ask") as h:
            await initialize(h.conn)
            session = await h.conn.new_session(cwd=workspace, mcp_servers=[])
            sid = session.session_id
            response = await h.conn.prompt(session_id=sid, prompt=[text_block("rename it")])
    assert response.stop_reason == "end_turn"
    client = h.client

    # tool_call, then tool_call_updates carrying the diff, ending completed
    mine = [u for u in client.session_updates() if getattr(u, "tool_call_id", None) == "e1"]
    assert isinstance(mine[0], ToolCallStart)
    assert mine[0].kind == "edit"
    assert mine[0].status == "pending"
    assert len(mine) > 1 and all(isinstance(u, ToolCallProgress) for u in mine[1:])
    assert [u.status for u in mine if u.status] == ["pending", "in_progress", "completed"]
    diffs = [c for u in mine for c in (u.content or []) if isinstance(c, FileEditToolCallContent)]
    assert diffs, "no diff content item in the tool_call / tool_call_update notifications"
    for diff in diffs:
        assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
            "diff",
            str(path),
            before,
            after,
        )

    # one permission request, four options, the same call, answered allow_once
    (asked,) = client.permission_requests
    assert asked.session_id == sid
    assert asked.tool_call.tool_call_id == "e1"
    assert [o.kind for o in asked.options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert all(o.name and o.option_id for o in asked.options)
    assert any(isinstance(c, FileEditToolCallContent) for c in asked.tool_call.content or [])

    # the agent read through the client and wrote the new content through it
    assert client.reads, "the agent did not read the file through fs/read_text_file"
    assert {(r.session_id, r.path) for r in client.reads} == {(sid, str(path))}
    assert [(w.session_id, w.path, w.content) for w in client.writes] == [(sid, str(path), after)]
    assert path.read_text() == after  # written by SdkClient.write_text_file

    # wire order: diff shown, then permission asked, then (only then) the write
    wire = h.traffic.incoming
    requests = [(i, m["method"]) for i, m in enumerate(wire) if "method" in m and "id" in m]
    methods = [m for _, m in requests]
    assert methods[0] == "fs/read_text_file"
    assert methods.count("session/request_permission") == 1
    assert methods[-1] == "fs/write_text_file" and methods.count("fs/write_text_file") == 1
    asked_at = next(i for i, m in requests if m == "session/request_permission")
    assert asked_at < next(i for i, m in requests if m == "fs/write_text_file")
    diff_shown_at = next(
        i
        for i, m in enumerate(wire)
        if m.get("method") == "session/update"
        and any(c.get("type") == "diff" for c in m["params"]["update"].get("content") or [])
    )
    assert diff_shown_at < asked_at

    # the model's follow-up text ends the turn
    assert "".join(message_text(client.session_updates())) == "Edited it."
    conversation = [u for u in client.session_updates() if type(u).__name__ != "UsageUpdate"]
    assert isinstance(conversation[-1], AgentMessageChunk)


@pytest.mark.anyio
async def test_cancel_a_stalled_stream(sdk_heron, fake_llm, workspace):
    fake_llm.script(stall(text("Thinking about it")))
    async with asyncio.timeout(TIMEOUT):
        async with sdk_heron() as h:
            await initialize(h.conn)
            session = await h.conn.new_session(cwd=workspace, mcp_servers=[])
            sid = session.session_id
            turn = asyncio.create_task(
                h.conn.prompt(session_id=sid, prompt=[text_block("Write a novel")])
            )
            await h.client.wait_for_update(lambda u: isinstance(u, AgentMessageChunk))
            assert not turn.done()
            await h.conn.cancel(session_id=sid)
            response = await turn
            gone = await asyncio.to_thread(fake_llm.client_gone.wait, 5)
            # the session still works after a cancelled turn
            fake_llm.script(text("Done."))
            again = await h.conn.prompt(session_id=sid, prompt=[text_block("Shorter, please")])
    assert response.stop_reason == "cancelled"
    assert gone, "the model stream was not closed on cancel"
    assert again.stop_reason == "end_turn"
    assert message_text(h.client.session_updates()) == ["Thinking about it", "Done."]
    cancels = [m for m in h.traffic.outgoing if m.get("method") == "session/cancel"]
    assert cancels == [{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}]


# ---------------------------------------------------- the conversation in the user's hands (28)


class GatedClient(SdkClient):
    """Holds permission answers until `gate` is set; answers forms with `form_answer`."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()
        self.forms: list[Any] = []
        self.form_answer: dict[str, Any] = {"action": "decline"}

    async def request_permission(self, *args: Any, **kwargs: Any) -> RequestPermissionResponse:
        self.asked.set()
        await self.gate.wait()
        return await super().request_permission(*args, **kwargs)

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append((message, mode))
        return TypeAdapter(CreateElicitationResponse).validate_python(self.form_answer)


@pytest.mark.anyio
async def test_sdk_steers_a_running_turn(sdk_heron, fake_llm, workspace, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "SdkClient", GatedClient)
    fake_llm.script(tool_calls(Call("bash", {"command": "true"}, id="b1")), text("Steered."))
    async with asyncio.timeout(TIMEOUT):
        async with sdk_heron("--mode", "ask") as h:
            init = await initialize(h.conn)
            assert (init.field_meta or {})["steering"] == {"supported": True}
            session = await h.conn.new_session(cwd=workspace, mcp_servers=[])
            sid = session.session_id
            turn = asyncio.create_task(h.conn.prompt(session_id=sid, prompt=[text_block("Go")]))
            await h.client.asked.wait()
            prompt = [{"type": "text", "text": "use tabs"}]
            steer = asyncio.create_task(
                h.conn.ext_method("session/steering", {"sessionId": sid, "prompt": prompt})
            )
            await asyncio.sleep(0)
            h.client.gate.set()
            steered = await steer
            response = await turn
            idle = await h.conn.ext_method("session/steering", {"sessionId": sid, "prompt": prompt})
    assert steered == {"outcome": "injected"}
    assert idle == {"outcome": "promptRequired", "reason": "noRunningTurn"}
    assert response.stop_reason == "end_turn"
    (echo,) = h.client.session_updates(UserMessageChunk)
    assert echo.content.text == "use tabs" and echo.message_id
    assert fake_llm.requests[1].body["messages"][-1] == {"role": "user", "content": "use tabs"}


@pytest.mark.anyio
async def test_sdk_answers_an_ask_user_form_and_forks(sdk_heron, fake_llm, workspace, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "SdkClient", GatedClient)
    question = {"questions": [{"question": "Which?", "options": [{"label": "x"}, {"label": "y"}]}]}
    fake_llm.script(tool_calls(Call("ask_user", question, id="q1")), text("Took y."))
    async with asyncio.timeout(TIMEOUT):
        async with sdk_heron() as h:
            h.client.form_answer = {"action": "accept", "content": {"q1": "y"}}
            await h.conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities.model_validate(
                    {"fs": {}, "terminal": False, "elicitation": {"form": {}}}
                ),
                client_info=Implementation(name="acp-python-sdk-conformance", version="0"),
            )
            session = await h.conn.new_session(cwd=workspace, mcp_servers=[])
            sid = session.session_id
            response = await h.conn.prompt(session_id=sid, prompt=[text_block("Ask me")])
            forked = await h.conn.fork_session(session_id=sid, cwd=workspace, mcp_servers=[])
            fake_llm.script(text("In the fork."))
            again = await h.conn.prompt(session_id=forked.session_id, prompt=[text_block("More")])
    assert response.stop_reason == "end_turn" and again.stop_reason == "end_turn"
    ((_, mode),) = h.client.forms
    assert mode.tool_call_id == "q1"
    assert "Which?\n→ y" in fake_llm.requests[1].body["messages"][-1]["content"]
    assert forked.session_id != sid
    users = [m["content"] for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["Ask me", "More"]
