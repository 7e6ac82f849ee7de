"""One session's workspace trust: plain data, decided when the session opens and changed only
by the user (the question at the first prompt, `/trust`).

Whose word counts, first to last:
1. this run's (`heron exec --trust`: `_meta.heron.trust`), never saved;
2. this session's own answer ("for this session": trusted, or kept inert), saved with the
   session, so a reload or a fork keeps it;
3. the user's remembered decision for the folder or one above it (`agent.trust.folders`);
4. otherwise the folder is untrusted.

The folder is the project: the git repository holding the session's cwd, else the cwd itself
(real paths). `_meta.workspace_trust` tells rich clients the state in Mistral Vibe's shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.trust.folders import Remembered, remembered
from agent.trust.inventory import files_of, inert

META_KEY = "workspace_trust"  # Mistral Vibe's name for it, and its statuses below
TRUSTED, SESSION, UNTRUSTED = "trusted", "session", "untrusted"


@dataclass
class WorkspaceTrust:
    cwd: Path
    folder: Path  # what is trusted: the repository holding cwd, else cwd (real path)
    repository: bool  # `folder` is a git repository's root
    remembered: Remembered | None = None  # the user's decision covering the folder, if any
    answer: bool | None = None  # this session's own answer (saved with it)
    run: bool | None = None  # this run's (heron exec --trust), never saved
    ask: bool = True  # may the first prompt ask (heron exec: no, it says so on stderr)
    asked: bool = False  # the question was asked in this session
    found: list[str] = field(default_factory=list)  # what stays inert while untrusted
    # `.git/` paths a sandboxed command changed since trust was last confirmed: git runs with
    # the repository's programs disabled until the user confirms again (agent.trust.git).
    git_changes: list[str] = field(default_factory=list)

    @property
    def trusted(self) -> bool:
        for word in (self.run, self.answer):
            if word is not None:
                return word
        return self.remembered is not None and self.remembered.trusted

    @property
    def status(self) -> str:
        if not self.trusted:
            return UNTRUSTED
        if self.run is not None or self.answer is not None:
            return SESSION
        return TRUSTED

    @property
    def guards_git(self) -> bool:
        """Commands run with the repository's git programs disabled (agent.trust.git)."""
        return not self.trusted or bool(self.git_changes)

    def should_ask(self) -> bool:
        """Ask at the first prompt: nobody decided for this folder, and it holds something
        that stays inert until someone does."""
        undecided = self.run is None and self.answer is None and self.remembered is None
        return self.ask and not self.asked and undecided and bool(self.found)

    def look(self) -> None:
        """Read the remembered decision and what is inert again. Blocking (small reads).
        The caller tells the session when this changed the trust (`trust_changed`)."""
        self.remembered = remembered(self.folder)
        self.look_for_inert()

    def look_for_inert(self) -> None:
        """Find again what the folder holds that stays inert while it is untrusted."""
        self.found = inert(self.cwd, self.folder)

    def saved(self) -> str | None:
        """The session's own answer as the store keeps it."""
        return None if self.answer is None else (TRUSTED if self.answer else UNTRUSTED)

    def restore(self, saved: str | None) -> None:
        self.answer = {TRUSTED: True, UNTRUSTED: False}.get(saved or "")

    def meta(self) -> dict[str, Any]:
        """`_meta.workspace_trust` of the session/new, load and resume answers."""
        details = None
        if not self.trusted and self.found:
            details = {
                "cwd": str(self.cwd),
                "repoRoot": str(self.folder) if self.repository else None,
                "ignoredFiles": files_of(self.found),
                "availableDecisions": [],  # decided through session/request_permission, /trust
            }
        return {META_KEY: {"status": self.status, "details": details}}


def open_trust(cwd: Path, folder: Path, repository: bool) -> WorkspaceTrust:
    """A session's trust as it opens. Blocking (small reads; no process)."""
    trust = WorkspaceTrust(cwd, folder, repository)
    trust.look()
    return trust
