"""What git may run from a repository Heron does not trust.

A repository names programs that git then runs by itself: hooks (`.git/hooks/*`,
`core.hooksPath`) and settings of its `.git/config` (`core.fsmonitor`, `core.sshCommand`,
filter and diff drivers, `credential.helper`, `!` aliases, …). A cloned or downloaded folder,
or a sandboxed command that wrote `.git/`, must not get code run by a later git command
outside the sandbox. So every command Heron runs in a folder it does not trust (and, in a
trusted one, after a sandboxed command changed `.git/config` or `.git/hooks/` until the user
confirms trust again) gets git settings in its environment (`GIT_CONFIG_COUNT`,
`GIT_CONFIG_KEY_n`, `GIT_CONFIG_VALUE_n`: what `git -c` sets, for every git the command
starts, however deeply):

- `core.hooksPath=/dev/null` and `core.fsmonitor=` always: no hook runs, yours neither;
- for each setting of the repository's own config (local and worktree scope, includes
  followed) that names a program: your value of it (system, global, environment) if you have
  one, else a harmless one (`ssh`, `cat`, nothing, or a path that cannot exist, so git says
  it cannot run it);
- `protocol.ext.allow=never` (a remote URL `ext::sh -c …` runs a command).

Which settings the repository has is asked of git itself (`git config --list --show-scope`,
which reads config and runs nothing), for the folder the command starts in, just before it
starts. A `git -c …` the command spells out itself still wins: that is visible in the command
the user approves.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from agent.files.workspace import repository_root
from agent.sandbox.gitmeta import config_entries

log = logging.getLogger("heron.trust")

# A program path that cannot exist: git says "cannot run /dev/null/…" rather than running
# anything, and the name tells the model and the user why.
DISABLED = "/dev/null/heron-disabled-in-untrusted-folder"
ALWAYS = (("core.hookspath", "/dev/null"), ("core.fsmonitor", ""), ("protocol.ext.allow", "never"))
READ_TIMEOUT = 5.0  # seconds `git config --list` may take (a config include of a FIFO blocks)
MAX_CONFIG_BYTES = 1024 * 1024

# (section, key) → the harmless value; "*" matches any key of the section. The subsection
# (`filter.<driver>.clean`) is whatever the repository named.
_PROGRAMS: dict[tuple[str, str], str] = {
    ("core", "hookspath"): "/dev/null",
    ("core", "fsmonitor"): "",
    ("core", "sshcommand"): "ssh",
    ("core", "editor"): "true",
    ("core", "pager"): "cat",
    ("core", "askpass"): "",
    ("core", "alternaterefscommand"): "",
    ("sequence", "editor"): "true",
    ("pager", "*"): "cat",
    ("diff", "external"): DISABLED,
    ("diff", "command"): DISABLED,
    ("diff", "textconv"): "cat",
    ("filter", "clean"): "",
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("filter", "required"): "false",
    ("merge", "driver"): DISABLED,
    ("mergetool", "cmd"): DISABLED,
    ("difftool", "cmd"): DISABLED,
    ("credential", "helper"): "",
    ("gpg", "program"): "gpg",
    ("gpg", "defaultkeycommand"): "",
    ("alias", "*"): "",
    ("submodule", "update"): "checkout",
    ("remote", "uploadpack"): "git-upload-pack",
    ("remote", "receivepack"): "git-receive-pack",
    ("trailer", "command"): "",
    ("trailer", "cmd"): "",
    ("interactive", "difffilter"): "",
    ("sendemail", "smtpserver"): DISABLED,
    ("sendemail", "sendmailcmd"): DISABLED,
    ("sendemail", "tocmd"): DISABLED,
    ("sendemail", "cccmd"): DISABLED,
    ("sendemail", "headercmd"): DISABLED,
    ("man", "cmd"): DISABLED,
    ("man", "viewer"): "",
    ("browser", "cmd"): DISABLED,
    ("web", "browser"): "",
    ("instaweb", "httpd"): DISABLED,
    ("hook", "command"): "true",
}
# gpg.<format>.program: the format's own default program.
_GPG_PROGRAMS = {"openpgp": "gpg", "x509": "gpgsm", "ssh": "ssh-keygen"}
_BOOLEANS = {"true", "false", "yes", "no", "on", "off", "1", "0", ""}


def harmless_value(key: str, value: str = "") -> str | None:
    """What a program setting `key` (as git lists it: `section.sub.name`, section and name
    lower-cased) is replaced by; None when the key names no program."""
    parts = key.split(".")
    if len(parts) < 2:
        return None
    section, name = parts[0].lower(), parts[-1].lower()
    sub = ".".join(parts[1:-1])
    if section == "gpg" and name == "program" and sub:
        return _GPG_PROGRAMS.get(sub.lower(), DISABLED)
    if section == "pager" and value.strip().lower() in _BOOLEANS:
        return None  # `pager.log = false`: a switch, not a program
    if section == "submodule" and not value.startswith("!"):
        return None  # checkout, rebase, merge, none: built in; `!cmd` runs a command
    found = _PROGRAMS.get((section, name), _PROGRAMS.get((section, "*")))
    if found is None:
        return None
    if section in ("diff", "filter", "merge", "mergetool", "difftool", "trailer", "hook") and (
        not sub and name != "external"
    ):
        return None  # those name programs only under a subsection (a driver, a tool)
    return found


def program_settings(entries: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """The settings that put the repository's own programs out of play: `entries` are
    (scope, key, value) as git lists them, lowest priority first."""
    pairs: list[tuple[str, str]] = list(ALWAYS)
    keys: dict[str, list[tuple[str, str]]] = {}
    for scope, key, value in entries:
        keys.setdefault(key, []).append((scope, value))
    for key, found in keys.items():
        if not any(scope in ("local", "worktree") for scope, _ in found):
            continue
        kept = [value for scope, value in found if scope not in ("local", "worktree")]
        replacement = next((r for _, v in found if (r := harmless_value(key, v)) is not None), None)
        if replacement is None or key in dict(ALWAYS):
            continue
        if key.split(".")[0].lower() == "credential" and key.lower().endswith(".helper"):
            # A list: an empty value empties it, then the user's own helpers come back.
            pairs += [(key, ""), *((key, value) for value in kept)]
        else:
            pairs.append((key, kept[-1] if kept else replacement))
    return pairs


def read_settings(cwd: Path, environ: Mapping[str, str]) -> list[tuple[str, str, str]] | None:
    """(scope, key, value) of every git setting in force in `cwd`, from git itself; None when
    git is missing, failed or took too long. Blocking: run it in a worker thread."""
    env = {**environ, **config_env(list(ALWAYS), environ), "GIT_OPTIONAL_LOCKS": "0"}
    env.pop("GIT_DIR", None)
    try:
        done = subprocess.run(
            ["git", "config", "--list", "--show-scope", "--includes", "-z"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=READ_TIMEOUT,
            check=False,
        )
    except FileNotFoundError:
        return None  # no git: nothing runs git's settings either
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("cannot read the git settings in %s: %s", cwd, exc)
        return None
    if done.returncode != 0:
        log.warning(
            "cannot read the git settings in %s: %s", cwd, done.stderr.decode(errors="replace")
        )
        return None
    return _parse_listing(done.stdout[: MAX_CONFIG_BYTES * 4])


def _parse_listing(data: bytes) -> list[tuple[str, str, str]]:
    fields = data.decode("utf-8", errors="surrogateescape").split("\0")
    entries: list[tuple[str, str, str]] = []
    for scope, pair in zip(fields[0::2], fields[1::2], strict=False):
        key, _, value = pair.partition("\n")
        entries.append((scope, key, value))
    return entries


def guard_env(cwd: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that keep the repository's programs out of a command started in `cwd`.
    Blocking (it runs `git config`): run it in a worker thread."""
    environ = os.environ if environ is None else environ
    # Outside a repository there is no repository config to read (a `cd` into one later in
    # the command still meets the hooks and fsmonitor settings above).
    entries = read_settings(cwd, environ) if repository_root(cwd) is not None else []
    pairs = program_settings(entries or [])
    extra: dict[str, str] = {}
    if entries and any(
        scope in ("local", "worktree") and key.lower() == "core.gitproxy"
        for scope, key, _ in entries
    ):
        # A list whose first match wins, so no later setting can replace it; the variable
        # beats every setting, and empty means no proxy command.
        extra["GIT_PROXY_COMMAND"] = ""
    return {**config_env(pairs, environ), **extra}


def config_env(pairs: list[tuple[str, str]], environ: Mapping[str, str]) -> dict[str, str]:
    """`pairs` as GIT_CONFIG_* variables, after the ones `environ` already holds."""
    try:
        start = max(0, int(environ.get("GIT_CONFIG_COUNT", "0") or "0"))
    except ValueError:
        start = 0
    env = {
        name: environ[name]
        for index in range(start)
        for name in (f"GIT_CONFIG_KEY_{index}", f"GIT_CONFIG_VALUE_{index}")
        if name in environ
    }
    for offset, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{start + offset}"] = key
        env[f"GIT_CONFIG_VALUE_{start + offset}"] = value
    env["GIT_CONFIG_COUNT"] = str(start + len(pairs))
    return env


def git_folder(root: Path) -> Path | None:
    """The git directory of the repository at `root` (a `.git` folder, or where a `.git`
    file points), or None."""
    dot = root / ".git"
    try:
        if dot.is_dir():
            return dot
        if dot.is_file():
            with open(dot, encoding="utf-8", errors="replace") as f:
                line = f.read(4096).strip()
            if line.startswith("gitdir:"):
                target = Path(line.removeprefix("gitdir:").strip())
                target = target if target.is_absolute() else root / target
                common = target / "commondir"
                if common.is_file():
                    shared = Path(common.read_text(errors="replace").strip())
                    target = shared if shared.is_absolute() else target / shared
                return target if target.is_dir() else None
    except OSError:
        return None
    return None


def planted(root: Path) -> list[str]:
    """What the repository at `root` holds that git would run by itself, for the trust
    question: its program settings (`.git/config`, read without git) and hooks."""
    found: list[str] = []
    folder = git_folder(root)
    if folder is None:
        return found
    try:
        with open(folder / "config", "rb") as f:
            text = f.read(MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        text = ""
    for key, value in config_entries(text):
        if key.endswith(".required"):
            continue  # a filter's switch, not a program
        if harmless_value(key, value) is not None or key.lower().startswith("include"):
            found.append(f".git/config: {key}")
    try:
        hooks = sorted(os.scandir(folder / "hooks"), key=lambda e: e.name)
    except OSError:
        hooks = []
    for entry in hooks[:200]:
        try:
            runnable = entry.is_file() and os.access(entry.path, os.X_OK)
        except OSError:
            runnable = False
        if runnable and not entry.name.endswith(".sample"):
            found.append(f".git/hooks/{entry.name}")
    return found
