"""Front matter: a `---` line, a small YAML mapping, a `---` line, then the body.

Command files (`.heron/commands/*.md`) and Agent Skills (`SKILL.md`) start with one. Only the
YAML they use is read, without a dependency:

- `key: value`, the value plain or in single or double quotes; an unquoted value may hold
  colons (`description: Use it when: …`), as the other agents' lenient parsers allow;
- block scalars (`key: |` keeps the lines, `key: >` folds them; `-` and `+` chomping);
- a plain or quoted value continued on more indented lines (folded into one line);
- nested maps and lists (`metadata:` then indented lines, `- item`): skipped, nothing Heron
  reads is nested;
- comments (`#`) and blank lines.

Keys are lower-cased. A line this cannot read is named in `problems` (a skill with one is
skipped, as a YAML parser would fail on it); command files, lenient as before, pass over it.
A file without a closed front matter is all body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FENCE = "---"
MAX_FRONT_MATTER_LINES = 200  # a "front matter" longer than this is not one


@dataclass
class FrontMatter:
    values: dict[str, str] = field(default_factory=dict)  # top-level scalars, keys lower-cased
    body: str = ""
    found: bool = False  # the text opened and closed a front matter
    problems: list[str] = field(default_factory=list)  # lines that could not be read


def parse_front_matter(text: str) -> FrontMatter:
    text = text.removeprefix("\ufeff")
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].rstrip() != FENCE:
        return FrontMatter(body=text)
    for end in range(1, min(len(lines), MAX_FRONT_MATTER_LINES + 1)):
        if lines[end].rstrip() in (FENCE, "..."):
            values, problems = _mapping(lines[1:end])
            return FrontMatter(values, "\n".join(lines[end + 1 :]), True, problems)
    return FrontMatter(body=text)  # never closed: not front matter


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(the front matter's keys, lower-cased → values; the body), problems passed over."""
    parsed = parse_front_matter(text)
    return parsed.values, parsed.body


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _mapping(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    values: dict[str, str] = {}
    problems: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        i += 1
        if not stripped or stripped.startswith("#"):
            continue
        if _indent(line) > 0 or line.startswith("\t"):
            problems.append(f"line {i + 1}: indented with nothing above it to continue")
            continue
        key, colon, value = stripped.partition(":")
        key = key.strip().strip("'\"").lower()
        if not colon or not key or " " in key.strip():
            problems.append(f"line {i + 1}: not `key: value`: {stripped[:60]!r}")
            continue
        value = value.strip()
        # The indented lines that belong to this key.
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > 0):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        if value[:1] in ("|", ">"):
            values[key] = _block_scalar(value, block)
        elif value.startswith(("'", '"')):
            quoted = " ".join([value, *(b.strip() for b in block if b.strip())])
            parsed = _quoted(quoted)
            if parsed is None:
                problems.append(f"line {i + 1 - len(block)}: unclosed quote in {key!r}")
            else:
                values[key] = parsed
        elif value:
            continued = [b.strip() for b in block if b.strip()]
            values[key] = _plain(" ".join([value, *continued]))
        # An empty value with an indented block is a nested map or list: skipped.
    return values, problems


def _block_scalar(header: str, block: list[str]) -> str:
    """`|` (lines kept) or `>` (lines folded), with `-` (strip) or `+` (keep) chomping."""
    style, chomp = header[0], header[1:].strip()[:1]
    present = [line for line in block if line.strip()]
    margin = min((_indent(line) for line in present), default=0)
    rows = [line[margin:] if line.strip() else "" for line in block]
    if style == "|":
        text = "\n".join(rows)
    else:  # folded: lines of a paragraph join with spaces, blank lines stay breaks
        paragraphs: list[str] = []
        current: list[str] = []
        for row in rows:
            if row:
                current.append(row.strip())
            else:
                paragraphs.append(" ".join(current))
                current = []
        paragraphs.append(" ".join(current))
        text = "\n".join(paragraphs)
    if chomp == "-":
        return text.rstrip("\n")
    return text.rstrip("\n") + "\n" if chomp != "+" else text + "\n"


def _quoted(value: str) -> str | None:
    quote = value[0]
    end = value.find(quote, 1)
    if quote == "'":
        while end != -1 and value[end + 1 : end + 2] == "'":  # '' is a quote inside
            end = value.find("'", end + 2)
    else:
        while end != -1 and value[end - 1] == "\\" and value[end - 2 : end] != "\\\\":
            end = value.find('"', end + 1)
    if end == -1:
        return None
    inner = value[1:end]
    if quote == '"':
        return inner.replace('\\"', '"').replace("\\\\", "\\")
    return inner.replace("''", "'")


def _plain(value: str) -> str:
    if " #" in value:  # a trailing comment after a plain value
        value = value.split(" #", 1)[0].rstrip()
    return value
