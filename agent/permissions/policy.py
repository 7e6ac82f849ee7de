"""Mode × tool safety → allow, ask or refuse; and the "always" answers a session remembers.

Modes, from strictest:
- read-only: anything that changes the world or reaches the network is refused unasked.
- ask: every edit, delete, move, command and fetch asks.
- auto: as accept-edits, and commands that run in the sandbox (agent.sandbox) run unasked,
  except those that discard work (`git clean`, `git reset --hard`, `rm -r`:
  agent.tools.command_discards), which the sandbox would let through; without a sandbox on this
  system, or asked to run outside it, they ask.
- accept-edits: edits inside the workspace run unasked; commands and fetches ask.
- full-access: nothing asks.
Whatever the mode (but full-access), a call touching a path outside the session's workspace
asks, and so does a change under a protected folder (`.git/`, `.heron/`, Heron's own config
folder when the workspace holds it: a thread opened on $HOME) even in accept-edits.
For those, "always" remembers the tool on that exact path only: an "always" given for ordinary
edits does not cover them, and one given for them covers nothing else.
After a sandboxed command changed `.git/`, `.heron/` or Heron's config, a program that runs
outside the sandbox (a command, an MCP tool) asks, "always" answers suspended, and the question
shows the changes; once the user allowed one, they count as seen.

`decide` is called when the call is about to run, and again after the user answered (the
turn compares `real_paths` of both moments): modes and remembered answers count at the moment
of the action.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import default_config_path
from agent.errors import AlwaysRejected, ReadOnlyMode, Refused
from agent.files.workspace import inside, under
from agent.permissions.labels import PATH_SEP
from agent.tools.base import Safety, Tool, ToolContext

# Folders whose files change what runs (git hooks and config, Heron's own settings): a write
# there always asks, whatever the mode but full-access.
PROTECTED_DIRS = frozenset((".git", ".heron"))


def mcp_key(server: str, tool: str) -> str:
    """The key of one tool of one MCP server: the two names as a JSON array, so no pair of
    names can spell another pair (`gh:enterprise` + `list_repos` is not `gh` +
    `enterprise:list_repos`)."""
    return "mcp:" + json.dumps([server, tool], ensure_ascii=False)


class Decision(enum.Enum):
    ALLOW = "allow"
    ASK = "ask"
    REFUSE = "refuse"


@dataclass
class Verdict:
    decision: Decision
    refusal: Refused | None = None  # for a refusal: why, in the model's words and the user's
    keys: list[str] = field(default_factory=list)  # what an "always" answer remembers
    # Changes sandboxed commands made to git's or Heron's settings, shown in the question:
    # why a remembered answer did not count.
    unseen: list[str] = field(default_factory=list)


@dataclass
class PermissionMemory:
    """The "always allow" and "always reject" answers of one session, by permission key."""

    allowed: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)

    def allows(self, keys: list[str]) -> bool:
        return bool(keys) and all(k in self.allowed for k in keys)

    def rejects(self, keys: list[str]) -> bool:
        return any(k in self.rejected for k in keys)

    def remember(self, option_kind: str | None, keys: list[str]) -> None:
        if option_kind == "allow_always":
            self.allowed.update(keys)
        elif option_kind == "reject_always":
            self.rejected.update(keys)


def decide(
    mode: str,
    tool: Tool[Any],
    args: Any,
    ctx: ToolContext,
    memory: PermissionMemory,
    roots: list[Path],
) -> Verdict:
    problem = tool.refusal(args)
    if problem:
        return Verdict(Decision.REFUSE, Refused(problem))
    if mode == "full-access":
        return Verdict(Decision.ALLOW)
    keys = tool.workspace_keys(args, ctx, roots)
    safety = tool.safety(args)
    paths = tool.paths(args, ctx)
    outside = [path for path in paths if not inside(path, roots)]
    if safety is not Safety.READ_ONLY:
        config = heron_config_paths(ctx.settings)
        outside += [p for p in paths if p not in outside and _protected(p, roots, config)]
    if outside:
        # "Always" for a call outside the workspace or on a protected path covers that tool on
        # those exact paths only: it neither widens nor is widened by what was allowed inside.
        # The real path: an answer given for where a link led then must not follow the link
        # to wherever it leads later.
        exact = [os.path.realpath(path) for path in outside]
        keys = [f"{key}{PATH_SEP}{path}" for key in keys for path in exact]
    if memory.rejects(keys):
        return Verdict(Decision.REFUSE, AlwaysRejected(), keys)
    if mode == "read-only" and safety is not Safety.READ_ONLY:
        return Verdict(Decision.REFUSE, ReadOnlyMode(safety.value), keys)
    # The same per-session answer the run gets (agent.sandbox.rules.Sandbox.layers).
    confined = mode == "auto" and tool.sandboxed(args) and ctx.sandbox and ctx.sandbox.confining()
    if ctx.sandbox_changes and tool.runs_programs(args) and not confined:
        # A hook or a config setting planted by a sandboxed command would run unconfined:
        # the user sees the changes first, whatever was remembered.
        return Verdict(Decision.ASK, keys=keys, unseen=list(ctx.sandbox_changes))
    if memory.allows(keys):
        return Verdict(Decision.ALLOW, keys=keys)
    if outside:
        return Verdict(Decision.ASK, keys=keys)
    if safety is Safety.READ_ONLY:
        return Verdict(Decision.ALLOW, keys=keys)
    if mode in ("auto", "accept-edits") and safety is Safety.MUTATING:
        return Verdict(Decision.ALLOW, keys=keys)
    if confined and not tool.discards_work(args, ctx):
        return Verdict(Decision.ALLOW, keys=keys)  # the sandbox is the approval
    return Verdict(Decision.ASK, keys=keys)


def heron_config_paths(settings: Any) -> list[Path]:
    """Heron's configuration: its config folder (`config.toml`, `commands/`), and the config
    file it was started with when that lies elsewhere (`--config`, HERON_CONFIG)."""
    paths = [default_config_path().parent]
    if settings is not None and getattr(settings, "config_file", None):
        paths.append(Path(os.path.abspath(settings.config_file)))
    return paths


def _protected(path: Path, roots: list[Path], config: list[Path]) -> bool:
    """Under `.git/` or `.heron/` of the workspace, or under Heron's configuration, as written
    or with symlinks followed.

    Compared case-insensitively: on macOS and Windows `.GIT/config` is `.git/config`."""
    for candidate in (path, Path(os.path.realpath(path))):
        for place in config:
            for base in (place, Path(os.path.realpath(place))):
                if under(candidate, base):
                    return True
        for root in roots:
            for base in (root, Path(os.path.realpath(root))):
                if under(candidate, base):
                    parts = candidate.relative_to(base).parts
                    if any(part.lower() in PROTECTED_DIRS for part in parts):
                        return True
    return False


def real_paths(tool: Tool[Any], args: Any, ctx: ToolContext) -> list[str]:
    """Where the call's paths lead now, symlinks followed: compared before and after asking."""
    return [os.path.realpath(path) for path in tool.paths(args, ctx)]
