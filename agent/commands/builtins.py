"""What each built-in command does. Every handler takes the running turn and the invocation,
and returns the turn's stop reason; the user's text is already in the transcript.

Commands that only answer (/help, /model, /mode, /undo, /compact) end the turn without a
model request (/compact asks the summarizer only); /init runs a normal model turn with its
prompt, through the same tools and permissions as any prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from agent.acp.protocol import StopReason
from agent.commands import pickers
from agent.commands.catalog import commands_of, user_folder
from agent.commands.parse import Invocation, text_block
from agent.commands.rewind import run_rewind
from agent.commands.rules import rules, skipped_lines
from agent.commands.trust import trust
from agent.commands.undo import run_undo
from agent.context.compaction import Budget, summary_of
from agent.context.compaction import compact as compact_history
from agent.context.usage import FIXED, HISTORY, chars_per_token, context_size, estimate_tokens
from agent.files.paths import home_relative
from agent.llm import LLMError
from agent.options.catalog import MODE_INFO

if TYPE_CHECKING:
    from agent.commands.conversation import Conversation
    from agent.sandbox import Sandbox

Handler = Callable[["Conversation", Invocation], Awaitable[StopReason]]

INIT_PROMPT = """\
Study this project, then create or update the file AGENTS.md at its root: the instructions a \
coding agent needs to work here well.

First look around: the layout (list the main directories), the README, the build and \
dependency files (pyproject.toml, package.json, Cargo.toml, go.mod, Makefile, …), the CI \
configuration, any existing agent instructions (AGENTS.md, CLAUDE.md, .cursorrules, \
.cursor/rules/, .github/copilot-instructions.md) and a few representative source and test files.

Then write AGENTS.md, concise and specific to this project (no generic advice), with:
- what the project is, in two or three sentences;
- the layout: the main folders and what lives where;
- the exact commands to set up, build, run, test (the whole suite and a single test), lint \
and format;
- code style and conventions a linter does not already enforce;
- anything surprising: generated files not to edit, required environment, known traps.

If AGENTS.md exists, improve it: keep what is still true and what was written by hand, fix \
what is out of date, add what is missing. Keep it well under 200 lines. Change no other file. \
When done, say in a few lines what you wrote or changed."""


async def undo(turn: Conversation, call: Invocation) -> StopReason:
    """/undo: revert the newest turn whose file changes are not undone yet (agent.undo)."""
    await run_undo(turn)
    return "end_turn"


async def rewind(turn: Conversation, call: Invocation) -> StopReason:
    """/rewind [N]: list the messages, or go back to before message N (agent.rewind)."""
    await run_rewind(turn, call.arguments)
    return "end_turn"


async def help_(turn: Conversation, call: Invocation) -> StopReason:
    session = turn.session
    skills = await session.find_skills()
    catalog = commands_of(session)
    commands = catalog.commands().values()
    groups = {
        "built-in": "Commands (type them at the start of a message):",
        "project": "This project's commands (`.heron/commands/`):",
        "user": f"Your commands (`{home_relative(user_folder())}/`):",
        "mcp": "MCP server prompts:",
        "skill": "Skills (`/name request` loads the skill, then asks the model):",
    }
    lines: list[str] = []
    for source, title in groups.items():
        listed = [c for c in commands if c.source == source]
        if not listed:
            continue
        lines += ["", title, ""] if lines else [title, ""]
        for command in listed:
            usage = f"/{command.name}" + (f" <{command.hint}>" if command.hint else "")
            lines.append(f"- `{usage}` — {command.description}")
    problems = skipped_lines(skills.skipped) + [
        f"- `{skill.name}` has no `/{skill.name}`: a {command.source} command has that name"
        for skill, command in catalog.shadowed_skills()
    ]
    if problems:
        lines += ["", "Skills not offered:", "", *problems]
    if not session.trust.trusted and session.trust.found:
        lines += [
            "",
            "This project is not trusted: its command files and skills are not offered "
            "(`/trust` shows what and changes it).",
        ]
    lines += [
        "",
        "`/rules` shows the rules files and skills in force. "
        "Any other text, an unknown `/word` included, goes to the model as typed. A Markdown "
        "file `NAME.md` in the project's `.heron/commands/` or in your own "
        f"`{home_relative(user_folder())}/` adds `/NAME`: its body is the prompt, "
        "`$ARGUMENTS` the text typed after the name.",
    ]
    turn.updates.say("\n".join(lines))
    return "end_turn"


async def compact(turn: Conversation, call: Invocation) -> StopReason:
    """/compact [focus]: the whole history becomes a summary now (agent.context.compaction)."""
    session = turn.session
    if len(session.history) < 2:
        turn.updates.say("Nothing to compact: the conversation has no earlier messages yet.")
        return "end_turn"
    window = await context_size(session.settings, session.context_limit)
    # What the next request sends besides the history: the system prompt and the tools.
    system = {"role": "system", "content": await session.system_prompt()}
    fixed_per_token = chars_per_token(session.settings, FIXED)
    fixed = estimate_tokens([system, *session.tool_specs()], fixed_per_token)
    compaction = turn.updates.begin_compaction()
    try:
        compacted = await compact_history(
            session.settings,
            session.history,
            Budget(window, fixed, chars_per_token(session.settings, HISTORY)),
            focus=call.arguments or None,
            whole=True,
        )
    except LLMError as exc:
        text = f"The conversation could not be compacted: {exc}"
        turn.updates.end_compaction(compaction, text, ok=False)
        return "end_turn"
    if compacted is None:
        text = "Nothing to compact: the conversation has no earlier messages yet."
        turn.updates.end_compaction(compaction, text, ok=False)
        return "end_turn"
    before = len(session.history)
    session.history, summarized = compacted.history, compacted.summarized
    session.history_rewritten(summarized, before)
    focus = f", focused on “{call.arguments}”" if call.arguments else ""
    text = f"Compacted the conversation: {summarized} messages are now a summary{focus}."
    turn.updates.end_compaction(compaction, text, summary_of(session.history, summarized))
    turn.updates.checkpoint()
    # What the next request sends: the system prompt and the tools as well as the summary.
    await turn.updates.report_tokens(await session.next_request_tokens())
    return "end_turn"


async def init(turn: Conversation, call: Invocation) -> StopReason:
    """/init: a normal model turn with the built-in prompt."""
    prompt = INIT_PROMPT
    if call.arguments:
        prompt += f"\n\nThe user adds: {call.arguments}"
    return await turn.converse([text_block(prompt), *call.attachments], record=False)


async def model(turn: Conversation, call: Invocation) -> StopReason:
    return await _choose(turn, call, "model", "model")


async def mode(turn: Conversation, call: Invocation) -> StopReason:
    return await _choose(turn, call, "mode", "permission mode")


async def _choose(turn: Conversation, call: Invocation, option_id: str, label: str) -> StopReason:
    """/model and /mode: without a name, the choices; with one, switch (pickers)."""
    session = turn.session
    if not call.arguments:
        now = pickers.current(session, option_id)
        lines = [f"The {label} is `{now}`. Choices:", ""]
        for value, description in pickers.choices(session, option_id):
            mark = " (current)" if value == now else ""
            lines.append(f"- `{value}`{mark} — {description}")
        lines += ["", f"Switch with `/{option_id} NAME`."]
        turn.updates.say("\n".join(lines))
        return "end_turn"
    try:
        await pickers.apply_choice(session, option_id, call.arguments)
    except ValueError as exc:
        turn.updates.say(str(exc))
        return "end_turn"
    now = pickers.current(session, option_id)
    if option_id == "mode":  # what the user just allowed, and what stays blocked
        turn.updates.say(f"The {label} is now `{now}`: {mode_summary(now, session.sandbox)}")
    else:
        turn.updates.say(f"The {label} is now `{now}`.")
    return "end_turn"


def mode_summary(mode: str, sandbox: Sandbox) -> str:
    """What `mode` lets run and what it stops, in one line (the picker's description); for
    auto, whether this session's sandbox confines (the answer its commands get)."""
    summary = MODE_INFO[mode][1]
    layers = sandbox.layers()
    if mode == "auto" and layers.path is None:
        summary += f" No sandbox here ({layers.missing}), so commands ask, as in ask mode."
    return summary


BUILTIN_HANDLERS: dict[str, Handler] = {
    "help": help_,
    "compact": compact,
    "init": init,
    "undo": undo,
    "rewind": rewind,
    "model": model,
    "mode": mode,
    "trust": trust,
    "rules": rules,
}
