"""An attempt's MCP server command: ``python -I -S relay.py SOCKET``, a stdio↔socket byte relay.

Standard library only. Exits 0 when the socket ends, 1 when it cannot be reached."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

CONNECT_TIMEOUT = 30.0  # seconds; the socket is normally bound before the agent starts
CHUNK = 1 << 16


def connect(path: str, timeout: float = CONNECT_TIMEOUT) -> socket.socket:
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        except OSError:
            sock.close()
            raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pump_in(sock: socket.socket, fd_in: int) -> None:
    try:
        while data := os.read(fd_in, CHUNK):
            sock.sendall(data)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def relay(path: str, fd_in: int = 0, fd_out: int = 1, timeout: float = CONNECT_TIMEOUT) -> int:
    try:
        sock = connect(path, timeout)
    except OSError as exc:
        sys.stderr.write(f"leanrig relay: cannot connect to {path}: {exc}\n")
        return 1
    threading.Thread(target=_pump_in, args=(sock, fd_in), daemon=True).start()
    try:
        while data := sock.recv(CHUNK):
            _write_all(fd_out, data)
    except OSError:  # the client closed our stdout, or the server reset the connection
        pass
    finally:
        sock.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: relay.py SOCKET\n")
        return 2
    return relay(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
