"""An ASGI app served by uvicorn on a socket bound by the caller (TCP or Unix), under anyio,
until a stop event: MCP over HTTP (`leanrig serve --http`), the model gateway and the replay
model all need a socket known before they serve (a port in use fails before Lean starts, a
port chosen by the system, an attempt's Unix socket) and leanrig's own signal handling
(uvicorn's handlers left out). Nothing else: no routing, no app logic."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import anyio


def socket_url(listener: socket.socket) -> str:
    """``http://127.0.0.1:PORT`` of a TCP listener (a Unix socket has no URL: its path)."""
    if listener.family == socket.AF_UNIX:
        return str(listener.getsockname())
    host, port = listener.getsockname()[:2]
    return f"http://{host}:{port}"


async def serve_asgi(
    app: Any,
    listener: socket.socket,
    stop: anyio.Event,
    ready: Callable[[], None] | None = None,
    *,
    graceful_s: int = 1,
    lifespan: Literal["auto", "on", "off"] = "off",
) -> None:
    """Serve ``app`` on ``listener`` until ``stop`` is set, then shut down (requests still
    running get ``graceful_s`` seconds); ``ready()`` once uvicorn listens. ``lifespan``: as
    uvicorn's (the MCP SDK's app runs its session manager in its lifespan)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and ready is not None:
                ready()

    if listener.family in (socket.AF_INET, socket.AF_INET6):
        # Accepted connections inherit it: each server-sent event leaves at once (with Nagle
        # on, every answer after a connection's first waited ~40 ms for a delayed ACK).
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    config = uvicorn.Config(
        app, log_level="warning", lifespan=lifespan, timeout_graceful_shutdown=graceful_s,
        access_log=False,
    )  # fmt: skip
    server = Server(config)

    async def stop_when_asked() -> None:
        await stop.wait()
        # Requests cut off at the stop (an agent killed mid-stream, a tool call whose Lean is
        # already killed) are logged by uvicorn as ERROR tracebacks: shutdown noise only.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        server.should_exit = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_asked)
        await server.serve(sockets=[listener])
        tg.cancel_scope.cancel()


__all__ = ["serve_asgi", "socket_url"]
