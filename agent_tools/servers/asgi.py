"""An ASGI app served by uvicorn under anyio on a socket the caller bound, until a stop event.

uvicorn's signal handlers are left out; no routing, no app logic."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import anyio


def socket_url(listener: socket.socket) -> str:
    """``http://HOST:PORT`` of a TCP listener, or a Unix socket's path."""
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
    """Serve ``app`` on ``listener`` until ``stop`` is set, then give requests ``graceful_s`` s.

    ``ready()`` is called once uvicorn listens; ``lifespan`` is uvicorn's setting."""
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
        # Accepted connections inherit it; with Nagle on, replies wait for a delayed ACK.
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan=lifespan,
        timeout_graceful_shutdown=graceful_s,
        access_log=False,
    )
    server = Server(config)

    async def stop_when_asked() -> None:
        await stop.wait()
        # Requests cut off by the stop would be logged as ERROR tracebacks: shutdown noise.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        server.should_exit = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_when_asked)
        await server.serve(sockets=[listener])
        tg.cancel_scope.cancel()


__all__ = ["serve_asgi", "socket_url"]
