"""`/undo`: revert the newest turn whose file changes are not undone yet.

Shown as one tool call (the reverting diff, asked like an edit) and an agent message saying
what was reverted, what was left as it is and why, and that shell commands' changes are not
tracked. The model is told in its history, so it does not build on files that changed back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.errors import Refused, RejectedByUser
from agent.rewind.conversation import bring_back
from agent.undo.revert import Outcome
from agent.undo.tool import UndoArgs, UndoTool

if TYPE_CHECKING:
    from agent.commands.conversation import Conversation

NOTHING = (
    "Nothing to undo: no earlier turn of this conversation changed files with Heron's file "
    "tools, or those changes were undone already."
)


async def run_undo(turn: Conversation) -> None:
    session = turn.session
    record, untracked = session.undo.last_to_undo()
    if record is None:
        turn.updates.say(NOTHING + _untracked_note(untracked, "Turns of this conversation ran"))
        return
    back: str | None = None  # what became of a rewind's conversation
    brought_back = False  # ... it is as it was: the model needs no word about the files
    if record.conversation is not None:  # a rewind (agent.rewind): its conversation first
        why = await bring_back(session, record)
        brought_back = why is None
        back = (
            "Brought back the conversation that the rewind took out."
            if brought_back
            else f"The conversation was not brought back: {why}."
        )
        if not record.changes:
            turn.updates.say(back)
            turn.updates.checkpoint()
            return
    tool = UndoTool(record)
    args = UndoArgs(turn=record.turn)
    call_id = turn.calls.announce("undo", tool.name, tool)
    refused: Refused | None = None
    try:
        answer = await turn.calls.run_tool(call_id, tool, args, args.model_dump())
    except Refused as exc:  # the user's words: what they read below is for them
        answer, refused = exc.for_user, exc
    finally:
        if tool.started:  # even when cancelled halfway: what was reverted stays reverted
            session.undo.mark_undone(record)
    if tool.outcomes is None:
        if tool.started:
            turn.updates.say(f"The undo failed partway; some files may be reverted: {answer}")
            return
        why = "you rejected it." if isinstance(refused, RejectedByUser) else answer
        message = f"Nothing was undone, no file was changed: {why}"
        if tool.preview is not None and not any(o.reverted for o in tool.preview):
            session.undo.mark_undone(record)  # nothing left of it to take back: move on
            if session.undo.last_to_undo()[0] is not None:
                message += "\n\nRun /undo again to revert the turn before it."
        turn.updates.say(message)
        return
    done = [o for o in tool.outcomes if o.reverted]
    left = [o for o in tool.outcomes if not o.reverted]
    lines = [back] if back else []
    if done and back:
        lines.append(f"Put back the files the rewind had restored ({_files(done)}).")
    elif done:
        lines.append(f"Undid the file changes of the last turn that did any ({_files(done)}).")
    else:
        lines.append("No file of the last turn that changed files could be reverted.")
    if left:
        lines.append("Left as they are: " + " ".join(o.note for o in left))
    when = "That turn ran" if record.untracked == untracked else "Later turns ran"
    if record.untracked and record.untracked != untracked:
        when = "That turn and later ones ran"
    if note := _untracked_note(untracked, when):
        lines.append(note.strip())
    following, _ = session.undo.last_to_undo()
    if following is not None:
        lines.append("Run /undo again to revert the turn before it.")
    turn.updates.say("\n\n".join(lines))
    if brought_back:
        turn.updates.checkpoint()
        return
    summary = " ".join(o.note for o in tool.outcomes)
    session.history.append(
        {
            "role": "user",
            "content": (
                "[The user ran /undo, which reverted the file changes of your last turn that "
                f"changed files: {summary} Read files again before changing them.]"
            ),
        }
    )
    turn.updates.checkpoint()


def _files(outcomes: list[Outcome]) -> str:
    names = [o.path for o in outcomes]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _untracked_note(tools: list[str], when: str) -> str:
    if not tools:
        return ""
    what = " and ".join("shell commands" if name == "bash" else f"`{name}`" for name in tools)
    return (
        f" {when} {what}: their changes to files are not tracked, so /undo does not take them back."
    )
