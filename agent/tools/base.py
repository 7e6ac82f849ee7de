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
    # Why the call cannot run, found while describing (a write over a file the model has not
    # read): the call fails with it before anyone is asked to approve it. execute() checks
    # again, since the file may change while the question is open.
    refused: str | None = None
    # The call's id as the client knows it (set by the turn before execute()), for requests
    # about this call: an elicitation form or a question linked to it.
    call_id: str = ""


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
    def failure(cls, reason: str, shown: str | None = None) -> ToolResult:
        """A failed call: the model reads `reason`, the user sees `shown` (default: the same)."""
        return cls(
            ok=False, output=reason, content=[ContentItem.of(reason if shown is None else shown)]
        )


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
    # What sandboxed commands changed of git's or Heron's settings (`.git/`, `.heron/`, the
    # config) that the user has not yet been shown in a question: until then, a program run
    # outside the sandbox asks even when an "always" answer covers it (agent.permissions).
    sandbox_changes: list[str] = field(default_factory=list)
    # The session's workspace folders (the cwd and the additional directories), read anew
    # each time: they may change on load or resume.
    roots_of: Callable[[], list[Path]] | None = None

    @property
    def roots(self) -> list[Path]:
        return self.roots_of() if self.roots_of is not None else [self.cwd]

    elicitation_form: bool = False  # the client shows elicitation forms (agent.questions)
    user_present: bool = True  # somebody can answer questions (not so in `heron exec`)
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
            schema = lean_schema(self.Args.model_json_schema())
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

    def runs_programs(self, args: ArgsT) -> bool:
        """The call runs programs that read git's and Heron's settings (a command, an MCP
        server's tool): outside the sandbox it asks after a sandboxed command changed those."""
        return False

    def discards_work(self, args: ArgsT, ctx: ToolContext) -> bool:
        """The call throws away work nothing brings back (uncommitted changes, untracked files,
        stashes, branches): auto mode asks before it even where the sandbox would run it."""
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


def lean_schema(schema: Any) -> Any:
    """`schema` without the titles pydantic derives from names ("Multi Select" for
    `multi_select`): they tell the model nothing the name does not, and every request carries
    them, a few hundred tokens a small local model's window cannot spare. A property that is
    itself called `title` stays."""
    if isinstance(schema, list):
        return [lean_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    lean: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            lean[key] = {name: lean_schema(sub) for name, sub in value.items()}
        elif key == "title" and isinstance(value, str):
            continue
        else:
            lean[key] = lean_schema(value)
    return lean
