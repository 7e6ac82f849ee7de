"""`fetch`: read a web page or text file over HTTP(S), as text the model can use.

HTML is turned into markdown-ish text (`agent.tools.html_text`), JSON is pretty-printed, other
text passes through; binary content is refused. The download is capped in time and size so a
huge or slow resource cannot stall the turn or fill memory.

Permission is remembered per host (`fetch:<host>`), so redirects are only followed within the
same site; a redirect elsewhere is reported for the model to fetch (and the user to allow).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
from pydantic import BaseModel, Field

from agent import __version__
from agent.tools.base import Preview, Safety, Tool, ToolContext, ToolError, ToolEvent, ToolResult

TIMEOUT = 30.0  # seconds for the whole download, redirects included
MAX_BYTES = 5 * 1024 * 1024  # of (decompressed) body read; the rest is not downloaded
MAX_CHARS = 100_000  # of text handed to the model
MAX_REDIRECTS = 10
SNIPPET_CHARS = 500  # of an error page shown with the failure
USER_AGENT = f"Heron/{__version__} (coding agent; +https://agentclientprotocol.com)"

_TEXT_TYPES = frozenset(
    (
        "application/xml", "application/javascript", "application/x-javascript",
        "application/ecmascript", "application/yaml", "application/x-yaml", "application/toml",
        "application/x-sh", "application/sql", "application/graphql", "application/x-ndjson",
        "application/markdown", "application/x-tex", "image/svg+xml",
    )
)  # fmt: skip
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)


class FetchArgs(BaseModel):
    url: str = Field(description="Absolute http:// or https:// URL.")


class Fetch(Tool[FetchArgs]):
    name = "fetch"
    description = (
        "Fetch a URL over HTTP(S) and return its content as text: HTML pages are converted to "
        "markdown-like text, JSON is pretty-printed, other text is returned as is. Binary files "
        "are refused. Redirects to another host are not followed: fetch the new URL instead."
    )
    kind = "fetch"
    Args = FetchArgs
    default_safety = Safety.NETWORK

    def permission_keys(self, args: FetchArgs) -> list[str]:
        """`fetch:https://docs.example.com:443`: "always" is per scheme, host and port (a
        plain-http or another-port service on the same host is another thing to approve)."""
        origin = _origin(args.url)
        return [f"fetch:{origin}"] if origin else []

    def refusal(self, args: FetchArgs) -> str | None:
        return _url_problem(args.url.strip())

    async def describe(self, args: FetchArgs, ctx: ToolContext) -> Preview:
        url = " ".join(args.url.split())
        return Preview(title=f"Fetch {url if len(url) <= 100 else url[:99] + '…'}")

    async def execute(
        self, args: FetchArgs, ctx: ToolContext, preview: Preview
    ) -> AsyncGenerator[ToolEvent, None]:
        url = args.url.strip()
        problem = _url_problem(url)
        if problem:
            yield ToolResult.failure(problem)
            return
        page = await _download(url)
        limit = min(MAX_CHARS, ctx.output_chars)
        yield page.result(requested=url, limit=max(1000, limit - 300))


# ---------------------------------------------------------------------------------------------
# Downloading


@dataclass
class _Page:
    url: str  # after redirects
    status: int
    reason: str
    media_type: str  # e.g. "text/html", lowercase, without parameters
    charset: str | None
    body: bytes
    cut: bool  # the body was longer than MAX_BYTES

    def result(self, requested: str, limit: int) -> ToolResult:
        kind = _text_kind(self.media_type, self.body)
        if not 200 <= self.status < 300:
            reason = f"HTTP {self.status} {self.reason} from {self.url}".rstrip()
            if kind:
                snippet = " ".join(self._text(kind)[1].split())[:SNIPPET_CHARS]
                reason += f"\n\n{snippet}" if snippet else ""
            failed = ToolResult.failure(reason)
            failed.raw_output = {"url": self.url, "status": self.status}
            return failed
        if kind is None:
            what = self.media_type or "unknown type"
            return ToolResult.failure(
                f"{self.url} is binary content ({what}, {len(self.body):,} bytes); "
                "fetch only reads text"
            )
        title, text = self._text(kind)
        header = []
        if self.url != requested:
            header.append(f"Redirected to {self.url}")
        if title:
            header.append(f"Title: {title}")
        notes = []
        if self.cut:
            notes.append(f"[stopped reading after {MAX_BYTES // (1024 * 1024)} MB]")
        if len(text) > limit:
            notes.append(f"[truncated: showing the first {limit:,} of {len(text):,} characters]")
            text = text[:limit]
        output = "\n\n".join(part for part in ("\n".join(header), text, "\n".join(notes)) if part)
        raw = {
            "url": self.url,
            "status": self.status,
            "contentType": self.media_type,
            "bytes": len(self.body),
            "truncated": bool(notes),
        }
        return ToolResult(ok=True, output=output or "(empty response)", raw_output=raw)

    def _text(self, kind: str) -> tuple[str, str]:
        """(title, text) of a textual body."""
        text = self.body.decode(self._encoding(kind), errors="replace")
        if kind == "html":
            from agent.tools.html_text import html_to_text

            return html_to_text(text, self.url)
        if kind == "json":
            try:
                return "", json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                pass  # cut short or not really JSON: show it as it is
        return "", text

    def _encoding(self, kind: str) -> str:
        candidates = [self.charset]
        if kind == "html":
            found = _META_CHARSET.search(self.body[:4096])
            candidates.append(found.group(1).decode("ascii", "replace") if found else None)
        for name in candidates:
            if name:
                try:
                    return codecs.lookup(name).name
                except LookupError:
                    continue
        return "utf-8"


async def _download(url: str) -> _Page:
    import httpx2  # lazily: start-up stays lean for sessions that never fetch

    headers = {
        "User-Agent": USER_AGENT,
        "Accept": "text/html,application/xhtml+xml,application/json,text/plain;q=0.9,*/*;q=0.5",
    }
    try:
        with anyio.fail_after(TIMEOUT):
            async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as client:
                for _ in range(MAX_REDIRECTS + 1):
                    async with client.stream("GET", url) as response:
                        if response.has_redirect_location:
                            target = str(response.url.join(response.headers["location"]))
                            _check_redirect(url, target)
                            url = target
                            continue
                        body, cut = await _read_capped(response)
                        media_type, _, _ = response.headers.get("content-type", "").partition(";")
                        return _Page(
                            url=str(response.url),
                            status=response.status_code,
                            reason=response.reason_phrase,
                            media_type=media_type.strip().lower(),
                            charset=response.charset_encoding,
                            body=body,
                            cut=cut,
                        )
    except (TimeoutError, httpx2.TimeoutException) as exc:
        raise ToolError(f"timed out fetching {url} (limit {TIMEOUT:g} s)") from exc
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        raise ToolError(f"could not fetch {url}: {exc or type(exc).__name__}") from exc
    raise ToolError(f"more than {MAX_REDIRECTS} redirects, last to {url}")


async def _read_capped(response: Any) -> tuple[bytes, bool]:
    """At most MAX_BYTES of the body, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BYTES:
            return b"".join(chunks)[:MAX_BYTES], True
    return b"".join(chunks), False


def _check_redirect(source: str, target: str) -> None:
    problem = _url_problem(target)
    if problem:
        raise ToolError(f"{source} redirects to {target}, which cannot be fetched: {problem}")
    if _site(_host(source)) != _site(_host(target)):
        raise ToolError(
            f"{source} redirects to another host: {target}\nFetch that URL to follow it."
        )


# ---------------------------------------------------------------------------------------------
# URLs and content types


def _host(url: str) -> str | None:
    try:
        return urlsplit(url.strip()).hostname  # lowercased, without port and credentials
    except ValueError:
        return None


def _origin(url: str) -> str | None:
    """`scheme://host:port`, lowercased, with the default port made explicit."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    port = port or (443 if scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{scheme}://{host}:{port}"


def _site(host: str | None) -> str | None:
    """`www.example.com` and `example.com` are one site for following redirects."""
    return host.removeprefix("www.") if host else host


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"not a valid URL: {url} ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        if not parts.scheme and "." in url.split("/", 1)[0]:
            return f"not an absolute URL: {url} (did you mean https://{url}?)"
        scheme = f"{parts.scheme}:" if parts.scheme else "a relative URL"
        return f"only http:// and https:// URLs can be fetched, not {scheme} ({url})"
    if not parts.hostname:
        return f"the URL has no host: {url}"
    return None


def _text_kind(media_type: str, body: bytes) -> str | None:
    """ "html", "json" or "text" for content we can show, None for binary content."""
    if media_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if media_type == "application/json" or media_type.endswith("+json"):
        return "json"
    if media_type.startswith("text/") or media_type in _TEXT_TYPES or media_type.endswith("+xml"):
        return "text"
    if media_type in ("", "application/octet-stream"):
        return _sniff(body)  # servers often label text files this way
    return None


def _sniff(body: bytes) -> str | None:
    start = body[:8192]
    if b"\x00" in start:
        return None
    try:
        codecs.getincrementaldecoder("utf-8")().decode(start)  # strict; a cut char is fine
    except UnicodeDecodeError:
        return None
    head = start[:1024].lstrip().lower()
    return "html" if head.startswith((b"<!doctype html", b"<html")) else "text"
