"""MCP over a Unix domain socket: one MCP session per connection, all on one `ProofService`.

`leanrig run` serves each attempt here, so the agent reaches the service only through a relay."""

from __future__ import annotations

from pathlib import Path

import anyio
import structlog
from anyio.abc import ByteStream, SocketListener

from ..sessions import ProofService
from .mcp_server import build_mcp
from .textlines import MAX_MCP_LINE, TextLines, TextWriter

log = structlog.get_logger("leanrig.socket")

MAX_LINE = MAX_MCP_LINE  # bytes of one JSON-RPC message
MAX_CONNECTIONS = 32


async def serve_mcp_stream(service: ProofService, stream: ByteStream, client: str = "mcp") -> None:
    """One MCP session over ``stream``, newline-delimited, until the peer closes its side."""
    await build_mcp(service, client).serve_lines(
        TextLines(stream, MAX_LINE), TextWriter(stream.send)
    )


async def serve_mcp_listener(
    service: ProofService, listener: SocketListener, *, client: str = "mcp"
) -> None:
    """Serve up to ``MAX_CONNECTIONS`` connections of ``listener`` at once, until cancelled."""
    active = 0

    async def handle(stream: ByteStream) -> None:
        nonlocal active
        async with stream:
            if active >= MAX_CONNECTIONS:
                log.warning("socket.too_many_connections", limit=MAX_CONNECTIONS)
                return
            active += 1
            try:
                await serve_mcp_stream(service, stream, client)
            except Exception:
                log.warning("socket.connection_failed", exc_info=True)
            finally:
                active -= 1

    async with listener:
        await listener.serve(handle)


async def serve_mcp_unix(service: ProofService, path: Path, *, client: str = "mcp") -> None:
    """MCP on a Unix socket bound at ``path`` (created, then removed on the way out)."""
    listener = await anyio.create_unix_listener(path)
    try:
        await serve_mcp_listener(service, listener, client=client)
    finally:
        await anyio.Path(path).unlink(missing_ok=True)
