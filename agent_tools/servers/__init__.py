"""servers: the tool catalogue and the wires that carry it (MCP on the official SDK,
line-delimited JSON-RPC), plus the wiring that opens a service for `leanrig serve`."""

from .app import ServeOptions, open_service
from .jsonrpc_server import handle_message, serve_stdio, serve_stream, serve_tcp
from .mcp_server import build_mcp
from .tools import TOOL_BY_NAME, TOOLS, ToolSpec, bind, validate_params

__all__ = [
    "TOOLS",
    "TOOL_BY_NAME",
    "ServeOptions",
    "ToolSpec",
    "bind",
    "build_mcp",
    "handle_message",
    "open_service",
    "serve_stdio",
    "serve_stream",
    "serve_tcp",
    "validate_params",
]
