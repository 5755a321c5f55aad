"""servers: the wires carrying the tool catalogue (MCP, JSON-RPC) and `leanrig serve`'s wiring.

Names load on first use (PEP 562), so light parts never import the MCP SDK."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .asgi import serve_asgi as serve_asgi
    from .asgi import socket_url as socket_url
    from .eventloop import freeze_heap as freeze_heap
    from .eventloop import run_event_loop as run_event_loop
    from .fdstreams import FdReceive as FdReceive
    from .fdstreams import FdSend as FdSend
    from .fdstreams import claimed_stdio as claimed_stdio
    from .jsonrpc_server import handle_message as handle_message
    from .jsonrpc_server import serve_stdio as serve_stdio
    from .jsonrpc_server import serve_stream as serve_stream
    from .jsonrpc_server import serve_tcp as serve_tcp
    from .listen import PortUnavailable as PortUnavailable
    from .listen import listen_local as listen_local
    from .mcp_server import build_mcp as build_mcp
    from .service_wiring import ServeOptions as ServeOptions
    from .service_wiring import open_service as open_service
    from .service_wiring import serve_argv as serve_argv
    from .signals import on_first as on_first
    from .signals import stop_signals as stop_signals
    from .socket_server import serve_mcp_listener as serve_mcp_listener
    from .socket_server import serve_mcp_stream as serve_mcp_stream
    from .socket_server import serve_mcp_unix as serve_mcp_unix
    from .tools import ToolSpec as ToolSpec
    from .tools import bind as bind
    from .tools import call_tool as call_tool
    from .tools import failure as failure
    from .tools import service_tool as service_tool
    from .tools import service_tools as service_tools
    from .tools import validate_params as validate_params
    from .version import package_version as package_version

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
