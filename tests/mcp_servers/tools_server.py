"""A small MCP server for Heron's tests, written with the official SDK (MCPServer, formerly
FastMCP). Run: `python tools_server.py [stdio | streamable-http PORT | sse PORT]`.

Environment: MARKER_DIR (a directory where the server notes its pid and its cancelled calls),
CRASH_ON_START=1 (write to stderr, exit before the handshake), SPAWN_CHILD=SECONDS (start a
`sleep SECONDS` child that outlives the server unless its process group is cleared),
EXTRA_TOOL=NAME (one more tool that changes the world, named NAME; any characters),
LONG_DESCRIPTION=CHARS (a tool `verbose` whose description and input schema are that long),
ENV_DUMP=1 (a tool `environment` that returns the server's environment, one VAR=value a line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations

MARKERS = Path(os.environ.get("MARKER_DIR", "."))

if os.environ.get("CRASH_ON_START"):
    print("fatal: the database is locked", file=sys.stderr, flush=True)
    sys.exit(3)

server = MCPServer("tools")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def write_note(note: str) -> str:
    """Store a note (changes the world: asks permission)."""
    with open(MARKERS / "notes.txt", "a") as f:
        f.write(note + "\n")
    return "stored"


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\nfake", format="png")


@server.tool()
def refuse(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(f"cannot do that: {reason}")


@server.tool()
async def hang() -> str:
    """Never answers (until cancelled)."""
    try:
        await anyio.sleep(3600)
    finally:
        (MARKERS / "hang-cancelled").write_text("yes")
    return "never"


@server.tool()
def crash() -> str:
    """Dies in the middle of the call."""
    print("about to crash: segfault simulated", file=sys.stderr, flush=True)
    os._exit(9)


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `fresh` and says so with tools/list_changed."""
    server.add_tool(lambda: "fresh result", name="fresh", description="A tool added later.")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.prompt(description="Review code for one kind of problem")
def review(code: str, focus: str = "bugs") -> str:
    return f"Review this code, looking for {focus}:\n{code}"


@server.prompt()
def broken() -> str:
    """Always fails."""
    raise ValueError("the prompt template is missing")


@server.tool()
async def add_prompt(ctx: Context) -> str:
    """Adds the prompt `later` and says so with prompts/list_changed."""
    server.add_prompt(
        Prompt.from_function(lambda: "Later prompt.", name="later", description="Added later")
    )
    await ctx.session.send_prompt_list_changed()
    return "added"


if extra := os.environ.get("EXTRA_TOOL"):
    server.add_tool(lambda: f"ran {extra}", name=extra, description=f"The tool named {extra}.")

if chars := int(os.environ.get("LONG_DESCRIPTION", "0")):

    @server.tool(description="A wordy tool. " + "blah " * (chars // 5))
    def verbose(text: str = "") -> str:
        return "said"

    server._tool_manager._tools["verbose"].parameters = {  # type: ignore[attr-defined]
        "type": "object",
        "properties": {
            f"p{i}": {"type": "string", "description": "x" * 100} for i in range(chars // 120)
        },
    }

if os.environ.get("ENV_DUMP"):

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def environment() -> str:
        """The server's environment."""
        return "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def flood(megabytes: float) -> str:
    """A text result of that many megabytes."""
    return "x" * int(megabytes * 1_000_000)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def big_picture(megabytes: float) -> Image:
    """A PNG of that many megabytes."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + b"\0" * int(megabytes * 1_000_000), format="png")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def shout(megabytes: float) -> str:
    """Writes that many megabytes to stderr, without a newline, then answers."""
    chunk = "y" * 1_000_000
    for _ in range(int(megabytes)):
        sys.stderr.write(chunk)
    sys.stderr.flush()
    return "shouted"


def main() -> None:
    (MARKERS / f"pid-{os.getpid()}").write_text(str(os.getpid()))
    if seconds := os.environ.get("SPAWN_CHILD"):
        # A helper process in the server's group that does not watch our stdin.
        subprocess.Popen(
            ["sleep", seconds],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run()
    else:
        server.run(transport, host="127.0.0.1", port=int(sys.argv[2]))  # type: ignore[call-overload]


if __name__ == "__main__":
    main()
