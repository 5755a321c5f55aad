"""A model-free MCP agent for the LAD runner test: it starts the server exactly as its MCP
config says, writes the tool names it was offered to ``tools.json`` in its workspace, and —
when ``search_library`` is among them — searches for the task's title, reads the first hit
with ``read_library`` and sets the hit's proof (the text after its ``:=``) as the body. In a
baseline attempt it opens the task and gives up.

Usage: ``library_agent.py`` (reads LEANRIG_MCP_CONFIG, LEANRIG_TASK, LEANRIG_WORKSPACE).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import orjson
from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool}: {result.content}")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def main() -> int:
    config = orjson.loads(await anyio.Path(os.environ["LEANRIG_MCP_CONFIG"]).read_bytes())
    server = config["mcpServers"]["leanrig"]
    task = os.environ["LEANRIG_TASK"]
    workspace = anyio.Path(os.environ["LEANRIG_WORKSPACE"])
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"], cwd=server["cwd"]
    )
    async with Client(params) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        await (workspace / "tools.json").write_bytes(orjson.dumps(tools))
        title = next(t["title"] for t in (await call(client, "list_tasks"))["tasks"])
        sid = (await call(client, "open_task", task_id=task))["session_id"]
        if "search_library" not in tools:
            return 0
        hits = (await call(client, "search_library", query=title, limit=3))["results"]
        source = (await call(client, "read_library", name=hits[0]["name"]))["source"]
        await call(client, "set_proof", session_id=sid, body=source.split(":=", 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
