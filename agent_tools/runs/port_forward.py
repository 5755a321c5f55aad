"""The model's way into the sandbox: a loopback port forwarded to the gateway's Unix socket.

``python -I -S port_forward.py PORT SOCKET -- AGENT...`` listens, then runs the agent as child."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 1 << 16


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _serve(conn: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError as exc:
        sys.stderr.write(f"leanrig model forwarder: cannot reach the gateway: {exc}\n")
        conn.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve, args=(conn, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--" or not argv[0].isdigit():
        sys.stderr.write("usage: port_forward.py PORT SOCKET -- COMMAND...\n")
        return 2
    port, path, command = int(argv[0]), argv[1], argv[3:]
    listener = socket.create_server(("127.0.0.1", port))
    # Inherited by each connection: a relayed server-sent event must leave at once.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    try:
        child = subprocess.Popen(command, close_fds=False)
    except OSError as exc:
        sys.stderr.write(f"leanrig: cannot start {command[0]}: {exc.strerror or exc}\n")
        return 127
    # A polite stop reaches the agent too.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    status = child.wait()
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
