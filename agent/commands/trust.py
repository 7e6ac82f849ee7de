"""Asking whether to trust the project, and `/trust`.

The question is a standard `session/request_permission`, so every ACP client can answer it:
it is shown as a tool call ("Trust …?") listing what the folder holds that stays inert, with
four options — trust for this session (`allow_once`), trust this folder from now on
(`allow_always`), keep it inert (`reject_once`, this session; `reject_always`, remembered).
It is asked once, at a session's first prompt, when nobody has decided for the folder and it
holds something inert; `/trust` shows the state and asks again (or takes the choice as an
argument: `/trust always|session|off|never`). Remembered answers go to the user's config
(agent.trust.folders); "this session" answers are saved with the session.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
from pydantic import ValidationError

from agent.acp.protocol import (
    ContentItem,
    PermissionOption,
    RequestPermissionParams,
    RequestPermissionResult,
    StopReason,
    ToolCallContent,
    ToolCallFields,
    ToolCallProgress,
)
from agent.acp.wire import ConnectionClosed, RpcError
from agent.commands.live import announce
from agent.commands.parse import Invocation
from agent.config import ConfigError
from agent.files.paths import home_relative
from agent.tools.base import ToolResult
from agent.trust.folders import remember, trust_file
from agent.trust.inventory import summary
from agent.trust.state import WorkspaceTrust

if TYPE_CHECKING:
    from agent.commands.conversation import Conversation, ConversationState

log = logging.getLogger("heron.trust")

ALLOW_ONCE, ALLOW_ALWAYS = "allow_once", "allow_always"
REJECT_ONCE, REJECT_ALWAYS = "reject_once", "reject_always"
CHOICES = {
    "always": ALLOW_ALWAYS,
    "session": ALLOW_ONCE,
    "off": REJECT_ONCE,
    "never": REJECT_ALWAYS,
}
LABELS = {
    ALLOW_ONCE: "Trust it for this session",
    ALLOW_ALWAYS: "Trust this folder from now on",
    REJECT_ONCE: "Keep it inert for this session",
    REJECT_ALWAYS: "Keep it inert from now on",
}
USAGE = "`/trust` asks; `/trust always`, `/trust session`, `/trust off` or `/trust never` decides."
LISTED = 20  # paths shown in the question


async def ask_first_time(turn: Conversation) -> None:
    """The question at a session's first prompt, when the folder is undecided and holds
    something inert; nothing otherwise."""
    trust = turn.session.trust
    if not trust.should_ask():
        return
    trust.asked = True
    await ask(turn, first=True)


async def trust(turn: Conversation, call: Invocation) -> StopReason:
    """/trust: the state, then the question (or the choice given as an argument)."""
    session = turn.session
    state = session.trust
    before = state.trusted
    await anyio.to_thread.run_sync(state.look)  # the remembered decision and the files, now
    if state.trusted != before:  # another process decided meanwhile
        session.trust_changed()
    if call.arguments:
        choice = CHOICES.get(call.arguments.strip().lower())
        if choice is None:
            turn.updates.say(f"Unknown choice {call.arguments!r}. {USAGE}")
            return "end_turn"
        turn.updates.say(await decide(session, choice))
        turn.updates.checkpoint()
        return "end_turn"
    turn.updates.say(describe(state))
    await ask(turn, first=False)
    return "end_turn"


async def ask(turn: Conversation, first: bool) -> None:
    """Show the question as a tool call, ask it, apply the answer."""
    session = turn.session
    state = session.trust
    call_id = turn.calls.announce("trust", "Trust this folder?")
    title = f"Trust {state.folder}?"
    if state.found:
        title += f" ({summary(state.found)})"
    content: list[ToolCallContent] = [ContentItem.of(_question(state, first))]
    turn.updates.emit(ToolCallProgress(tool_call_id=call_id, title=title, content=content))
    current = _current(state)
    options = [
        PermissionOption(
            option_id=kind,
            name=LABELS[kind] + (" (as now)" if kind == current else ""),
            kind=kind,  # type: ignore[arg-type]
        )
        for kind in (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS)
    ]
    request = RequestPermissionParams(
        session_id=session.id,
        tool_call=ToolCallFields(
            tool_call_id=call_id, title=title, kind="other", status="pending", content=content
        ),
        options=options,
    )
    try:
        answer = await session.connection.request("session/request_permission", request.dump())
        outcome = RequestPermissionResult.model_validate(answer).outcome
    except (RpcError, ConnectionClosed, ValidationError) as exc:
        log.warning("the trust question failed: %s", exc)
        why = "The question could not be asked; nothing changed."
        turn.calls.finish(call_id, ToolResult.failure(why))
        return
    if outcome.outcome != "selected" or outcome.option_id not in LABELS:
        turn.calls.finish(call_id, ToolResult.failure("Not answered; nothing changed."))
        if outcome.outcome != "selected":  # the user pressed Stop: the turn ends
            turn.scope.cancel()
            await anyio.lowlevel.checkpoint()
        return
    message = await decide(session, outcome.option_id)
    turn.calls.finish(call_id, ToolResult(ok=True, output=message))


async def decide(session: ConversationState, choice: str) -> str:
    """Apply a choice (a permission option kind); what it did, in words."""
    state = session.trust
    before = state.trusted
    note = ""
    state.run = None  # the user decided now: a run's --trust no longer counts
    state.asked = True
    if choice in (ALLOW_ALWAYS, REJECT_ALWAYS):
        trusted = choice == ALLOW_ALWAYS
        try:
            await anyio.to_thread.run_sync(remember, state.folder, trusted)
            state.answer = None  # the remembered decision counts now
        except (ConfigError, OSError) as exc:
            note = f" It could not be remembered ({exc}), so it holds for this session only."
            state.answer = trusted
        await anyio.to_thread.run_sync(state.look)
    else:
        state.answer = choice == ALLOW_ONCE
    if state.trusted:
        state.git_changes.clear()  # the user has confirmed: git may run the repo's programs
    if state.trusted != before:
        session.trust_changed()
    log.info("session %s: %s is %s", session.id, state.folder, state.status)
    announce(session)  # the project's commands and skills come or go
    return _decided(state, choice) + note


def describe(state: WorkspaceTrust) -> str:
    """The state, for /trust."""
    lines = [f"**{state.folder}** {_status(state)}."]
    if not state.trusted and state.found:
        lines.append(
            f"Not in use until you trust it ({summary(state.found)}):\n"
            + "\n".join(f"- `{path}`" for path in state.found[:LISTED])
            + (f"\n- … and {len(state.found) - LISTED} more" if len(state.found) > LISTED else "")
        )
    if state.guards_git:
        why = (
            f"a sandboxed command changed {', '.join(f'`{p}`' for p in state.git_changes[:5])}"
            if state.trusted
            else "the folder is not trusted"
        )
        lines.append(
            "Git runs with this repository's hooks and program settings disabled in the "
            f"commands Heron runs, because {why}."
        )
    lines.append(USAGE)
    return "\n\n".join(lines)


def _status(state: WorkspaceTrust) -> str:
    remembered = state.remembered
    where = ""
    if remembered is not None:
        by = (
            ""
            if remembered.folder == str(state.folder)
            else f" by the entry for {remembered.folder}"
        )
        where = f" (remembered in `{home_relative(str(trust_file()))}`{by})"
    if state.run is not None:
        return "is trusted for this run (`heron exec --trust`)"
    if state.answer is True:
        return "is trusted for this session"
    if state.answer is False:
        return "is kept inert for this session"
    if remembered is not None:
        return ("is trusted" if remembered.trusted else "is kept inert") + where
    return "is not trusted: nobody has decided yet"


def _current(state: WorkspaceTrust) -> str | None:
    if state.answer is not None:
        return ALLOW_ONCE if state.answer else REJECT_ONCE
    if state.remembered is not None and state.run is None:
        return ALLOW_ALWAYS if state.remembered.trusted else REJECT_ALWAYS
    return None


def _question(state: WorkspaceTrust, first: bool) -> str:
    where = " (the git repository holding this folder)" if state.folder != state.cwd else ""
    lines = [f"Do you trust the files in {state.folder}{where}?"]
    if state.found:
        lines.append(
            "Until you do, Heron leaves out what it would add: "
            + ", ".join(f"`{p}`" for p in state.found[:LISTED])
            + (f" and {len(state.found) - LISTED} more" if len(state.found) > LISTED else "")
            + "."
        )
    lines.append(
        "Trusted, its command files and skills are offered, and git runs its hooks and the "
        "programs its settings name. Its rules files (AGENTS.md and the like) are read either "
        "way; while it is untrusted they are marked as such and cannot widen permissions."
    )
    if first:
        lines.append("Trust it only if you trust whoever wrote it. /trust changes this later.")
    return "\n\n".join(lines)


def _decided(state: WorkspaceTrust, choice: str) -> str:
    file = home_relative(str(trust_file()))
    return {
        ALLOW_ONCE: f"Trusted {state.folder} for this session: its command files and skills "
        "are in use, and git runs its hooks and settings.",
        ALLOW_ALWAYS: f"Trusted {state.folder} from now on, with every folder below it "
        f"(remembered in `{file}`).",
        REJECT_ONCE: f"{state.folder} stays inert for this session.",
        REJECT_ALWAYS: f"{state.folder} stays inert from now on, with every folder below it "
        f"(remembered in `{file}`).",
    }[choice]
