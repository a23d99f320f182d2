"""An MCP client for the MCP router's tests (official Python SDK): calls every tool of
output_server.py directly, then through `WEFT mcp router PROJECT` (discover_tools, then
execute_tool), and prints both.

    python3 router_client.py WEFT PROJECT OUTPUT_SERVER

Prints one JSON object: {"meta_tools": [...], "discovered": {...}, "direct": {tool: text},
"routed": {tool: text}, "unknown": {"text", "isError"}}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def main(weft: str, project: str, server: str) -> None:
    direct = {}
    params = StdioServerParameters(command=sys.executable, args=[server])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for tool in ["report", "build_log"]:
                direct[tool] = text_of(await session.call_tool(tool, {}))
    routed = {}
    params = StdioServerParameters(command=weft, args=["mcp", "router", project])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            found = json.loads(text_of(await session.call_tool("discover_tools", {"query": "build log"})))
            for tool in ["report", "build_log"]:
                result = await session.call_tool("execute_tool", {"path": f"out/{tool}", "args": {}})
                routed[tool] = text_of(result)
            bad = await session.call_tool("execute_tool", {"path": "out/nope", "args": {}})
    print(json.dumps({
        "meta_tools": [t.name for t in listed.tools],
        "discovered": found,
        "direct": direct,
        "routed": routed,
        "unknown": {"text": text_of(bad), "isError": bool(bad.isError)},
    }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
