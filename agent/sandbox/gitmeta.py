"""Where a repository keeps what git runs, and what git must read: for the sandbox's plan.

A command in the workspace may write every file git later reads outside the sandbox, so what
git *runs* from there must stay read-only: the repository's `.git` (a folder, or a file naming
one), the folder it names, the common folder of a worktree, the hooks folder `core.hooksPath`
names (husky's `.husky/`, also when the user's global config names a relative one), every config
file an `include.path` or `includeIf.*.path` pulls in, and the submodules' `.git`.

What a `.git` file names is followed only when it names it back: a worktree's git folder holds
a `gitdir` file leading to this `.git`, a submodule's has `core.worktree` leading to this work
tree. A command could write a `.git` file (or `.gitmodules`) naming any folder; an unverified one
is never made readable (it may be `~/.ssh`), and only protected where it lies inside the roots.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

MAX_CONFIGS = 24  # config files read per repository (includes included): a loop must end
MAX_SUBMODULES = 256


@dataclass
class GitPlaces:
    """`protect`: what must stay read-only where it lies inside the roots; `readable`: a
    verified worktree's git folders, which git must read wherever they lie."""

    protect: list[str] = field(default_factory=list)
    readable: list[str] = field(default_factory=list)


def places(root: str, home: str) -> GitPlaces:
    found = GitPlaces()
    dot_git = os.path.join(root, ".git")
    found.protect += real_targets(dot_git)
    gitdir = gitdir_of(dot_git, root)
    configs = [os.path.join(home, ".gitconfig"), _xdg_git_config(home), "/etc/gitconfig"]
    if gitdir is not None:
        found.protect.append(gitdir)
        found.readable.append(gitdir)
        common_text = read_small(os.path.join(gitdir, "commondir"))
        if common_text:
            common = os.path.realpath(os.path.join(gitdir, common_text.strip()))
            found.protect.append(common)
            found.readable.append(common)
            configs.append(os.path.join(common, "config"))
        configs += [os.path.join(gitdir, "config"), os.path.join(gitdir, "config.worktree")]
    for config, key, value in config_values(configs, home):
        if key == "core.hookspath":
            found.protect.append(_resolve(value, root, home))
        elif key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            found.protect.append(_resolve(value, os.path.dirname(config), home))
    for sub in submodule_paths(read_small(os.path.join(root, ".gitmodules")) or ""):
        path = os.path.normpath(os.path.join(root, sub))
        if path.startswith(root.rstrip("/") + "/"):
            found.protect += real_targets(os.path.join(path, ".git"))
            sub_gitdir = gitdir_of(os.path.join(path, ".git"), path)
            if sub_gitdir is not None:
                found.protect.append(sub_gitdir)
    found.protect = list(dict.fromkeys(found.protect))
    found.readable = list(dict.fromkeys(found.readable))
    return found


def gitdir_of(dot_git: str, work_tree: str) -> str | None:
    """The git folder of a `.git` entry: itself when a folder, or the one a `gitdir:` file
    names if that folder names this work tree back (a worktree's `gitdir` file, a submodule's
    `core.worktree`); None otherwise."""
    if os.path.isdir(dot_git) and not os.path.islink(dot_git):
        return os.path.realpath(dot_git)
    text = read_small(dot_git)
    if not text or not text.startswith("gitdir:"):
        return None
    target = os.path.realpath(os.path.join(work_tree, text[len("gitdir:") :].strip()))
    back = read_small(os.path.join(target, "gitdir"))
    if back and os.path.realpath(back.strip()) == os.path.realpath(dot_git):
        return target
    for _, key, value in config_values([os.path.join(target, "config")], ""):
        back_to = os.path.realpath(os.path.join(target, value))
        if key == "core.worktree" and back_to == os.path.realpath(work_tree):
            return target
    return None


def config_values(files: list[str], home: str) -> list[tuple[str, str, str]]:
    """(file, section.key lowercased with any subsection kept, value) of git config files and
    of the files they include (bounded), in the order git reads them."""
    values: list[tuple[str, str, str]] = []
    todo = [f for f in files if f]
    seen: set[str] = set()
    while todo and len(seen) < MAX_CONFIGS:
        path = os.path.realpath(todo.pop(0))
        if path in seen:
            continue
        seen.add(path)
        for key, value in config_entries(read_small(path) or ""):
            values.append((path, key, value))
            if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
                todo.append(_resolve(value, os.path.dirname(path), home))
    return values


def config_entries(text: str) -> list[tuple[str, str]]:
    """Git config syntax, enough to find keys: `[section]`, `[section "sub"]`, `[section.sub]`,
    `key = value` (quotes removed), comments."""
    found: list[tuple[str, str]] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            head = line[1 : line.find("]")] if "]" in line else line[1:]
            name, _, sub = head.strip().partition(" ")
            section = name.lower() + (f".{sub.strip().strip(chr(34))}" if sub else "")
            continue
        key, sep, value = line.partition("=")
        value = value.split(" #")[0].split(" ;")[0].strip().strip('"') if sep else "true"
        found.append((f"{section}.{key.strip().lower()}", value))
    return found


def submodule_paths(gitmodules: str) -> list[str]:
    return [v for k, v in config_entries(gitmodules) if k.endswith(".path")][:MAX_SUBMODULES]


def _resolve(value: str, base: str, home: str) -> str:
    if value.startswith("~/") and home:
        value = os.path.join(home, value[2:])
    return os.path.realpath(os.path.join(base, value))


def _xdg_git_config(home: str) -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return os.path.join(base, "git", "config")


def real_targets(path: str) -> list[str]:
    """`path` if it exists, and where it leads if it is a symlink (both must be protected:
    the link's target is what git or Heron will read)."""
    if not os.path.lexists(path):
        return []
    targets = [path] if not os.path.islink(path) else []
    real = os.path.realpath(path)
    if real != path and os.path.exists(real):
        targets.append(real)
    return targets


def read_small(path: str, limit: int = 256 * 1024) -> str | None:
    """A small regular file's text; None for anything else (a FIFO must not hang a start)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
