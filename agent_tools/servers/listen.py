"""The listening socket of a network server, bound before the service opens (fails early)."""

from __future__ import annotations

import socket

from lsp_bridge import LeanrigError


class PortUnavailable(LeanrigError):
    hint = "choose another port (0 lets the system pick a free one; the server says which)"


def listen_local(port: int) -> socket.socket:
    """A non-blocking TCP listener on ``127.0.0.1:port`` (0: a free port)."""
    try:
        listener = socket.create_server(("127.0.0.1", port), reuse_port=False)
    except OverflowError as exc:  # a port outside 0-65535
        raise PortUnavailable(f"cannot listen on 127.0.0.1:{port}: {exc}") from exc
    except OSError as exc:
        raise PortUnavailable(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from exc
    listener.setblocking(False)
    return listener


__all__ = ["PortUnavailable", "listen_local"]
