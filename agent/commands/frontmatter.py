"""The front matter of a command file: a `---` line, `key: value` lines, a `---` line.

Only the subset command files need (a minimal YAML, no dependency): one `key: value` per line,
the value plain or in matching single or double quotes; comments (`#`) and anything else are
skipped. A file without a closed front matter is all body.
"""

from __future__ import annotations

FENCE = "---"
MAX_FRONT_MATTER_LINES = 50  # a "front matter" longer than this is not one


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(the front matter's keys, lower-cased → values; the body)."""
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FENCE:
        return {}, text
    for end in range(1, min(len(lines), MAX_FRONT_MATTER_LINES + 1)):
        if lines[end].rstrip() in (FENCE, "..."):
            return _parse(lines[1:end]), "\n".join(lines[end + 1 :])
    return {}, text  # never closed: not front matter


def _parse(lines: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        values[key.strip().lower()] = _unquote(value.strip())
    return values


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] == '"':
            return inner.replace('\\"', '"').replace("\\\\", "\\")
        return inner.replace("''", "'")
    if " #" in value:  # a trailing comment after a plain value
        value = value.split(" #", 1)[0].rstrip()
    return value
