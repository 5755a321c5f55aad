"""servers: the wires that carry the tool catalogue (MCP on the official SDK, line-delimited
JSON-RPC) over one binding (tools.py), plus the wiring that opens a service for `leanrig serve`."""

from .app import ServeOptions, open_service
from .jsonrpc_server import handle_message, serve_stdio, serve_stream, serve_tcp
from .mcp_server import build_mcp, package_version
from .tools import TOOL_BY_NAME, TOOLS, ToolSpec, bind, call_tool, failure, validate_params

__all__ = [
    "TOOLS",
    "TOOL_BY_NAME",
    "ServeOptions",
    "ToolSpec",
    "bind",
    "build_mcp",
    "call_tool",
    "failure",
    "handle_message",
    "open_service",
    "package_version",
    "serve_stdio",
    "serve_stream",
    "serve_tcp",
    "validate_params",
]
