"""HTML to readable, markdown-ish text, with the standard library only.

The model reads pages, not markup: headings become `#`, links `[text](absolute url)`, lists
`- `/`1. `, preformatted blocks stay fenced and untouched, and scripts, styles, navigation
and hidden elements are dropped. Whitespace is collapsed the way a browser would.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

# Dropped with everything inside: never readable content.
_SKIP = frozenset(
    ("script", "style", "noscript", "svg", "nav", "template", "iframe", "object", "canvas")
)
_VOID = frozenset(
    ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr")
)
_BLOCK = frozenset(
    (
        "p", "div", "section", "article", "main", "header", "footer", "aside", "figure",
        "figcaption", "form", "fieldset", "table", "thead", "tbody", "tfoot", "blockquote",
        "dl", "address", "details", "summary", "center", "body",
    )
)  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}

# Placeholders that survive whitespace clean-up: list indentation and preformatted blocks.
_INDENT = "\x01"
_PRE = "\x02{}\x02"
_PRE_TOKEN = re.compile("\x02(\\d+)\x02")


def html_to_text(html: str, base_url: str = "") -> tuple[str, str]:
    """The page's title and its readable text; relative links are resolved against base_url."""
    parser = _Converter(base_url)
    parser.feed(html)
    parser.close()
    return parser.title(), parser.text()


class _Converter(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self._base = base_url
        self._out: list[str] = []
        self._title: list[str] = []
        self._in_title = False
        self._skip: tuple[str, int] | None = None  # (tag, nesting) of the element being dropped
        self._lists: list[list[int]] = []  # per open list: [ordered, items so far]
        self._links: list[tuple[int, str | None]] = []  # (where its text starts, href)
        self._cells = 0
        self._pre: list[str] | None = None  # text of the open <pre>
        self._pre_lang = ""
        self._pres: list[str] = []

    # -- output ----------------------------------------------------------------------------

    def title(self) -> str:
        return " ".join("".join(self._title).split())

    def text(self) -> str:
        text = "".join(self._out)
        text = re.sub(r"[ \t\r\f\v]+", " ", text)
        text = re.sub(r" *\n *", "\n", text)
        text = re.sub(r"\n{3,}", "\n\n", text).strip()
        text = text.replace(_INDENT, "  ")
        return _PRE_TOKEN.sub(lambda m: self._pres[int(m.group(1))], text)

    def _emit(self, text: str) -> None:
        self._out.append(text)

    def _line(self) -> None:
        self._break(1)

    def _block(self) -> None:
        self._break(2)

    def _break(self, newlines: int) -> None:
        """End the current line (1) or paragraph (2), unless that was already done."""
        have = 0
        for piece in reversed(self._out):
            piece = piece.rstrip(" ")
            if piece:
                body = piece.rstrip("\n")
                have += len(piece) - len(body)
                if body:
                    break
        self._out.append("\n" * max(0, newlines - have))

    def _url(self, href: str | None) -> str | None:
        if not href or href.startswith(("#", "javascript:")):
            return None  # in-page anchors and scripts are no use to a reader
        return urljoin(self._base, href.strip())

    # -- parser callbacks ------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        if self._skip:
            if tag == self._skip[0] and tag not in _VOID:
                self._skip = (tag, self._skip[1] + 1)
            return
        hidden = "hidden" in attr or attr.get("aria-hidden") == "true"
        if (tag in _SKIP or hidden) and tag not in _VOID:
            self._skip = (tag, 1)
            return
        if self._pre is not None:
            if tag == "code" and not self._pre_lang:
                match = re.search(r"(?:language|lang)-([\w+#-]+)", attr.get("class", ""))
                self._pre_lang = match.group(1) if match else ""
            elif tag == "br":
                self._pre.append("\n")
            return  # markup inside <pre> is highlighting: keep the text only
        if tag == "title":
            self._in_title = True
        elif tag == "base" and attr.get("href"):
            self._base = urljoin(self._base, attr["href"])
        elif tag in _HEADINGS:
            self._block()
            self._emit("#" * _HEADINGS[tag] + " ")
        elif tag in ("ul", "ol"):
            self._line()
            self._lists.append([tag == "ol", 0])
        elif tag == "li":
            self._line()
            depth = max(0, len(self._lists) - 1)
            marker = "- "
            if self._lists and self._lists[-1][0]:
                self._lists[-1][1] += 1
                marker = f"{self._lists[-1][1]}. "
            self._emit(_INDENT * depth + marker)
        elif tag == "pre":
            self._block()
            self._pre, self._pre_lang = [], ""
        elif tag == "code":
            self._emit("`")
        elif tag == "a":
            self._links.append((len(self._out), self._url(attr.get("href"))))
        elif tag == "img" and attr.get("alt", "").strip():
            self._emit(f"![{attr['alt'].strip()}]({self._url(attr.get('src')) or ''})")
        elif tag == "br":
            self._line()
        elif tag == "hr":
            self._block()
            self._emit("---")
            self._block()
        elif tag == "tr":
            self._line()
            self._cells = 0
        elif tag in ("td", "th"):
            if self._cells:
                self._emit(" | ")
            self._cells += 1
        elif tag in ("dt", "dd"):
            self._line()
        elif tag in _BLOCK:
            self._block()

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag == self._skip[0]:
                depth = self._skip[1] - 1
                self._skip = (tag, depth) if depth else None
            return
        if self._pre is not None:
            if tag == "pre":
                self._close_pre()
            return
        if tag == "title":
            self._in_title = False
        elif tag in _HEADINGS:
            self._block()
        elif tag in ("ul", "ol"):
            if self._lists:
                self._lists.pop()
            if self._lists:
                self._line()  # a nested list ends inside its parent's item
            else:
                self._block()
        elif tag == "li":
            self._line()
        elif tag == "code":
            self._emit("`")
        elif tag == "a" and self._links:
            self._close_link()
        elif tag in ("tr", "dt", "dd"):
            self._line()
        elif tag in _BLOCK:
            self._block()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self._title.append(data)
        elif self._pre is not None:
            self._pre.append(data)
        else:
            self._emit(re.sub(r"\s+", " ", data))

    def close(self) -> None:
        super().close()
        if self._pre is not None:
            self._close_pre()
        while self._links:
            self._close_link()

    # -- helpers ---------------------------------------------------------------------------

    def _close_link(self) -> None:
        start, href = self._links.pop()
        start = min(start, len(self._out))
        label = " ".join("".join(self._out[start:]).split())
        del self._out[start:]
        if label:
            self._emit(f"[{label}]({href})" if href and href != label else label)

    def _close_pre(self) -> None:
        body = "".join(self._pre or []).strip("\n")
        self._pre = None
        longest = max((len(run) for run in re.findall(r"`{3,}", body)), default=0)
        fence = "`" * max(3, longest + 1)
        self._pres.append(f"{fence}{self._pre_lang}\n{body}\n{fence}")
        self._emit(_PRE.format(len(self._pres) - 1))
        self._block()
