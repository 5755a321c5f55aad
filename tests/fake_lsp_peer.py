"""A FAKE LSP server for faults the real Lean cannot produce (malformed frames).

Usage: python fake_lsp_peer.py MODE. It answers `initialize`, then misbehaves per MODE.
``error:CODE`` answers every later request with the JSON-RPC error CODE (e.g. -32801
ContentModified, -32800 RequestCancelled, -32900 RpcNeedsReconnect): the real Lean gives those
only in races a test cannot schedule. ``problem-with-answer`` publishes an error for the
version a ``waitForDiagnostics`` asks about in the same write as its answer (the real Lean
publishes it earlier, so a client's reaction to it always has time to go out there).
"""

from __future__ import annotations

import json
import sys

WAIT = "textDocument/waitForDiagnostics"


def read_message() -> dict[str, object]:
    length = 0
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            sys.exit(0)
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return dict(json.loads(sys.stdin.buffer.read(length)))


def send_raw(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def send(message: dict[str, object]) -> None:
    body = json.dumps(message).encode()
    send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def main() -> None:
    mode = sys.argv[1]
    if mode == "silent":
        while True:
            read_message()
    init = read_message()
    send({"jsonrpc": "2.0", "id": init["id"], "result": {"capabilities": {}}})
    while True:
        msg = read_message()
        if "id" not in msg:
            continue
        if mode.startswith("error:"):
            code = int(mode.removeprefix("error:"))
            error = {"code": code, "message": f"fake error {code}"}
            send({"jsonrpc": "2.0", "id": msg["id"], "error": error})
        elif mode == "bad-json":
            send_raw(b"Content-Length: 5\r\n\r\n{nope")
        elif mode == "no-length":
            send_raw(b"Content-Type: x\r\n\r\n{}")
        elif mode == "truncated":
            send_raw(b'Content-Length: 100\r\n\r\n{"jsonrpc"')
            sys.stdout.close()
            sys.exit(0)
        elif mode == "huge-header":
            send_raw(b"X: " + b"a" * 20000 + b"\r\n\r\n")
        elif mode == "problem-with-answer" and msg.get("method") == WAIT:
            params = msg["params"]
            assert isinstance(params, dict)
            error = {"range": {"start": {"line": 0, "character": 0},
                               "end": {"line": 0, "character": 1}},
                     "severity": 1, "message": "fake error"}  # fmt: skip
            diagnostics = {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                           "params": {"uri": params["uri"], "version": params["version"],
                                      "diagnostics": [error]}}  # fmt: skip
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
            bodies = [json.dumps(m).encode() for m in (diagnostics, answer)]
            send_raw(b"".join(b"Content-Length: %d\r\n\r\n%s" % (len(b), b) for b in bodies))
        elif mode == "out-of-order":
            # Answer a server request first, then a stale id, then the real answer.
            send(
                {
                    "jsonrpc": "2.0",
                    "id": "s1",
                    "method": "workspace/configuration",
                    "params": {"items": [{}]},
                }
            )
            send({"jsonrpc": "2.0", "id": 987654, "result": "stale"})
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"echo": msg.get("method")}})
            continue
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "result": None})


if __name__ == "__main__":
    main()
