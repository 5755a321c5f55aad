"""A scripted MCP agent for `leanrig run` tests: it starts the server exactly as its MCP config
says (command, args, env, cwd; official SDK stdio client) and then, by MODE:

- ``solve``: lists the tasks (written to ``tasks.json``), opens the task, sets a wrong body,
  then the reference proof, writes ``usage.json``, exits 0;
- ``wrong``: opens the task, sets a wrong body, exits 0;
- ``alternate``: ``solve`` in odd attempts, ``wrong`` in even ones (the attempt number is
  the name of the workspace's parent directory);
- ``linger``: sets the reference proof, starts a grandchild in a new session (its pid in
  ``grandchild.pid``; its command line ends with the workspace's path), then sleeps past any
  time limit with the server still open.

Usage: ``mcp_agent.py MODE`` (reads LEANRIG_MCP_CONFIG and LEANRIG_TASK).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcp import Client
from mcp.client.stdio import StdioServerParameters

PROOFS = Path(__file__).resolve().parents[1] / "demo_reference_proofs.json"
WRONG = "\n  leanrig_no_such_proof"


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool}: {result.content}")
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def grandchild(workspace: str) -> int:
    """A sleeper in a new session; its last argument (the workspace) marks it for the test
    (the pid the agent sees may be a PID namespace's, not the host's)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)", workspace],
        start_new_session=True,
    )
    return child.pid


async def main(mode: str) -> int:
    config = orjson.loads(await anyio.Path(os.environ["LEANRIG_MCP_CONFIG"]).read_bytes())
    server = config["mcpServers"]["leanrig"]
    task = os.environ["LEANRIG_TASK"]
    workspace = anyio.Path(os.environ["LEANRIG_WORKSPACE"])
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"], cwd=server["cwd"]
    )
    if mode == "alternate":
        mode = "solve" if int(workspace.parent.name.split("-")[0]) % 2 else "wrong"
    proof = "\n  " + orjson.loads(await anyio.Path(PROOFS).read_bytes())[task]
    async with Client(params) as client:
        if mode == "solve":
            listed = await call(client, "list_tasks")
            await (workspace / "tasks.json").write_bytes(orjson.dumps(listed))
        opened = await call(client, "open_task", task_id=task)
        sid = opened["session_id"]
        await call(client, "set_proof", session_id=sid, body=WRONG)
        if mode == "wrong":
            return 0
        await call(client, "set_proof", session_id=sid, body=proof)
        if mode == "solve":
            usage = {"input_tokens": 1000, "cached_input_tokens": 200, "output_tokens": 50}
            await (workspace / "usage.json").write_bytes(orjson.dumps(usage))
            return 0
        # linger: a grandchild in its own session, then outlive the time limit.
        pid = await anyio.to_thread.run_sync(grandchild, str(workspace))
        await (workspace / "grandchild.pid").write_text(str(pid))
        await anyio.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1]))
