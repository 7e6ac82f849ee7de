"""The `fetch` tool against a local HTTP server, and the HTML-to-text conversion."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.tools import web
from agent.tools.base import Safety, ToolContext, ToolError, ToolResult
from agent.tools.html_text import html_to_text
from agent.tools.web import Fetch

PAGE = """<!doctype html>
<html><head><title>Test  Page</title><style>p { color: red }</style>
<script>document.write("<p>scripted</p>")</script></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<h1>Main heading</h1>
<p>Read the <a href="/docs/guide.html">guide</a> or
   <a href="https://other.example/x">elsewhere</a>.</p>
<h2>Steps</h2>
<ul><li>first</li><li>second</li></ul>
<pre><code>x  =  1
print(x)</code></pre>
</body></html>"""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def send(self, status: int, ctype: str | None, body: bytes, **headers: str) -> None:
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        path = self.path
        if path == "/page.html":
            self.send(200, "text/html; charset=utf-8", PAGE.encode())
        elif path == "/data.json":
            self.send(200, "application/json", b'{"name":"heron","tags":["a","b"],"n":1}')
        elif path == "/plain.txt":
            self.send(200, "text/plain", "plain text ✓\n".encode())
        elif path == "/latin1.html":
            self.send(200, "text/html; charset=iso-8859-1", "<p>café</p>".encode("latin-1"))
        elif path == "/octet":
            self.send(200, "application/octet-stream", b"just text really\n")
        elif path == "/image.png":
            self.send(200, "image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100))
        elif path == "/missing":
            body = b"<html><body><h1>Nope</h1><p>No such page here.</p></body></html>"
            self.send(404, "text/html", body)
        elif path == "/redirect":
            self.send(302, None, b"", Location="/page.html")
        elif path == "/elsewhere":
            self.send(302, None, b"", Location=f"http://localhost:{port}/page.html")
        elif path == "/loop":
            self.send(302, None, b"", Location="/loop")
        elif path == "/big":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            line = b"x" * 1023 + b"\n"
            try:
                for _ in range(8 * 1024):  # 8 MiB, more than the cap
                    self.wfile.write(line)
            except OSError:
                pass  # the client stopped reading: expected
        elif path == "/slow":
            time.sleep(2)
            self.send(200, "text/plain", b"late")
        else:
            self.send(404, "text/plain", b"unknown")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _no_client(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"unexpected client request {method}")


def make_ctx() -> ToolContext:
    return ToolContext(
        cwd=Path("/"),
        session_id="sess-1",
        files=None,  # type: ignore[arg-type]
        client_request=_no_client,
        client_terminal=False,
    )


async def fetch(url: str) -> ToolResult:
    tool = Fetch()
    args = tool.parse_args({"url": url})
    ctx = make_ctx()
    events = [event async for event in tool.execute(args, ctx, await tool.describe(args, ctx))]
    assert len(events) == 1 and isinstance(events[0], ToolResult)
    return events[0]


@pytest.mark.anyio
async def test_html_page_becomes_text(server: str) -> None:
    result = await fetch(f"{server}/page.html")
    assert result.ok, result.output
    out = result.output
    assert out.startswith("Title: Test Page\n\n# Main heading\n\n")
    assert f"[guide]({server}/docs/guide.html)" in out
    assert "[elsewhere](https://other.example/x)" in out
    assert "## Steps\n\n- first\n- second" in out
    assert "```\nx  =  1\nprint(x)\n```" in out
    for dropped in ("Home", "About", "scripted", "color: red"):
        assert dropped not in out
    assert result.raw_output["status"] == 200
    assert result.raw_output["contentType"] == "text/html"


@pytest.mark.anyio
async def test_json_is_pretty_printed(server: str) -> None:
    result = await fetch(f"{server}/data.json")
    assert result.ok
    assert result.output == json.dumps({"name": "heron", "tags": ["a", "b"], "n": 1}, indent=2)


@pytest.mark.anyio
async def test_plain_text_charsets_and_sniffing(server: str) -> None:
    assert (await fetch(f"{server}/plain.txt")).output == "plain text ✓\n"
    assert (await fetch(f"{server}/latin1.html")).output == "café"
    assert (await fetch(f"{server}/octet")).output == "just text really\n"


@pytest.mark.anyio
async def test_binary_is_refused(server: str) -> None:
    result = await fetch(f"{server}/image.png")
    assert not result.ok
    assert "binary content (image/png" in result.output


@pytest.mark.anyio
async def test_http_error_is_a_failure_with_snippet(server: str) -> None:
    result = await fetch(f"{server}/missing")
    assert not result.ok
    assert result.output.startswith(f"HTTP 404 Not Found from {server}/missing\n\n")
    assert "No such page here." in result.output


@pytest.mark.anyio
async def test_redirects_within_the_host_are_followed(server: str) -> None:
    result = await fetch(f"{server}/redirect")
    assert result.ok
    assert result.output.startswith(f"Redirected to {server}/page.html\nTitle: Test Page")


@pytest.mark.anyio
async def test_redirects_to_another_host_are_not(server: str) -> None:
    with pytest.raises(ToolError, match="redirects to another host: http://localhost:"):
        await fetch(f"{server}/elsewhere")
    with pytest.raises(ToolError, match="more than 10 redirects"):
        await fetch(f"{server}/loop")


@pytest.mark.anyio
async def test_size_cap(server: str) -> None:
    result = await fetch(f"{server}/big")
    assert result.ok
    assert result.raw_output["bytes"] == web.MAX_BYTES
    assert result.raw_output["truncated"] is True
    assert "[stopped reading after 5 MB]" in result.output
    assert "[truncated: showing the first" in result.output
    assert len(result.output) < web.MAX_CHARS + 500


@pytest.mark.anyio
async def test_timeout(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(web, "TIMEOUT", 0.3)
    with pytest.raises(ToolError, match="timed out"):
        await fetch(f"{server}/slow")


@pytest.mark.anyio
async def test_connection_refused() -> None:
    with pytest.raises(ToolError, match="could not fetch"):
        await fetch("http://127.0.0.1:1/")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "only http:// and https:// URLs can be fetched, not file:"),
        ("ftp://example.com/x", "not ftp:"),
        ("example.com/docs", "did you mean https://example.com/docs?"),
        ("/just/a/path", "not a relative URL"),
        ("http:///nohost", "has no host"),
    ],
)
async def test_bad_urls_are_refused(url: str, reason: str) -> None:
    result = await fetch(url)
    assert not result.ok
    assert reason in result.output


@pytest.mark.anyio
async def test_describe_and_policy_inputs() -> None:
    tool = Fetch()
    args = tool.parse_args({"url": "https://Docs.Example.com:8443/a?b=c"})
    assert (await tool.describe(args, make_ctx())).title == (
        "Fetch https://Docs.Example.com:8443/a?b=c"
    )
    # "always" is per scheme, host and port
    assert tool.permission_keys(args) == ["fetch:https://docs.example.com:8443"]
    other = tool.parse_args({"url": "https://example.org/"})
    assert tool.permission_keys(other) == ["fetch:https://example.org:443"]
    plain = tool.parse_args({"url": "HTTP://Example.org/x"})
    assert tool.permission_keys(plain) == ["fetch:http://example.org:80"]
    assert tool.refusal(args) is None
    assert "only http:// and https://" in (
        tool.refusal(tool.parse_args({"url": "file:///x"})) or ""
    )
    assert tool.safety(args) is Safety.NETWORK
    assert tool.kind == "fetch"


def test_html_to_text_details() -> None:
    html = """<html><head><base href="https://e.com/base/"></head><body>
    <ol><li>one<ul><li>inner</li></ul></li><li>two</li></ol>
    <div hidden>secret</div><span aria-hidden="true">icon</span>
    <p>Use <code>pip install</code>&nbsp;now.<br>Next&amp;line</p>
    <table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>
    <a href="rel/page">relative</a> <a href="#top">top</a> <a href="javascript:x()">js</a>
    <img src="cat.png" alt="A cat"><svg><text>drawn</text></svg>
    <pre class="x"><code class="language-python">if a:
    b()</code></pre><p>after</p></body></html>"""
    title, text = html_to_text(html, "https://ignored.example/")
    assert title == ""
    assert text == (
        "1. one\n"
        "  - inner\n"
        "2. two\n\n"
        "Use `pip install` now.\n"
        "Next&line\n\n"
        "a | b\n"
        "1 | 2\n\n"
        "[relative](https://e.com/base/rel/page) top js ![A cat](https://e.com/base/cat.png)\n\n"
        "```python\n"
        "if a:\n"
        "    b()\n"
        "```\n\n"
        "after"
    )
