"""servers: the wires that carry the tool catalogue (MCP on the official SDK over stdio, HTTP
or a Unix socket — `leanrig run`'s runner-owned services —, line-delimited JSON-RPC) over one
binding (tools.py), the wiring that opens a service for `leanrig serve`, and clients for a
`leanrig serve` subprocess (clients.py)."""

from .app import ServeOptions, open_service
from .clients import (
    JsonRpcProcess,
    McpConnection,
    RpcError,
    jsonrpc_subprocess,
    mcp_subprocess,
    serve_argv,
    stop_process,
)
from .eventloop import run as run_event_loop
from .fdstreams import FdReceive, FdSend, claimed_stdio
from .jsonrpc_server import handle_message, serve_stdio, serve_stream, serve_tcp
from .mcp_server import build_mcp, package_version
from .signals import ignore_stop_signals, on_first, stop_signals
from .socket_server import serve_mcp_listener, serve_mcp_stream, serve_mcp_unix
from .tools import (
    TOOL_BY_NAME,
    TOOLS,
    ToolSpec,
    bind,
    call_tool,
    failure,
    service_tool,
    service_tools,
    validate_params,
)

__all__ = [
    "TOOLS",
    "TOOL_BY_NAME",
    "FdReceive",
    "FdSend",
    "JsonRpcProcess",
    "McpConnection",
    "RpcError",
    "ServeOptions",
    "ToolSpec",
    "bind",
    "build_mcp",
    "call_tool",
    "claimed_stdio",
    "failure",
    "handle_message",
    "ignore_stop_signals",
    "jsonrpc_subprocess",
    "mcp_subprocess",
    "on_first",
    "open_service",
    "package_version",
    "run_event_loop",
    "serve_argv",
    "serve_mcp_listener",
    "serve_mcp_stream",
    "serve_mcp_unix",
    "serve_stdio",
    "serve_stream",
    "serve_tcp",
    "service_tool",
    "service_tools",
    "stop_process",
    "stop_signals",
    "validate_params",
]
