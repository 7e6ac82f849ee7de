"""What the user reads in a permission question besides the call's own preview: the options'
labels, each naming one scope, short enough for an editor's button; the full list of what an
"always" answer would remember when one label cannot hold it; and the changes to git's or
Heron's settings that made a remembered answer not count this time."""

from __future__ import annotations

import json
import os
import re

from agent.acp.protocol import PermissionOption
from agent.files.paths import read_regular
from agent.tools.command_keys import ANY_ARGS, EXACT
from agent.tools.command_keys import describe_key as describe_command_key

# Between a key and the one path it is limited to; a NUL is in no command key or path.
PATH_SEP = "\x00"
SHORT = 48  # characters of a command or of names a label shows; longer, it refers to the list
SHOWN_FILES = 3  # changed files whose text the question shows
SHOWN_BYTES = 2000  # at most this much of each (a hook, `.git/config`)
SHOWN_PATHS = 20  # changed paths named; the rest are counted
WORKSPACE = " in the workspace (not .git/, .heron/ or Heron's config)"


def options_for(keys: list[str]) -> list[PermissionOption]:
    """Allow/reject once, and "always" options naming what they remember.

    A call without keys (a command the matcher cannot vouch for) can only be answered once."""
    once = [
        PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
        PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    ]
    if not keys:
        return once
    what, _ = _scope(keys)
    return [
        once[0],
        PermissionOption(
            option_id="allow_always", name=f"Always allow {what}", kind="allow_always"
        ),
        once[1],
        PermissionOption(
            option_id="reject_always", name=f"Always reject {what}", kind="reject_always"
        ),
    ]


def covered(keys: list[str]) -> str | None:
    """What "always" covers, one scope a line, when the label could not say it all (several
    keys, a long command); None when the label says it."""
    if not keys or not _scope(keys)[1]:
        return None
    lines = "\n".join(f"- {_label(key, in_list=True)}" for key in keys)
    return f'"Always" covers each of these:\n{lines}'


def unseen_note(paths: list[str]) -> str:
    """Why a remembered answer did not count: what sandboxed commands changed, with the text
    of the first few small files (a hook, `.git/config`), so the user can judge it."""
    lines = []
    shown = 0
    for path in paths[:SHOWN_PATHS]:
        line = f"- {_code(path)}"
        if not os.path.lexists(path):
            line += " (removed)"
        elif shown < SHOWN_FILES:
            data = read_regular(path, SHOWN_BYTES, follow_links=False)
            if data is not None:
                shown += 1
                line += "\n" + _indent(_code_block(data.decode("utf-8", "replace")))
        lines.append(line)
    if len(paths) > SHOWN_PATHS:
        lines.append(f"- and {len(paths) - SHOWN_PATHS} more")
    return (
        "Sandboxed commands changed git's or Heron's settings since you last allowed a program "
        "outside the sandbox. This call runs outside it, where git runs hooks and the programs "
        'its config names, so it asks even if you chose "always":\n' + "\n".join(lines)
    )


def _scope(keys: list[str]) -> tuple[str, bool]:
    """The one scope an option's label names, and whether the question must list the keys."""
    if len(keys) == 1:
        key, _, path = keys[0].partition(PATH_SEP)
        family, _, detail = key.partition(":")
        if family == EXACT and (len(detail) > SHORT or "\n" in detail):
            return "exactly this command" + (f" on exactly {_code(path)}" if path else ""), True
        return _label(keys[0]), False
    bare = [key.partition(PATH_SEP)[0] for key in keys]
    paths = {key.partition(PATH_SEP)[2] for key in keys}
    if len(set(bare)) == 1:  # one tool on several paths (a move out of the workspace)
        return f"{_label(bare[0], limited=True)} on these {len(paths)} paths", True
    families = {key.partition(":")[0] for key in bare}
    if families == {ANY_ARGS}:
        names = ", ".join(_code(key.partition(":")[2]) for key in bare)
        what = names if len(names) <= SHORT else f"these {len(keys)} programs"
        scope = f"{what} (safe options, paths in the workspace)"
    elif families == {EXACT}:
        scope = f"exactly these {len(keys)} commands"
    elif families <= {ANY_ARGS, EXACT}:
        scope = f"these {len(keys)} commands (each as listed)"
    else:
        scope = f"these {len(keys)} permissions (each as listed)"
    (path,) = paths if len(paths) == 1 else ("",)
    return scope + (f" on exactly {_code(path)}" if path else ""), True


def _label(key: str, in_list: bool = False, limited: bool = False) -> str:
    """What a key covers, in words: `` `git status` (safe options, paths in the workspace)``,
    ``exactly `ls -l` ``, ``fetches from `https://h:443` ``, `` `edit_file` on exactly
    `/w/.git/config` ``. In the question's list, an exact command is shown as it is (a block
    when it has several lines)."""
    key, sep, path = key.partition(PATH_SEP)
    limited = limited or bool(sep)
    family, colon, detail = key.partition(":")
    if not colon:
        what = f"`{key}`" + ("" if limited else WORKSPACE)
    elif family == EXACT and in_list:
        shown = _code(detail) if "\n" not in detail else "\n" + _indent(_code_block(detail))
        what = f"exactly {shown}"
    elif family in (ANY_ARGS, EXACT):
        what = describe_command_key(key)
    elif family == "fetch":
        what = f"fetches from `{detail}`"
    elif family == "mcp":
        server, tool = json.loads(detail)
        what = f"tool `{tool}` of MCP server `{server}`"
    else:
        what = f"`{detail}`"
    return f"{what} on exactly {_code(path)}" if path else what


def _code(text: str) -> str:
    """Inline code that shows `text` as it is, backticks included (CommonMark: a longer
    fence, padded)."""
    fence = "`" * (_longest_backticks(text) + 1)
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _code_block(text: str) -> str:
    fence = "`" * max(3, _longest_backticks(text) + 1)
    return f"{fence}\n{text.rstrip(chr(10))}\n{fence}"


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.split("\n"))
