"""An MCP client for Weft's tests, written with the official Python SDK: starts
`WEFT mcp serve PROJECT` over stdio, lists its tools and calls AGENT with INPUT.

    python3 agent_client.py WEFT PROJECT AGENT INPUT

Prints one JSON object: {"tools": [{"name", "description", "inputSchema"}], "text": ..., "isError": ...}.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(weft: str, project: str, agent: str, text: str) -> None:
    params = StdioServerParameters(command=weft, args=["mcp", "serve", project])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool(agent, {"input": text})
            texts = [block.text for block in result.content if block.type == "text"]
            print(json.dumps({
                "tools": [
                    {"name": t.name, "description": t.description, "inputSchema": t.inputSchema}
                    for t in listed.tools
                ],
                "text": "\n".join(texts),
                "isError": bool(result.isError),
            }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
