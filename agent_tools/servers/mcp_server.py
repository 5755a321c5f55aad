"""The agent tools over MCP (official SDK, `MCPServer`): stdio or streamable HTTP.

`tools/list` publishes the catalogue's own schemas (inputSchema, outputSchema, annotations);
`tools/call` runs through tools.call_tool — the same validation, results and errors as
JSON-RPC. The SDK's per-function tools are not used: their argument models coerce ("8" → 8),
ignore unknown keys, pre-parse JSON strings and prefix every error with "Error executing
tool", so the two wires would disagree. Expected failures are `is_error` results whose text is
``[code] message. Next: hint`` (never a raw exception text); a crash is a protocol error.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import orjson
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from mcp_types import Tool as MCPTool

from ..sessions import (
    TOOL_BY_NAME,
    TOOLS,
    ProofService,
    ToolDef,
    ToolError,
    input_schema,
    output_schema,
)
from .tools import call_tool, failure

log = structlog.get_logger("leanrig.mcp")

INSTRUCTIONS = (
    "Prove Lean theorems by editing only the proof body. open_task, then set_proof / "
    "replace_in_proof and read diagnostics and goals; check_proof gives the final verdict."
)


def package_version() -> str:
    try:
        return version("leanrig")
    except PackageNotFoundError:  # running from a source tree without installing
        return "0+unknown"


def describe(tool: ToolDef) -> MCPTool:
    return MCPTool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=input_schema(tool),
        output_schema=output_schema(tool),
        annotations=ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.read_only,
            destructive_hint=False,
            open_world_hint=False,
        ),
    )


class LeanrigMCP(MCPServer[Any]):
    def __init__(self, service: ProofService, client: str) -> None:
        super().__init__(
            "leanrig", version=package_version(), instructions=INSTRUCTIONS, log_level="WARNING"
        )
        self.service = service
        self.client = client
        self._listed = [describe(t) for t in TOOLS]

    async def list_tools(self) -> list[MCPTool]:
        return list(self._listed)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        spec = TOOL_BY_NAME.get(name)
        if spec is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown tool {name!r}",
                data={"tools": sorted(TOOL_BY_NAME)},
            )
        try:
            result = await call_tool(self.service, spec, arguments, self.client)
        except ToolError as exc:
            text = failure(exc).render()
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        except Exception as exc:
            log.exception("mcp.tool_crashed", tool=name)
            raise MCPError(code=INTERNAL_ERROR, message="internal error; see server log") from exc
        return CallToolResult(
            content=[TextContent(type="text", text=orjson.dumps(result).decode())],
            structured_content=result,
        )


def build_mcp(service: ProofService, client: str = "mcp") -> MCPServer[Any]:
    return LeanrigMCP(service, client)
