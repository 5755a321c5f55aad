"""The agent tools over MCP (official SDK, `MCPServer`): stdio or streamable HTTP.

Tool names, descriptions and parameters come from tools.py; expected failures become
`is_error` results carrying our own message and next step (never a raw exception text).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as MCPToolError
from pydantic import Field

from ..sessions import ProofService, ToolError
from .tools import TOOL_BY_NAME

Sid = Annotated[str, Field(description="the session_id returned by open_task")]


def build_mcp(service: ProofService, client: str = "mcp") -> MCPServer:
    server: MCPServer = MCPServer(
        "leanrig",
        log_level="WARNING",
        instructions=(
            "Prove Lean theorems by editing only the proof body. open_task, then set_proof / "
            "replace_in_proof and read diagnostics and goals; check_proof gives the final verdict."
        ),
    )

    async def guarded(call: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await call
        except ToolError as exc:
            # The stable code leads the text, so programs can branch on it: "[rejected] ...".
            text = f"[{exc.code}] {exc.message}" + (f". Next: {exc.hint}" if exc.hint else "")
            raise MCPToolError(text) from exc

    def add(fn: Callable[..., Awaitable[dict[str, Any]]]) -> None:
        spec = TOOL_BY_NAME[fn.__name__]
        server.add_tool(fn, name=spec.name, description=spec.description)

    async def list_tasks() -> dict[str, Any]:
        return await guarded(service.list_tasks())

    async def open_task(
        task_id: Annotated[str, Field(description="a task id from list_tasks")],
    ) -> dict[str, Any]:
        return await guarded(service.open_task(task_id, client))

    async def set_proof(
        session_id: Sid, body: Annotated[str, Field(description="the new proof body")]
    ) -> dict[str, Any]:
        return await guarded(service.set_proof(session_id, body, client))

    async def replace_in_proof(
        session_id: Sid,
        old: Annotated[str, Field(description="text occurring exactly once in the proof body")],
        new: Annotated[str, Field(description="its replacement")],
    ) -> dict[str, Any]:
        return await guarded(service.replace_in_proof(session_id, old, new, client))

    async def get_goals(
        session_id: Sid,
        line: Annotated[int, Field(description="1-based line")],
        column: Annotated[int, Field(description="1-based Unicode code point column")],
    ) -> dict[str, Any]:
        return await guarded(service.get_goals(session_id, line, column, client))

    async def get_proof_state(session_id: Sid) -> dict[str, Any]:
        return await guarded(service.get_proof_state(session_id, client))

    async def try_proofs(
        session_id: Sid,
        bodies: Annotated[list[str], Field(description="candidate proof bodies (1 to 16)")],
    ) -> dict[str, Any]:
        return await guarded(service.try_proofs(session_id, bodies, client))

    async def check_proof(session_id: Sid) -> dict[str, Any]:
        return await guarded(service.check_proof(session_id, client))

    async def get_timings(session_id: Sid) -> dict[str, Any]:
        return await guarded(service.get_timings(session_id, client))

    async def close_session(session_id: Sid) -> dict[str, Any]:
        return await guarded(service.close_session(session_id, client))

    async def server_status() -> dict[str, Any]:
        return await guarded(service.server_status())

    for fn in (list_tasks, open_task, set_proof, replace_in_proof, get_goals, get_proof_state,
               try_proofs, check_proof, get_timings, close_session, server_status):  # fmt: skip
        add(fn)
    return server
