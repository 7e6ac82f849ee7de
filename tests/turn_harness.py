"""The turn loop in this very process: a real `Session` and `run_prompt`, a fake connection
instead of the wire, the fake OpenAI server as the model. No `heron` subprocess to start, for
tests that only need the loop (the model ↔ tools rounds, the updates it emits, what the model
is sent). Anything about the protocol, start-up or process handling still belongs to the
subprocess tests (conftest's `heron`).

    async def test_x(fake_llm, tmp_path):
        fake_llm.script(text("hi"))
        loop = TurnHarness(fake_llm, tmp_path)
        assert await loop.prompt("hello") == "end_turn"
        loop.updates  # the session/update payloads, in order

Every `session/update` the loop emits is validated against the ACP schema, as the subprocess
harness does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from acp_schema import validate_agent_message
from fake_openai import FakeOpenAI

from agent.acp.params import ClientCapabilities
from agent.acp.protocol import TextBlockIn
from agent.acp.wire import RpcError
from agent.app.prompt import run_prompt
from agent.config import Settings
from agent.session import Session

Handler = Callable[[dict[str, Any]], Any]


class FakeConnection:
    """What a session uses of `agent.acp.wire.Connection`: notifications are recorded (and
    checked against the schema), requests to the client answered by `handlers`."""

    def __init__(self, task_group: anyio.abc.TaskGroup | None = None) -> None:
        self.notifications: list[dict[str, Any]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.violations: list[str] = []
        self.handlers: dict[str, Handler] = {"session/request_permission": _allow_once}
        self.task_group = task_group

    def notify(self, method: str, params: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        self.violations += validate_agent_message(message, lambda request_id: None)
        self.notifications.append(message)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.requests.append((method, params))
        handler = self.handlers.get(method)
        if handler is None:
            raise RpcError(-32601, f"Method not found: {method}")
        return handler(params)

    async def drain(self) -> None:
        await anyio.lowlevel.checkpoint()

    def after_answer(self, callback: Callable[[], None]) -> None:
        callback()

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        if self.task_group is None:
            raise RuntimeError("FakeConnection.start_soon needs a task group")
        self.task_group.start_soon(fn, *args)


def _allow_once(params: dict[str, Any]) -> dict[str, Any]:
    option = next(o for o in params["options"] if o["kind"] == "allow_once")
    return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}


class TurnHarness:
    """One session on the fake model, its turns run in-process."""

    def __init__(
        self,
        fake_llm: FakeOpenAI,
        cwd: Path,
        *,
        mode: str = "full-access",
        connection: FakeConnection | None = None,
        **settings: Any,
    ) -> None:
        self.connection = connection or FakeConnection()
        self.session = Session(
            session_id="sess_inprocess",
            cwd=cwd,
            settings=Settings(
                api_key="sk-test",
                base_url=fake_llm.base_url,
                model="fake-model",
                mode=mode,
                **settings,
            ),
            connection=self.connection,  # type: ignore[arg-type]
            client_capabilities=ClientCapabilities(),
            mcp_servers=[],
        )

    async def prompt(self, text: str) -> str:
        """One prompt turn; its stop reason."""
        blocks = [TextBlockIn(type="text", text=text)]
        # What the turn starts in the background (the command list after it) ends with it.
        async with anyio.create_task_group() as task_group:
            self.connection.task_group = task_group
            stop_reason = await self.session.run_turn(
                lambda scope: run_prompt(self.session, scope, blocks)  # type: ignore[arg-type]
            )
        self.connection.task_group = None
        return stop_reason

    @property
    def updates(self) -> list[dict[str, Any]]:
        assert not self.connection.violations, self.connection.violations
        return [
            n["params"]["update"]
            for n in self.connection.notifications
            if n["method"] == "session/update"
        ]
