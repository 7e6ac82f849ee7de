"""Path helpers shared by the file and search tools.

`Tree` walks a folder the way ripgrep does with the flags `agent.tools.search` passes it, so
the pure-Python search and the rg-backed one see the same files: `.git` is skipped, symlinks
are not followed, hidden files are searched, and `.gitignore` files apply: those of the folder
and its subfolders, and those of its ancestors up to the enclosing git repository's root (up
to `/` outside a repository). `.git/info/exclude`, the global excludes file and `.ignore` files
are not read.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path


def display_path(path: Path, cwd: Path) -> str:
    """`path` relative to the session cwd when inside it (for titles and output), else as is."""
    if path == cwd:
        return "."
    if path.is_relative_to(cwd):
        return printable(str(path.relative_to(cwd)))
    return printable(str(path))


def home_relative(path: Path | str) -> str:
    """`~/…` for a path under the home folder (how the user knows their own files)."""
    home = os.path.expanduser("~")
    text = str(path)
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + "/") else text


def printable(text: str) -> str:
    """Text safe to encode as UTF-8: undecodable file-name bytes become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------
# Globs in gitignore syntax


def _class(glob: str, i: int) -> tuple[str, int] | None:
    """The `[...]` class starting at glob[i] as a regex, and the index after it."""
    j = i + 1
    negate = j < len(glob) and glob[j] in "!^"
    j += negate
    start = j
    if j < len(glob) and glob[j] == "]":  # a leading `]` is a member, not the end
        j += 1
    while j < len(glob) and glob[j] != "]":
        j += 1
    if j >= len(glob):
        return None
    members = glob[start:j]
    body = "".join(
        "-" if c == "-" and 0 < k < len(members) - 1 else re.escape(c)
        for k, c in enumerate(members)
    )
    return ("[^/" + body + "]" if negate else "[" + body + "]"), j + 1


def _braces(glob: str, i: int) -> tuple[list[str], int] | None:
    """The alternatives of the `{a,b}` group starting at glob[i], and the index after it."""
    depth, start = 0, i + 1
    parts: list[str] = []
    j = i
    while j < len(glob):
        c = glob[j]
        if c == "\\":
            j += 1  # an escaped character never opens, closes or splits
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return [*parts, glob[start:j]], j + 1
        elif c == "," and depth == 1:
            parts.append(glob[start:j])
            start = j + 1
        j += 1
    return None


def glob_body(glob: str) -> str:
    """A regex for a glob: `*` and `?` stay within one path component, `**/` spans folders."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            j = i
            while j < n and glob[j] == "*":
                j += 1
            whole_component = (i == 0 or glob[i - 1] == "/") and (j == n or glob[j] == "/")
            if j - i >= 2 and whole_component:
                if j == n:
                    out.append(".*")
                else:
                    out.append("(?:.*/)?")
                    j += 1  # the slash is part of `**/`
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (cls := _class(glob, i)):
            out.append(cls[0])
            i = cls[1]
        elif c == "{" and (alts := _braces(glob, i)):
            out.append("(?:" + "|".join(glob_body(a) for a in alts[0]) + ")")
            i = alts[1]
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


class Rules:
    """The lines of one `.gitignore` (or a list of globs), matched against relative paths.

    The last matching line decides, so the lines are combined in reverse order into one
    alternation: the regex engine then tries them last to first and the group that matched
    says which line it was. Paths are relative to the search root; `strip` and `prefix` turn
    them into paths relative to the folder the rules belong to.
    """

    def __init__(self, lines: list[str], strip: int = 0, prefix: str = "") -> None:
        self.strip, self.prefix = strip, prefix
        parsed = [rule for line in lines if (rule := _parse_line(line))]
        parsed.reverse()
        self.has_whitelist = any(negated for _, negated, _ in parsed)
        self._dirs = _combine(parsed)
        self._files = _combine([r for r in parsed if not r[2]])

    def __bool__(self) -> bool:
        return self._dirs is not None

    def match(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a `!` line; None: no line matches."""
        combined = self._dirs if is_dir else self._files
        if combined is None:
            return None
        regex, negated = combined
        m = regex.fullmatch(self.prefix + rel[self.strip :])
        if m is None or m.lastindex is None:
            return None
        return not negated[m.lastindex - 1]


def _parse_line(line: str) -> tuple[str, bool, bool] | None:
    """(regex, negated, dir_only) for one gitignore line; None for blanks and comments."""
    line = line.rstrip("\r\n")
    if line.startswith("#"):
        return None
    while line.endswith(" ") and not line.endswith("\\ "):  # trailing spaces, unless escaped
        line = line[:-1]
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    # A slash at the start or in the middle anchors the pattern to the rules' folder;
    # otherwise it matches a name at any depth.
    anchored = "/" in line
    line = line.removeprefix("/")
    body = glob_body(line)
    return (body if anchored else "(?:.*/)?" + body), negated, dir_only


def _combine(rules: list[tuple[str, bool, bool]]) -> tuple[re.Pattern[str], list[bool]] | None:
    if not rules:
        return None
    regex = re.compile("|".join(f"({body})" for body, _, _ in rules), re.DOTALL)
    return regex, [negated for _, negated, _ in rules]


def glob_filter(glob: str) -> Rules:
    """A find/grep glob as ripgrep's `--glob` reads it: rules where `!x` excludes and `x`
    includes. Turned into gitignore lines the other way round, as ripgrep does."""
    return Rules([glob[1:]] if glob.startswith("!") else ["!" + glob])


def allowed_by(glob: Rules | None, rel: str, is_dir: bool) -> bool:
    """Whether a glob filter lets a path through: with an include glob, a file must match it;
    folders are only ever dropped by an exclude glob."""
    if glob is None:
        return True
    verdict = glob.match(rel, is_dir)
    if verdict is None:
        return is_dir or not glob.has_whitelist
    return not verdict


# ---------------------------------------------------------------------------------------------
# Walking


def _load(path: Path, strip: int, prefix: str = "") -> Rules | None:
    data = read_regular(str(path))  # a FIFO named .gitignore must not block the walk
    if data is None:
        return None
    rules = Rules(data.decode("utf-8", "replace").splitlines(), strip, prefix)
    return rules if rules else None


def read_regular(
    path: str, max_bytes: int | None = None, follow_links: bool = True
) -> bytes | None:
    """The file's bytes; None when it cannot be opened or read, is not a regular file, or holds
    more than `max_bytes`. Checked on the open descriptor, so a FIFO or device swapped in after
    a stat is refused too; O_NONBLOCK: opening a FIFO would otherwise wait for a writer."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags if follow_links else flags | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        if max_bytes is None:
            with open(fd, "rb", closefd=False) as f:
                return f.read()
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return None if size > max_bytes else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


class Tree:
    """The files under `root` that are not ignored, in ripgrep's `--sort path` order."""

    def __init__(self, root: Path) -> None:
        self.root = root
        chain = [root, *root.parents]
        # Like ripgrep, .gitignore files count inside a git repository only up to its root; we
        # tell rg `--no-require-git` outside one, and then every ancestor's counts.
        self.git = any(os.path.exists(d / ".git") for d in chain)
        parents: list[Rules] = []
        if not (self.git and os.path.exists(root / ".git")):
            for d in root.parents:
                rel = root.relative_to(d).as_posix() + "/"
                if rules := _load(d / ".gitignore", 0, rel):
                    parents.append(rules)
                if self.git and os.path.exists(d / ".git"):
                    break
        parents.reverse()
        self._parents = tuple(parents)
        self._rules: dict[str, tuple[Rules, ...]] = {}
        self._ignored_dirs: dict[str, bool] = {}

    def rules_for(self, dir_rel: str, names: set[str] | None = None) -> tuple[Rules, ...]:
        """The ignore rules in force inside the folder `dir_rel` ("" for the root), outermost
        first; `names` (the folder's entries, when already listed) saves a few system calls."""
        cached = self._rules.get(dir_rel)
        if cached is not None:
            return cached
        inherited = self.rules_for(dir_rel.rpartition("/")[0]) if dir_rel else self._parents
        folder = self.root / dir_rel
        has = (lambda n: n in names) if names is not None else (lambda n: (folder / n).exists())
        if dir_rel and self.git and has(".git"):
            inherited = ()  # a nested repository: the outer rules stop here, as in git
        strip = len(dir_rel) + 1 if dir_rel else 0
        own = _load(folder / ".gitignore", strip) if has(".gitignore") else None
        rules = (*inherited, own) if own else inherited
        self._rules[dir_rel] = rules
        return rules

    def ignored(self, rel: str, is_dir: bool = False) -> bool:
        """Whether the path, or one of the folders above it, is ignored."""
        parent = rel.rpartition("/")[0]
        if parent:
            verdict = self._ignored_dirs.get(parent)
            if verdict is None:
                verdict = self._ignored_dirs[parent] = self.ignored(parent, True)
            if verdict:
                return True
        return _ignored(self.rules_for(parent), rel, is_dir)

    def walk(self, glob: Rules | None = None) -> Iterator[str]:
        """Relative paths of the files to search, depth first with each folder's entries
        sorted by name (the order of `rg --sort path`)."""
        stack = [self._entries("", glob)]
        while stack:
            entry = next(stack[-1], None)
            if entry is None:
                stack.pop()
            elif entry[1]:
                stack.append(self._entries(entry[0], glob))
            else:
                yield entry[0]

    def _entries(self, dir_rel: str, glob: Rules | None) -> Iterator[tuple[str, bool]]:
        try:
            with os.scandir(self.root / dir_rel) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return iter(())
        rules = self.rules_for(dir_rel, {e.name for e in entries})
        prefix = dir_rel + "/" if dir_rel else ""
        kept = []
        for e in entries:
            if e.name == ".git" or e.is_symlink():
                continue
            is_dir = e.is_dir(follow_symlinks=False)
            if not is_dir and not e.is_file(follow_symlinks=False):
                continue  # sockets, fifos, devices
            rel = prefix + e.name
            if allowed_by(glob, rel, is_dir) and not _ignored(rules, rel, is_dir):
                kept.append((rel, is_dir))
        return iter(kept)


def _ignored(rules: tuple[Rules, ...], rel: str, is_dir: bool) -> bool:
    # The innermost .gitignore with an opinion decides.
    for r in reversed(rules):
        verdict = r.match(rel, is_dir)
        if verdict is not None:
            return verdict
    return False
