"""What the shipped agents share: the MCP config, a connection to its server, ``usage.json``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import orjson
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lsp_bridge import LeanrigError, error_leaves, first_line

from ..runs import SERVER_NAME, USAGE_FILE

CONFIG_VAR: Final = "LEANRIG_MCP_CONFIG"
CONNECT_TIMEOUT: Final = 120.0  # the server's start on a loaded machine
CALL_TIMEOUT: Final = 120.0


class AgentError(LeanrigError):
    hint = "run the agent under `leanrig run` (it passes {mcp_config}), or give --mcp-config"


class ToolCallError(LeanrigError):
    """A tool answered with an error (``[code] message. Next: hint``)."""

    def __init__(self, tool: str, text: str) -> None:
        super().__init__(f"{tool}: {text}", hint="")
        self.tool = tool
        self.text = text


@dataclass(frozen=True, slots=True)
class ServerConfig:
    command: str
    args: list[str]
    env: dict[str, str] | None
    cwd: str | None


def load_config(path: str | None, environ: Mapping[str, str] = os.environ) -> ServerConfig:
    """The server of an MCP config file (``mcpServers.leanrig``, or its only server)."""
    where = path or environ.get(CONFIG_VAR)
    if not where:
        raise AgentError(f"no MCP config: pass --mcp-config FILE or set {CONFIG_VAR}")
    try:
        config = orjson.loads(Path(where).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise AgentError(f"cannot read the MCP config {where}: {exc}") from None
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise AgentError(f"{where} has no mcpServers")
    only = next(iter(servers.values())) if len(servers) == 1 else None
    server = servers.get(SERVER_NAME) or only
    if not isinstance(server, dict) or not isinstance(server.get("command"), str):
        raise AgentError(f"{where}: no server {SERVER_NAME!r} with a command")
    env = server.get("env")
    return ServerConfig(
        command=server["command"],
        args=[str(a) for a in server.get("args", [])],
        env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None,
        cwd=str(server["cwd"]) if server.get("cwd") else None,
    )


class AgentClient:
    """Tool calls over one MCP connection."""

    def __init__(self, client: Any, tools: list[str], call_timeout: float) -> None:
        self.client = client
        self.tools = tools
        self.call_timeout = call_timeout

    async def call_raw(self, tool: str, args: Mapping[str, Any]) -> tuple[bool, Any]:
        """(is_error, structured result or the error text)."""
        with anyio.fail_after(self.call_timeout):
            result = await self.client.call_tool(tool, dict(args))
        if result.is_error:
            return True, " ".join(getattr(c, "text", "") for c in result.content)
        return False, result.structured_content

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        failed, value = await self.call_raw(tool, args)
        if failed:
            raise ToolCallError(tool, str(value))
        if not isinstance(value, dict):
            raise ToolCallError(tool, f"no structured result: {value!r}")
        return value


@asynccontextmanager
async def connect(
    config: ServerConfig, *, call_timeout: float = CALL_TIMEOUT
) -> AsyncIterator[AgentClient]:
    params = StdioServerParameters(
        command=config.command, args=config.args, env=config.env, cwd=config.cwd
    )
    connected = False
    try:
        async with Client(params) as client:
            with anyio.fail_after(CONNECT_TIMEOUT):
                listed = await client.list_tools()
            connected = True
            yield AgentClient(client, [t.name for t in listed.tools], call_timeout)
    except Exception as exc:
        if connected:
            raise
        # The SDK only says "Connection closed": name the server.
        command = " ".join([config.command, *config.args])
        said = first_line([*error_leaves(exc), exc][0])
        raise AgentError(
            f"the MCP server did not start ({command[:300]}): {said}",
            hint="its own error is on stderr above; check the MCP config's command and paths",
        ) from exc


def task_id(explicit: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    return explicit or environ.get("LEANRIG_TASK") or None


def write_usage(directory: Path, usage: Mapping[str, Any]) -> Path:
    """Write ``usage.json`` in the agent's workspace (``leanrig run`` reads it)."""
    path = directory / USAGE_FILE
    path.write_bytes(orjson.dumps(dict(usage)))
    return path


def workspace_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where usage.json and transcripts go: ``LEANRIG_WORKSPACE``, else the working directory."""
    return Path(environ.get("LEANRIG_WORKSPACE") or ".").absolute()
