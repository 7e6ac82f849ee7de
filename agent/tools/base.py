"""The one contract every tool implements, built-in or (later) MCP.

The turn loop only ever sees `Tool`: it sends `input_schema()` to the model, asks
`describe()` what to show before running, lets the permission policy read `kind`, `refusal()`,
`safety()`, `workspace_keys()` (by default `permission_keys()`) and `paths()`, then drives
`execute()` and turns what it yields into `tool_call_update`s. The loop, not the tool, owns the
toolCallId, rawInput, status and every notification, so a tool never talks to the wire.

Cancellation is anyio's: when the turn is cancelled the tool's pending `await` raises the
backend's cancellation exception. A tool that holds an outside resource (a process, a client
terminal) releases it in `finally` under `anyio.CancelScope(shield=True)`.
"""

from __future__ import annotations

import copy
import enum
import os
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from agent.acp.protocol import ContentItem, PlanEntry, ToolCallContent, ToolCallLocation, ToolKind
from agent.config import MAX_TOOL_OUTPUT_CHARS
from agent.files.backend import ClientRequest, Files
from agent.files.seen import SeenFiles

if TYPE_CHECKING:
    from agent.sandbox import Sandbox


_schemas: dict[type[BaseModel], dict[str, Any]] = {}  # Tool.input_schema's, by argument model


class Safety(enum.Enum):
    """What running a call can do to the world; the permission policy reads this."""

    READ_ONLY = "read-only"
    MUTATING = "mutating"  # changes files in a way the user can review (edits)
    DESTRUCTIVE = "destructive"  # deletes, moves, arbitrary commands
    NETWORK = "network"  # reaches outside the machine


@dataclass
class Preview:
    """What the editor shows before a call runs (and in the permission request)."""

    title: str
    locations: list[ToolCallLocation] = field(default_factory=list)
    content: list[ToolCallContent] = field(default_factory=list)
    # Whatever the tool computed while describing (e.g. the text an edit was computed from),
    # handed back to execute() so it can check nothing changed in between.
    state: Any = None


@dataclass
class Progress:
    """A running call's news: each set field replaces the one shown in the editor."""

    content: list[ToolCallContent] | None = None
    title: str | None = None
    locations: list[ToolCallLocation] | None = None


@dataclass
class PlanChanged:
    """The agent's plan, complete, to be sent as a `plan` update."""

    entries: list[PlanEntry]


@dataclass
class ToolResult:
    """The end of a call: exactly one per execute(), always last."""

    ok: bool
    output: str  # what the model reads (the loop truncates it if needed)
    content: list[ToolCallContent] | None = None  # what the editor shows; None: `output` as text
    raw_output: Any = None
    locations: list[ToolCallLocation] | None = None

    @classmethod
    def failure(cls, reason: str) -> ToolResult:
        return cls(ok=False, output=reason, content=[ContentItem.of(reason)])


ToolEvent = Progress | PlanChanged | ToolResult


class FileChanges:
    """Told by the file tools right before and after they change a file, so the change can be
    taken back later (agent.undo keeps the prior state). This default keeps nothing.

    `before_*` returns a token for the change about to happen; `done(token, written)` says it
    happened (`written`: the text now in the file, None when the path is gone). A change that
    fails is never `done`, and nothing of it is kept."""

    async def before_write(self, path: Path, old: str | None) -> Any:
        return None

    async def before_delete(self, path: Path) -> Any:
        return None

    async def before_move(self, source: Path, destination: Path) -> Any:
        return None

    def done(self, token: Any, written: str | None = None) -> None:
        return None


@dataclass
class ToolContext:
    """What a running tool may use; the same whether work goes through the client or not."""

    cwd: Path
    session_id: str
    files: Files  # text files: through the client's fs/* when advertised, else the local disk
    client_request: ClientRequest  # send a request to the client, await its result
    client_terminal: bool  # the client advertised terminal/*
    settings: Any = None  # agent.config.Settings (limits, timeouts)
    seen: SeenFiles = field(default_factory=SeenFiles)  # what the model saw of each file
    changes: FileChanges = field(default_factory=FileChanges)  # prior states, for /undo
    sandbox: Sandbox | None = None  # where commands run confined (auto mode)
    # What a command started in a folder gets in its environment besides the usual (the
    # session's: git settings while the project is not trusted, agent.trust.git).
    command_env: Callable[[Path], Awaitable[dict[str, str]]] | None = None

    def resolve(self, path: str) -> Path:
        """An absolute, normalised path; relative paths are taken from the session cwd."""
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = self.cwd / p
        return Path(os.path.normpath(p))

    @property
    def output_chars(self) -> int:
        """What the model reads of one tool result: a tool that cuts its own output (keeping
        what matters, such as a command's last lines) fits it in this."""
        return getattr(self.settings, "max_tool_output_chars", None) or MAX_TOOL_OUTPUT_CHARS


class ToolError(Exception):
    """A failure the model can act on; its message becomes the failed call's reason."""


ArgsT = TypeVar("ArgsT", bound=BaseModel)


class Tool(ABC, Generic[ArgsT]):
    name: ClassVar[str]
    description: ClassVar[str]
    kind: ClassVar[ToolKind]
    Args: ClassVar[type[BaseModel]]

    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments, as sent to the model.

        Generated once per argument model (tens of ms for all tools, which every session's
        first request would pay again; `agent.app.warmup` pays it in the background), then copied.
        """
        schema = _schemas.get(self.Args)
        if schema is None:
            schema = self.Args.model_json_schema()
            schema.pop("title", None)
            _schemas[self.Args] = schema
        return copy.deepcopy(schema)

    def parse_args(self, raw: dict[str, Any]) -> ArgsT:
        """Validate the model's arguments; pydantic's ValidationError explains what is wrong."""
        return self.Args.model_validate(raw)  # type: ignore[return-value]

    default_safety: ClassVar[Safety]

    def safety(self, args: ArgsT) -> Safety:
        """What this call can do to the world. Override when the arguments decide."""
        return self.default_safety

    def paths(self, args: ArgsT, ctx: ToolContext) -> list[Path]:
        """Absolute paths the call touches; the policy asks when one is outside the cwd."""
        return []

    def permission_keys(self, args: ArgsT) -> list[str]:
        """What an "always" answer remembers. All keys must be remembered to skip asking;
        no keys: the call can never be remembered, it asks every time."""
        return [self.name]

    def sandboxed(self, args: ArgsT) -> bool:
        """The call runs confined in auto mode (agent.sandbox), so it need not ask there."""
        return False

    def workspace_keys(self, args: ArgsT, ctx: ToolContext, roots: list[Path]) -> list[str]:
        """`permission_keys` for a call made from `ctx.cwd` in a workspace of `roots`; a tool
        whose key depends on where its arguments lead (a command reading outside) overrides it."""
        return self.permission_keys(args)

    def refusal(self, args: ArgsT) -> str | None:
        """Why the call cannot run at all, known before asking permission (None: it can)."""
        return None

    @abstractmethod
    async def describe(self, args: ArgsT, ctx: ToolContext) -> Preview:
        """Title, locations and preview content. Cheap, and never raises."""

    @abstractmethod
    def execute(
        self, args: ArgsT, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        """Run the call: yield Progress/PlanChanged, then exactly one ToolResult.

        Raising ToolError (or any exception) is also allowed: the loop turns it into a failed
        result with the message as the reason.
        """


class OneShotTool(Tool[ArgsT]):
    """A tool whose call yields only its result; a ToolError or OSError from `run` becomes a
    failed result with a message the model can act on."""

    async def execute(
        self, args: ArgsT, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        try:
            result = await self.run(args, ctx, preview)
        except ToolError as exc:
            result = ToolResult.failure(str(exc))
        except OSError as exc:
            reason = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else exc
            result = ToolResult.failure(str(reason))
        yield result

    @abstractmethod
    async def run(self, args: ArgsT, ctx: ToolContext, preview: Preview) -> ToolResult: ...
