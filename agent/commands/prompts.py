"""Commands that are prompts: command files, the MCP servers' prompts and skills. Each becomes a
normal model turn on its prompt; the transcript keeps what the user typed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.acp.protocol import ImageBlockIn, PromptBlock, StopReason
from agent.commands.mcp import find_connection, prompt_arguments
from agent.commands.parse import Invocation, text_block
from agent.skills.content import SkillUnreadable, instructions

if TYPE_CHECKING:
    from agent.commands.conversation import Conversation


async def user_command(turn: Conversation, call: Invocation) -> StopReason:
    """A command file: its body, with the arguments in place, is the prompt."""
    assert call.command.file is not None
    prompt = call.command.file.prompt(call.arguments)
    return await turn.converse([text_block(prompt), *call.attachments], record=False)


async def skill_command(turn: Conversation, call: Invocation) -> StopReason:
    """`/skill-name request`: a model turn with the skill's instructions loaded first and the
    typed text as the request."""
    skill = call.command.skill
    assert skill is not None
    try:
        loaded = instructions(skill)
    except (SkillUnreadable, OSError) as exc:
        turn.updates.say(f"The skill `{skill.name}` cannot be read now: {exc}")
        return "end_turn"
    request = call.arguments or "Use this skill now."
    prompt = (
        f"The user started the skill `{skill.name}`; its instructions:\n\n{loaded}\n\n"
        f"The user's request:\n{request}"
    )
    return await turn.converse([text_block(prompt), *call.attachments], record=False)


async def mcp_prompt(turn: Conversation, call: Invocation) -> StopReason:
    """An MCP server's prompt (`/server.prompt`): fetched with the typed arguments, then a
    normal model turn on it."""
    ref = call.command.prompt
    assert ref is not None
    values, missing = prompt_arguments(ref, call.arguments)
    if missing:
        usage = f"/{call.command.name} {call.command.hint or ''}".rstrip()
        turn.updates.say(f"`/{call.command.name}` needs {', '.join(missing)}: `{usage}`.")
        return "end_turn"
    connection = find_connection(turn.session, ref.server)
    if connection is None:
        turn.updates.say(f"MCP server {ref.server!r} is not running.")
        return "end_turn"
    try:
        result = await connection.get_prompt(ref.name, values)
    except Exception as exc:  # ServerUnavailable: the message says what went wrong
        turn.updates.say(f"The prompt could not be fetched: {exc}")
        return "end_turn"
    blocks = _prompt_blocks(result.messages)
    if not blocks:
        turn.updates.say(f"MCP server {ref.server!r} returned an empty prompt.")
        return "end_turn"
    return await turn.converse([*blocks, *call.attachments], record=False)


def _prompt_blocks(messages: list[Any]) -> list[PromptBlock]:
    """An MCP prompt's messages as prompt content (text, images, embedded text resources)."""
    blocks: list[PromptBlock] = []
    for message in messages:
        content = message.content
        prefix = "" if message.role == "user" else f"({message.role}) "
        kind = getattr(content, "type", None)
        if kind == "text":
            blocks.append(text_block(prefix + content.text))
        elif kind == "image":
            blocks.append(
                ImageBlockIn(type="image", data=content.data, mime_type=content.mime_type)
            )
        elif kind == "resource" and isinstance(getattr(content.resource, "text", None), str):
            resource = content.resource
            blocks.append(
                text_block(f'{prefix}<resource uri="{resource.uri}">\n{resource.text}\n</resource>')
            )
        elif kind == "resource_link":
            blocks.append(text_block(f"{prefix}[Linked resource: {content.name} <{content.uri}>]"))
        else:
            blocks.append(text_block(f"{prefix}[{kind or 'unknown'} content left out]"))
    return blocks
