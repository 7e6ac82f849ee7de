"""`/rewind` lists the user's messages; `/rewind N` takes the conversation back to just before
message N, and the files back to their state then under /undo's rule (agent.rewind).

The restore is shown as one tool call (the reverting diff, asked like an edit); once allowed,
the conversation goes back first, all or nothing, then the files. The answer says what was
restored and what was left as it is, and gives the rewound message's text to send again. The
/rewind exchange itself stays in the transcript, after the point it went back to; /undo right
after brings everything back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.errors import Refused, RejectedByUser
from agent.rewind.conversation import rewind
from agent.rewind.marks import UserMessage, cut_before, user_messages
from agent.rewind.tool import RewindTool
from agent.undo.journal import TurnChanges
from agent.undo.tool import UndoArgs

if TYPE_CHECKING:
    from agent.commands.conversation import Conversation

NO_PLACE = (
    "Message {n} cannot be rewound to: {why}. Messages sent since Heron keeps the places to go "
    "back to (and not compacted into a summary since) can."
)


async def run_rewind(turn: Conversation, arguments: str) -> None:
    session = turn.session
    entries = session.transcript.entries
    messages = [m for m in user_messages(entries) if m.index < turn.prompt_at]
    if not arguments.strip():
        turn.updates.say(_listing(messages))
        return
    number = arguments.strip()
    if not number.isdigit() or not 1 <= int(number) <= len(messages):
        turn.updates.say(
            f"`/rewind {number}`: give the number of one of your messages (1 to "
            f"{len(messages)}); `/rewind` lists them."
            if messages
            else "There is no earlier message to rewind to."
        )
        return
    target = messages[int(number) - 1]
    cut = cut_before(entries, target.index)
    if cut is None:
        why = "this part of the conversation was saved without them, or it is a summary now"
        turn.updates.say(NO_PLACE.format(n=target.number, why=why))
        return
    journal = session.undo
    restored, changes, forgotten = journal.since(cut.undo)
    untracked = journal.untracked_since(cut.undo)
    done: list[str] = []
    left: list[str] = []
    if not changes:
        _, reason = await rewind(session, cut, turn.prompt_at, restored)
        if reason is not None:
            turn.updates.say(f"Nothing was rewound: {reason}.")
            return
    else:
        tool = RewindTool(
            TurnChanges(0, changes),
            journal,
            lambda: _conversation(session, cut, turn.prompt_at, restored),
        )
        args = UndoArgs(turn=0)
        call_id = turn.calls.announce("rewind", tool.name, tool)
        try:
            answer = await turn.calls.run_tool(call_id, tool, args, args.model_dump())
        except Refused as exc:
            why = "you rejected it" if isinstance(exc, RejectedByUser) else str(exc)
            turn.updates.say(f"Nothing was rewound, no file was changed: {why}.")
            return
        if tool.refused is not None or tool.outcomes is None:
            turn.updates.say(f"Nothing was rewound, no file was changed: {tool.refused or answer}.")
            return
        done = [o.note for o in tool.outcomes if o.reverted]
        left = [o.note for o in tool.outcomes if not o.reverted]
    turn.updates.say(_answer(target, done, left, untracked, forgotten))
    turn.updates.checkpoint()


async def _conversation(session: Any, cut: Any, keep_from: int, restored: Any) -> str | None:
    _, reason = await rewind(session, cut, keep_from, restored)
    return reason


def _listing(messages: list[UserMessage]) -> str:
    if not messages:
        return "There is no earlier message to rewind to."
    lines = ["Your messages (`/rewind N` goes back to just before message N):", ""]
    for message in messages:
        ago = len(messages) - message.number + 1
        first = (message.text.strip().splitlines() or ["(no text)"])[0]
        first = first if len(first) <= 80 else first[:79] + "…"
        when = "the last one" if ago == 1 else f"{ago} messages ago"
        lines.append(f"{message.number}. {first} — {when}")
    return "\n".join(lines)


def _answer(
    target: UserMessage, done: list[str], left: list[str], untracked: list[str], forgotten: bool
) -> str:
    lines = [f"Rewound the conversation to just before message {target.number}."]
    if done:
        lines.append("Files restored: " + " ".join(done))
    if left:
        lines.append("Left as they are: " + " ".join(left))
    if not done and not left:
        lines.append("No file changed by Heron's file tools since then needed restoring.")
    if untracked:
        what = " and ".join("shell commands" if n == "bash" else f"`{n}`" for n in untracked)
        lines.append(f"Since then Heron ran {what}: their changes to files are not tracked.")
    if forgotten:
        lines.append("Some older file changes were no longer kept (the undo history is bounded).")
    lines.append("/undo brings the conversation and those files back.")
    lines.append(f"Your message was:\n\n{target.text}")
    return "\n\n".join(lines)
