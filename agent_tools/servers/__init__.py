"""servers: the wires that carry the tool catalogue (MCP on the official SDK over stdio, HTTP
or a Unix socket — `leanrig run`'s runner-owned services —, line-delimited JSON-RPC) over one
binding (tools.py), the wiring that opens a service for `leanrig serve`, and clients for a
`leanrig serve` subprocess (clients.py).

Names load on first use (PEP 562): importing a light part (signals, fdstreams) must not
import the MCP SDK (~1 s here) — `leanrig lsp`, `report`, `--help` never need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
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
    from .eventloop import freeze_heap
    from .eventloop import run as run_event_loop
    from .fdstreams import FdReceive, FdSend, claimed_stdio
    from .jsonrpc_server import handle_message, serve_stdio, serve_stream, serve_tcp
    from .listen import PortUnavailable, listen_local
    from .mcp_server import build_mcp
    from .signals import ignore_stop_signals, on_first, stop_signals
    from .socket_server import serve_mcp_listener, serve_mcp_stream, serve_mcp_unix
    from .tools import (
        ToolSpec,
        bind,
        call_tool,
        failure,
        service_tool,
        service_tools,
        validate_params,
    )
    from .version import package_version

# name -> (submodule, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "FdReceive": ("fdstreams", "FdReceive"),
    "FdSend": ("fdstreams", "FdSend"),
    "JsonRpcProcess": ("clients", "JsonRpcProcess"),
    "McpConnection": ("clients", "McpConnection"),
    "PortUnavailable": ("listen", "PortUnavailable"),
    "RpcError": ("clients", "RpcError"),
    "ServeOptions": ("app", "ServeOptions"),
    "ToolSpec": ("tools", "ToolSpec"),
    "bind": ("tools", "bind"),
    "freeze_heap": ("eventloop", "freeze_heap"),
    "build_mcp": ("mcp_server", "build_mcp"),
    "call_tool": ("tools", "call_tool"),
    "claimed_stdio": ("fdstreams", "claimed_stdio"),
    "failure": ("tools", "failure"),
    "handle_message": ("jsonrpc_server", "handle_message"),
    "ignore_stop_signals": ("signals", "ignore_stop_signals"),
    "jsonrpc_subprocess": ("clients", "jsonrpc_subprocess"),
    "listen_local": ("listen", "listen_local"),
    "mcp_subprocess": ("clients", "mcp_subprocess"),
    "on_first": ("signals", "on_first"),
    "open_service": ("app", "open_service"),
    "package_version": ("version", "package_version"),
    "run_event_loop": ("eventloop", "run"),
    "serve_argv": ("clients", "serve_argv"),
    "serve_mcp_listener": ("socket_server", "serve_mcp_listener"),
    "serve_mcp_stream": ("socket_server", "serve_mcp_stream"),
    "serve_mcp_unix": ("socket_server", "serve_mcp_unix"),
    "serve_stdio": ("jsonrpc_server", "serve_stdio"),
    "serve_stream": ("jsonrpc_server", "serve_stream"),
    "serve_tcp": ("jsonrpc_server", "serve_tcp"),
    "service_tool": ("tools", "service_tool"),
    "service_tools": ("tools", "service_tools"),
    "stop_process": ("clients", "stop_process"),
    "stop_signals": ("signals", "stop_signals"),
    "validate_params": ("tools", "validate_params"),
}


__getattr__ = _lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "FdReceive",
    "FdSend",
    "JsonRpcProcess",
    "McpConnection",
    "PortUnavailable",
    "RpcError",
    "ServeOptions",
    "ToolSpec",
    "bind",
    "build_mcp",
    "call_tool",
    "claimed_stdio",
    "failure",
    "freeze_heap",
    "handle_message",
    "ignore_stop_signals",
    "jsonrpc_subprocess",
    "listen_local",
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
