"""A prompt → the command it invokes, if it starts with `/name` of a known command.

Anything else, unknown `/words` included, is not a command and goes to the model as typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent.acp.protocol import PromptBlock, TextBlockIn
from agent.commands.catalog import CommandSet
from agent.commands.command import Command

# `/name` at the very start of the prompt, then a space or the end of the text.
_INVOCATION = re.compile(r"/([A-Za-z0-9_][A-Za-z0-9_.-]*)(?=\s|$)")


@dataclass
class Invocation:
    command: Command
    arguments: str  # the text typed after the name, stripped
    blocks: list[PromptBlock]  # the prompt as typed (what the transcript shows)
    attachments: list[PromptBlock] = field(default_factory=list)  # links, images: to the model


def parse(blocks: list[PromptBlock], commands: CommandSet) -> Invocation | None:
    if not blocks or not isinstance(blocks[0], TextBlockIn):
        return None
    match = _INVOCATION.match(blocks[0].text)
    if match is None:
        return None
    command = commands.find(match.group(1))
    if command is None:
        return None
    # Editors send a mention as its own block between text blocks: the text is the arguments,
    # the rest is attached to what the model gets.
    texts = [blocks[0].text[match.end() :]]
    texts += [block.text for block in blocks[1:] if isinstance(block, TextBlockIn)]
    attachments: list[PromptBlock] = [b for b in blocks[1:] if not isinstance(b, TextBlockIn)]
    return Invocation(command, "".join(texts).strip(), blocks, attachments)


def slash_word(blocks: list[PromptBlock]) -> str | None:
    """The `/name` a prompt starts with, known as a command or not."""
    if not blocks or not isinstance(blocks[0], TextBlockIn):
        return None
    match = _INVOCATION.match(blocks[0].text)
    return match.group(1) if match else None


def text_block(text: str) -> TextBlockIn:
    """A prompt's text block (what a command gives the model instead of what was typed)."""
    return TextBlockIn(type="text", text=text)
