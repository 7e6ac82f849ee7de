"""One session's state: the conversation, the mode, remembered permissions, the workspace's
trust, its instructions (system prompt, skills), the running turn.

Everything here is plain data that a later store (SQLite) can save and `session/load` replay:
`history` is the model's view (OpenAI chat messages), `transcript` the editor's view (the
session updates that were sent, consecutive chunks merged).

A session is opened before the first prompt, so what only a turn needs (the tools, the
permission memory, the file access; pydantic and the ACP models behind them) is made on first
use: `session/new` is answered without importing any of it (`agent.app.warmup` imports it in the
background meanwhile).
"""

from __future__ import annotations

import datetime
import itertools
import logging
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agent.files.workspace import repository_root
from agent.notices import Note
from agent.options.state import Choices
from agent.rewind.marks import compaction_mark, step_mark
from agent.sandbox.plan import Identity, identity
from agent.sandbox.watch import git_related
from agent.steering import SteeringInbox
from agent.store.saver import Saver, SessionParts, title_update
from agent.store.titles import first_request_text, make_title
from agent.store.transcript import Transcript
from agent.trust.state import WorkspaceTrust, open_trust

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent.acp.params import ClientCapabilities
    from agent.acp.protocol import StopReason
    from agent.acp.wire import Connection
    from agent.commands.catalog import CommandSet
    from agent.config import Settings
    from agent.context.instructions import Instructions
    from agent.files.backend import Files
    from agent.mcp.manager import McpManager
    from agent.permissions import PermissionMemory
    from agent.sandbox import Sandbox
    from agent.skills.discovery import SkillSet
    from agent.tools.base import Tool, ToolContext
    from agent.undo.journal import UndoJournal

# Tools a conversation can do without, left out where the model's window is small (below
# SMALL_WINDOW tokens: a local server's 4k): their schemas, sent with every request, would
# take a quarter of what a 4,096-token window leaves the conversation.
OPTIONAL_TOOLS = ("ask_user", "todo_write")
SMALL_WINDOW = 8192

log = logging.getLogger("heron.session")


class Session:
    def __init__(
        self,
        *,
        session_id: str,
        cwd: Path,
        settings: Settings,
        connection: Connection,
        client_capabilities: ClientCapabilities,
        mcp_servers: list[dict[str, Any]],
        trust: WorkspaceTrust | None = None,
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        # Is the project trusted (its command files, skills, git programs in use)? Plain data;
        # the session saves only its own answer (agent.trust.state).
        self.trust = trust if trust is not None else open_trust_of(cwd)
        # The skills it may use and its instructions (the system prompt): found once, and
        # again only when its trust changes (`trust_changed`), so that the system prompt stays
        # the same from request to request.
        self.skills: SkillSet | None = None
        self.instructions: Instructions | None = None
        self.small_window = False  # the optional tools are left out (`fit_tools`)
        # The server's settings, updated in place on a reload; `settings` adds this session's
        # picks (model, provider, thought level: agent.options).
        self.shared_settings = settings
        self.choices = Choices()
        self.closed = False
        self.closing = False  # being closed: its turn ends with "the session was closed"
        # Somebody can answer questions (`_meta.heron.askUser: false`: `heron exec`).
        self.user_present = True
        self.connection = connection
        self.client_capabilities = client_capabilities
        self.mcp_servers = mcp_servers
        self.mode = settings.mode
        # The mode the store keeps: the user's pick or the default, never a mode given for
        # one run (`_meta.heron.mode`: `heron exec --yes`), which only sets `mode`.
        self.saved_mode = settings.mode
        self.history: list[dict[str, Any]] = []
        # The context size (tokens) the server named when it rejected a request of this
        # session for its length (agent.context.usage); None until then.
        self.context_limit: int | None = None
        # The day the session began, in its system prompt: it does not change from turn to
        # turn, so each request starts with the previous one (a server's prompt cache).
        self.started_on = datetime.date.today().isoformat()
        self.transcript = Transcript()
        self._tool_specs: list[dict[str, Any]] | None = None
        self._prompts: set[anyio.CancelScope] = set()  # the running prompt and those queued
        self.steering = SteeringInbox()  # messages for the running turn (agent.steering)
        self._turn_lock = anyio.Lock()
        self.model_ready: anyio.Event | None = None  # set once the model client is imported
        self._call_ids: set[str] = set()
        self._call_counter = itertools.count(1)
        self.mcp: McpManager | None = None
        self._mcp_version = 0
        if mcp_servers:
            self.start_mcp(mcp_servers)
        # Each root's identity when the session began (agent.sandbox.plan.identity): auto mode's
        # sandbox refuses a root whose path leads elsewhere later.
        self.root_pins: dict[str, Identity] = {}
        self._additional_directories: list[Path] = []
        self._pin_roots()
        self.title: str | None = None
        self.told: set[str] = set()  # keys of the notes told (agent.notices), each once
        self.saver: Saver | None = None  # set by the server: saves each step (agent.store)
        self.commands: CommandSet | None = None  # its slash commands (agent.commands.catalog)
        # What Heron sends by itself while the client may not expect it (around the answer
        # that opens the session), the latest of each kind: see `notify`.
        self._held: dict[str, dict[str, Any]] | None = None

    # -- made on first use (see the module's docstring) --------------------------------------

    @cached_property
    def permissions(self) -> PermissionMemory:
        """The "always" answers of this session."""
        from agent.permissions import PermissionMemory

        return PermissionMemory()

    @cached_property
    def builtin_tools(self) -> dict[str, Tool[Any]]:
        from agent.questions.tool import AskUser
        from agent.tools import builtin_tools

        return {tool.name: tool for tool in [*builtin_tools(), AskUser()]}

    @cached_property
    def tools(self) -> dict[str, Tool[Any]]:
        """Every tool the model may call: the built-in ones, `skill` when there are skills,
        and the MCP servers' (made again by `_rebuild_tools` when those change)."""
        tools = dict(self.builtin_tools)
        for name in OPTIONAL_TOOLS if self.small_window else ():
            tools.pop(name, None)
        if self.skills is not None and self.skills.skills:
            from agent.skills.tool import SkillTool

            tools["skill"] = SkillTool(self.skills)
        if self.mcp is not None:
            tools.update({tool.name: tool for tool in self.mcp.tools()})
        return tools

    def fit_tools(self, window: int) -> None:
        """Leave out the optional tools when the model's window is small, or take them back
        when it is not. Called before each model request: the answer changes only when the
        window does (known at last, or a smaller one a server named), so the tools a prompt
        cache sees stay the same."""
        small = window < SMALL_WINDOW
        if small != self.small_window:
            self.small_window = small
            self._rebuild_tools()

    def _rebuild_tools(self) -> None:
        """The skills or the MCP servers' tools changed: the table is made again at its next
        use (not now: before the first prompt the tools are not even imported)."""
        self.__dict__.pop("tools", None)
        self._tool_specs = None

    @cached_property
    def files(self) -> Files:
        from agent.files.backend import Files

        fs = self.client_capabilities.fs
        request = self.connection.request
        return Files(self.id, request, fs.read_text_file, fs.write_text_file)

    @cached_property
    def tool_context(self) -> ToolContext:
        from agent.tools.base import ToolContext

        return ToolContext(
            cwd=self.cwd,
            session_id=self.id,
            files=self.files,
            client_request=self.connection.request,
            client_terminal=self.client_capabilities.terminal,
            settings=self.settings,
            changes=self.undo,
            sandbox=self.sandbox,
            roots_of=lambda: self.roots,
            elicitation_form=self.client_capabilities.elicitation_form,
            user_present=self.user_present,
            command_env=self.command_env,
        )

    @cached_property
    def sandbox(self) -> Sandbox:
        """Where its commands run in auto mode: its roots writable, a private TMPDIR."""
        from agent.permissions.policy import heron_config_paths
        from agent.sandbox.rules import Limits, Sandbox
        from agent.store.store import data_dir

        def limits() -> Limits:
            settings = self.settings
            return Limits(
                processes=settings.sandbox_max_processes,
                memory_mb=settings.sandbox_max_memory_mb,
                file_mb=settings.sandbox_max_file_mb,
            )

        return Sandbox(
            roots=lambda: self.roots,
            active=lambda: self.mode == "auto",
            pins=self.root_pins,
            protected=lambda: [*heron_config_paths(self.settings), data_dir(self.settings)],
            limits=limits,
        )

    @cached_property
    def undo(self) -> UndoJournal:
        """Each turn's file changes, for /undo (agent.undo)."""
        from agent.undo.journal import UndoJournal

        return UndoJournal()

    @property
    def settings(self) -> Settings:
        """What this session's next model request uses: the settings with its picks."""
        return self.choices.effective(self.shared_settings)

    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools as OpenAI functions; built once, they only change when the tools do."""
        if self._tool_specs is None:
            self._tool_specs = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema(),
                    },
                }
                for tool in self.tools.values()
            ]
        return self._tool_specs

    async def system_prompt(self) -> str:
        """The system prompt its model requests carry: the same for the whole session (rules,
        skills), so a prompt cache keeps serving it (`find_instructions`)."""
        return (await self.find_instructions()).prompt

    async def next_request_tokens(self) -> int:
        """About how many tokens its next model request carries: the system prompt, the tools'
        definitions and the conversation. The context meter where no response counted them:
        after /compact, a load or a resume."""
        from agent.context.usage import FIXED, chars_per_token, estimate_tokens

        system = {"role": "system", "content": await self.system_prompt()}
        fixed = estimate_tokens([system, *self.tool_specs()], chars_per_token(self.settings, FIXED))
        return fixed + estimate_tokens(self.history, chars_per_token(self.settings))

    def start_mcp(self, entries: list[dict[str, Any]]) -> None:
        """Start the client's MCP servers in the background (session/new, load, resume)."""
        from agent.mcp.config import parse_servers
        from agent.mcp.manager import McpManager
        from agent.processes.env import passed_through
        from agent.questions.ask import Asker

        configs = parse_servers(entries, passed_through(self.settings))
        if not configs:
            return
        asker = Asker(
            self.id,
            self.connection.request,
            form=self.client_capabilities.elicitation_form,
            present=lambda: self.user_present,
        )
        self.mcp = McpManager(
            configs,
            cwd=str(self.cwd),
            startup_timeout=self.settings.mcp_startup_timeout,
            asker=asker,
        )
        self.mcp.start(self.connection.start_soon)

    async def prepare_tools(self) -> list[Note]:
        """Before a model request: MCP servers started (bounded wait) and the tool table current.

        Returns what the user must be told (servers that failed), once each.
        """
        if self.mcp is None:
            return []
        notices = await self.mcp.prepare()
        if self.mcp.version != self._mcp_version:
            self._mcp_version = self.mcp.version
            self._rebuild_tools()
        return notices

    # -- trust, skills, instructions ---------------------------------------------------------

    async def find_skills(self) -> SkillSet:
        """The skills this session may use (the project's only when it is trusted): found at
        the first need (the command list, the first prompt), then kept."""
        if self.skills is None:
            from agent.skills.discovery import find_skills

            trust = self.trust
            self.skills = await anyio.to_thread.run_sync(
                find_skills, self.cwd, trust.folder, trust.trusted
            )
            self._rebuild_tools()
        return self.skills

    async def find_instructions(self) -> Instructions:
        """The system prompt and what it holds: built at the first model request, then kept
        (re-read only when the trust changes; see `agent.context.instructions`)."""
        if self.instructions is None:
            from agent.context.instructions import build_instructions

            skills = await self.find_skills()
            self.instructions = await build_instructions(
                self.cwd,
                self.trust.folder,
                self.trust.trusted,
                skills,
                confine=self.mode != "full-access",
                additional_directories=self.additional_directories,
                today=self.started_on,
            )
        return self.instructions

    def trust_changed(self) -> None:
        """The user changed the trust: skills and instructions are found again (the system
        prompt changes this once), and the command list follows at the next scan."""
        self.skills = None
        self.instructions = None
        self._rebuild_tools()

    async def command_env(self, cwd: Path) -> dict[str, str]:
        """What a command started in `cwd` gets in its environment beyond the usual: while
        the project is not trusted (or a sandboxed command changed `.git/` since it was), git
        settings that keep the repository's hooks and programs from running."""
        if "sandbox" in self.__dict__:  # made on first use
            changed = self.sandbox.take_changes()
            self.trust.git_changes += [p for p in changed if git_related(p)]
        if not self.trust.guards_git:
            return {}
        from agent.trust.git import guard_env

        return await anyio.to_thread.run_sync(guard_env, cwd)

    async def aclose(self) -> None:
        """End the session: stop its turn and its MCP servers (session/close, delete, exit).

        The turn winds down first, so the tool calls it had announced end `failed` ("the
        session was closed") before the close is answered; then nothing more is sent."""
        self.closing = True
        self.cancel()
        await self.wait_idle()
        self.closed = True
        if "sandbox" in self.__dict__:  # made on first use
            self.sandbox.close()
        if self.mcp is not None:
            mcp, self.mcp = self.mcp, None
            await mcp.aclose()

    @property
    def additional_directories(self) -> list[Path]:
        return self._additional_directories

    @additional_directories.setter
    def additional_directories(self, directories: list[Path]) -> None:
        self._additional_directories = directories
        self._pin_roots()

    def _pin_roots(self) -> None:
        for root in self.roots:
            if str(root) not in self.root_pins and (found := identity(root)):
                self.root_pins[str(root)] = found

    @property
    def roots(self) -> list[Path]:
        """The workspace: the cwd and the client's additional directories (paths inside need
        no extra permission; `.git/` and `.heron/` inside any of them are protected)."""
        return [self.cwd, *self.additional_directories]

    # -- what the client is told about the session -------------------------------------------

    def notify(self, update: dict[str, Any], record: bool = False) -> None:
        """The one way a `session/update` about this session leaves Heron.

        - `record`: the update is part of the conversation (what a turn shows), kept in the
          transcript for `session/load`, even when it cannot be sent any more.
        - Nothing is sent once the session is closed or deleted: a command list, a model list
          or a title that comes late is dropped.
        - What Heron sends by itself is held (the latest of each kind) while the `session/new`
          answer is prepared (`hold_until_answered`: Zed drops updates for a session it does
          not know yet), and after a `session/load` or `session/resume` answer until the next
          request about the session (`hold_updates`: the client learned the session's state
          before that answer, and after it only what a new prompt causes arrives).
        - A turn's updates stop when the turn has ended (`agent.turn.updates.Updates.closed`):
          none follows the prompt's answer.
        """
        if record:
            self.transcript.record(update)
        if self.closed:
            return
        if self._held is not None and not record:
            kind = update["sessionUpdate"]
            self._held.pop(kind, None)  # the latest goes last
            self._held[kind] = update
            return
        self.connection.notify("session/update", {"sessionId": self.id, "update": update})

    def hold_until_answered(self) -> None:
        """Called as `session/new` is answered: see `notify`."""
        self._held = {}
        self.connection.after_answer(self.release_updates)

    def hold_updates(self) -> None:
        """Called as a load or resume is answered: see `notify`."""
        self._held = {}

    def release_updates(self) -> None:
        """The answer is out, or a request about the session (a prompt, a pick) came: what was
        held goes out first."""
        held, self._held = self._held, None
        for update in (held or {}).values():
            self.notify(update)

    async def run_turn(
        self, turn: Callable[[anyio.CancelScope], Awaitable[StopReason]]
    ) -> StopReason:
        """Run `turn` (agent.turn) once no other runs, in a scope `cancel()` reaches;
        `cancelled` if it was cancelled, running or queued.

        Zed may send a new prompt right after Stop, without a cancel: every earlier prompt,
        running or queued, ends as cancelled (the running one's answer goes out first), and
        only the newest runs.
        """
        self.cancel()
        scope = anyio.CancelScope()
        self._prompts.add(scope)
        try:
            with scope:
                if self.model_ready is not None:
                    # Cancellable, unlike the import itself: a cancel right after the first
                    # prompt of the process must not wait for openai to load.
                    await self.model_ready.wait()
                async with self._turn_lock:
                    return await turn(scope)
            return "cancelled"  # reached only when the scope caught a cancel
        finally:
            self._prompts.discard(scope)

    @property
    def busy(self) -> bool:
        """A turn runs, or a prompt waits for one."""
        return bool(self._prompts) or self._turn_lock.locked()

    def exclusive(self) -> anyio.Lock:
        """Held (`async with`) by what must not run beside a turn (a rewind): no prompt
        starts meanwhile, it waits."""
        return self._turn_lock

    def cancel(self) -> None:
        """Cancel the running prompt and every queued one."""
        self.steering.cancel()
        for scope in self._prompts:
            scope.cancel()

    async def wait_idle(self) -> None:
        """Wait until no turn runs (a cancelled one has answered and saved its last step)."""
        async with self._turn_lock:
            pass

    async def store_ready(self) -> None:
        """Wait until the store is open, so a failure to open it can be told in this turn."""
        if self.saver is not None:
            await self.saver.store.ready()

    def history_rewritten(self, summarized: int, before: int) -> None:
        """Compaction made the first `summarized` of `before` messages a summary: the
        transcript notes where the rest moved (agent.rewind reads it to find a message's
        place in the history)."""
        if summarized:
            shift = len(self.history) - before
            self.transcript.record(compaction_mark(summarized, shift))

    def save(self) -> list[Note]:
        """A step boundary: save what changed. Returns what the user must know if the
        conversation cannot be saved (told once each: agent.notices)."""
        self.mark_step()
        if self.saver is None:
            return []
        if self.title is None and (text := first_request_text(self.transcript.entries)):
            self.title = make_title(text)  # titled even when it cannot be saved
            self.notify(title_update(self.title))
        return self.saver.checkpoint(self.stored_parts())

    def mark_step(self) -> None:
        """At a step boundary where the history is whole (no call waits for its result),
        the transcript notes where the history and the undo journal stand, so a rewind or a
        fork can go back to this very point (agent.rewind)."""
        journal = self.__dict__.get("undo")  # made on first use
        mark = step_mark(self.history, journal.position() if journal is not None else (1, 0))
        entries = self.transcript.entries
        if mark is not None and (not entries or entries[-1] != mark):
            self.transcript.record(mark)

    def stored_parts(self) -> SessionParts:
        """What the store saves of this session, as it is now."""
        journal = self.__dict__.get("undo")  # made on first use: none, nothing to save
        return SessionParts(
            id=self.id,
            cwd=self.cwd,
            additional_directories=self.additional_directories,
            title=self.title,
            mode=self.saved_mode,
            model=self.settings.model,
            options=self.choices.saved(),
            history=self.history,
            transcript=self.transcript.entries,
            trust=self.trust.saved(),
            take_undo=journal.take_unsaved if journal is not None else None,
        )

    def new_call_id(self, model_id: str) -> str:
        """The model's call id, made unique in the session (some servers reuse `call_0`)."""
        call_id = model_id
        while not call_id or call_id in self._call_ids:
            call_id = f"{model_id or 'call'}_{next(self._call_counter)}"
        self._call_ids.add(call_id)
        return call_id


def open_trust_of(cwd: Path) -> WorkspaceTrust:
    """The trust of a session opened in `cwd` (its project: the repository holding it)."""
    root = repository_root(cwd)
    folder = root or Path(os.path.realpath(cwd))
    return open_trust(cwd, folder, root is not None)
