"""A small MCP server for Weft's tests, written with the official Python SDK (FastMCP).

    python3 demo_server.py stdio
    python3 demo_server.py http PORT

Tools:
  echo(text)        -> the text (no annotations: side-effecting to Weft)
  read_note()       -> "the note" (annotated readOnlyHint)
  add_tool(name)    -> registers a tool NAME (returning "added NAME") and sends
                       notifications/tools/list_changed
  crash()           -> appends "crash" to crash.log in its working folder, then the process exits
                       mid-call, without answering
  read_file(path)   -> the file's text, or an error result
  header(name)      -> the HTTP request's header NAME (streamable HTTP only)
  slow(seconds)     -> sleeps, then "done"; a cancelled call appends "cancelled" to slow.log
  pid()             -> the server's process id
"""

import asyncio
import os
import sys

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations

mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000

server = FastMCP("demo", host="127.0.0.1", port=port, log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note() -> str:
    """Reads the note (read-only)."""
    return "the note"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool NAME to this server."""

    def added() -> str:
        return f"added {name}"

    server.add_tool(added, name=name, description=f"A tool added at run time ({name}).")
    await ctx.session.send_tool_list_changed()
    return f"tool {name} added"


@server.tool()
def crash() -> str:
    """Stops the server in the middle of the call."""
    with open("crash.log", "a") as log:
        log.write("crash\n")
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def read_file(path: str) -> str:
    """Reads a file."""
    with open(path) as f:
        return f.read()


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The HTTP request's header NAME."""
    request = ctx.request_context.request
    if request is None:
        return ""
    return request.headers.get(name, "")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        with open("slow.log", "a") as log:
            log.write("cancelled\n")
        raise
    return "done"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


if __name__ == "__main__":
    server.run("streamable-http" if mode == "http" else "stdio")
