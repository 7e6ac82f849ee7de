"""The running conversation a command handler works with: Protocols, so that commands import
neither the turn nor the session (both sit above them). `agent.turn.Turn` satisfies
`Conversation`, and `agent.session.Session` satisfies `ConversationState`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agent.commands.catalog import CommandHost
from agent.options.holder import OptionHolder
from agent.rewind.conversation import Rewindable

if TYPE_CHECKING:
    import anyio

    from agent.acp.protocol import PromptBlock, SessionUpdate, StopReason
    from agent.context.instructions import Instructions
    from agent.sandbox import Sandbox
    from agent.store.saver import Saver
    from agent.tools.base import Tool, ToolResult
    from agent.undo.journal import UndoJournal


class ConversationState(CommandHost, OptionHolder, Rewindable, Protocol):
    """The session's state the handlers read and change."""

    @property
    def saver(self) -> Saver | None: ...

    history: list[dict[str, Any]]  # the model's view (OpenAI chat messages)

    def history_rewritten(self, summarized: int, before: int) -> None:
        """Compaction made the first `summarized` of `before` messages a summary."""

    @property
    def context_limit(self) -> int | None:
        """The window a server's error revealed, if any (`Session.context_limit`)."""

    @property
    def undo(self) -> UndoJournal: ...

    @property
    def sandbox(self) -> Sandbox:
        """Where its commands run in auto mode (whether one confines them here)."""

    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools a request sends (they count in the window)."""

    async def store_ready(self) -> None: ...

    async def system_prompt(self) -> str:
        """The system prompt its next model request carries."""

    async def next_request_tokens(self) -> int:
        """About what the next model request carries (`Session.next_request_tokens`)."""

    async def find_instructions(self) -> Instructions:
        """The system prompt and the rules and skills in it (`Session.find_instructions`)."""

    def trust_changed(self) -> None:
        """The project's trust changed: skills and instructions are found again."""


class Said(Protocol):
    """Where a handler's own words go: to the editor and into the transcript."""

    def say(self, text: str) -> None: ...

    def begin_compaction(self) -> str | None:
        """A compaction starts; its id when the client shows compactions."""

    def end_compaction(
        self, compaction_id: str | None, text: str, summary: str | None = None, ok: bool = True
    ) -> None:
        """How the compaction ended, in words and (when shown) as a `compaction_update`."""

    def emit(self, update: SessionUpdate) -> None:
        """A turn's `session/update` (a tool call's progress, say)."""

    def checkpoint(self) -> None:
        """A step boundary: the session saves what changed."""

    async def report_usage(
        self, usage: dict[str, Any] | None, messages: list[dict[str, Any]], reply: str
    ) -> None: ...

    async def report_tokens(self, used: int) -> None:
        """The context meter at `used` tokens."""


class ToolRunner(Protocol):
    """Running one tool call as the model's are run: shown, asked, run, answered."""

    def announce(self, model_call_id: str, name: str, tool: Tool[Any] | None = None) -> str: ...

    async def run_tool(
        self, call_id: str, tool: Tool[Any], args: Any, raw_args: dict[str, Any]
    ) -> str: ...

    def finish(self, call_id: str, result: ToolResult, raw_input: Any = None) -> None:
        """End an announced call with its result (completed or failed)."""


class Conversation(Protocol):
    """The running prompt turn, as a command handler gets it."""

    prompt_at: int  # where the prompt that began it starts in the transcript

    @property
    def session(self) -> ConversationState: ...

    @property
    def updates(self) -> Said: ...

    @property
    def calls(self) -> ToolRunner: ...

    @property
    def scope(self) -> anyio.CancelScope:
        """The turn's: cancelling it ends the turn (a question the user stopped)."""

    async def check_configured(self) -> None:
        """Raise, as a prompt fails, when no model is set up (or none is named)."""

    def record_prompt(self, blocks: list[PromptBlock]) -> None:
        """What the user typed, in the transcript (session/load replays it)."""

    async def converse(self, blocks: list[PromptBlock], record: bool = True) -> StopReason:
        """A model turn on `blocks` (the model ↔ tools loop)."""
