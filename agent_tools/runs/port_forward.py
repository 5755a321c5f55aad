"""The model's way in from inside an agent's sandbox: a loopback port forwarded to the run's
model gateway on a Unix socket, then the agent itself.

The sandbox has a network namespace of its own (no route out, its own loopback), so a harness
told to reach its model at ``http://127.0.0.1:PORT`` reaches only this forwarder, which copies
each connection's bytes to and from the gateway's socket (bound into the sandbox read-only,
as the MCP relay's is). Run as ``python -I -S port_forward.py PORT SOCKET -- AGENT...``
(standard library only: a ~20 ms start): it listens first, then starts the agent as its child
and exits with the agent's status, so the agent's first model request never finds the port
closed, and the forwarder is in the agent's process tree (killed with it at the limit).
"""

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
    # Inherited by each connection: a server-sent event relayed leaves at once (with Nagle on,
    # the events after the first waited for the harness's delayed ACK, ~40 ms a call).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    try:
        child = subprocess.Popen(command, close_fds=False)
    except OSError as exc:
        sys.stderr.write(f"leanrig: cannot start {command[0]}: {exc.strerror or exc}\n")
        return 127
    # The runner ends an attempt by killing every process of it; a polite stop reaches the
    # agent too.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    status = child.wait()
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
