"""An MCP server whose tools return bulky output, for the MCP router's tests (official
Python SDK, FastMCP, stdio).

Tools:
  report()      -> a pretty-printed JSON document (indent 4)
  build_log()   -> a coloured build log with progress rewrites, trailing blanks,
                   blank-line runs and a line repeated 40 times
"""

import json

from mcp.server.fastmcp import FastMCP

server = FastMCP("output", log_level="WARNING")


@server.tool()
def report() -> str:
    """Returns the quarterly report as JSON."""
    doc = {
        "quarter": "Q3",
        "regions": [
            {"name": f"region {i}", "revenue": i * 1000.5, "notes": "  spaced  text  ",
             "tags": ["alpha", "beta"], "ok": i % 2 == 0, "owner": None}
            for i in range(25)
        ],
    }
    return json.dumps(doc, indent=4)


@server.tool()
def build_log() -> str:
    """Returns the log of the last build."""
    lines = ["\x1b[1m\x1b[32m   Compiling\x1b[0m weft v0.1.0   "]
    lines.append("downloading  10%\r downloading  50%\r downloading 100%")
    lines += ["warning: unused variable `x` in src/lib.rs:10"] * 40
    lines += ["", "", "", "", "\x1b[31merror[E0308]\x1b[0m: mismatched types at src/main.rs:3", "    indented context stays"]
    return "\n".join(lines) + "\n\n"


if __name__ == "__main__":
    server.run("stdio")
