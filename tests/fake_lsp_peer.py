"""A FAKE LSP server for faults the real Lean cannot produce (malformed frames).

Usage: python fake_lsp_peer.py MODE. It answers `initialize`, then misbehaves per MODE.
``error:CODE`` answers every later request with the JSON-RPC error CODE (e.g. -32801
ContentModified, -32800 RequestCancelled, -32900 RpcNeedsReconnect): the real Lean gives those
only in races a test cannot schedule. ``problem-with-answer`` publishes an error for the
version a ``waitForDiagnostics`` asks about in the same write as its answer (the real Lean
publishes it earlier, so a client's reaction to it always has time to go out there), and
first reads what the client sent without waiting for that answer.
``unanswered:METHOD,…`` never answers requests for those methods (the real Lean always does,
at once or once the document changes). ``fatal-at-shutdown`` reports the last opened document
fatal when asked to shut down, then answers (a worker dying under the shutdown).
``fatal-without-error`` reports the version a ``waitForDiagnostics`` asks about fatal, with no
error, then answers it (what a client sees of a worker that crashed under the version). In every
mode, the request ``fake/log`` answers with what the peer has read so far: each message's
method (and a cancelled request's id), in order, and for each request the methods it had
answered since the last change before it.
"""

from __future__ import annotations

import json
import os
import select
import sys

WAIT = "textDocument/waitForDiagnostics"


_buffer = bytearray()


def _fill(timeout: float | None) -> bool:
    """Read what stdin has (waiting at most ``timeout`` seconds; None: as long as it takes).
    False: nothing came in time."""
    if timeout is not None and not select.select([0], [], [], timeout)[0]:
        return False
    data = os.read(0, 65536)
    if not data:
        sys.exit(0)
    _buffer.extend(data)
    return True


def read_message(timeout: float | None = None) -> dict[str, object] | None:
    """The next message; None if none is complete within ``timeout`` seconds."""
    while True:
        end = _buffer.find(b"\r\n\r\n")
        if end >= 0:
            length = 0
            for line in bytes(_buffer[:end]).split(b"\r\n"):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if len(_buffer) >= end + 4 + length:
                body = bytes(_buffer[end + 4 : end + 4 + length])
                del _buffer[: end + 4 + length]
                return dict(json.loads(body))
        if not _fill(timeout):
            return None


def next_message() -> dict[str, object]:
    message = read_message()
    assert message is not None
    return message


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
            next_message()
    init = next_message()
    send({"jsonrpc": "2.0", "id": init["id"], "result": {"capabilities": {}}})
    log: list[object] = []
    answered: list[str] = []  # methods of the requests answered since the last change
    pending: list[dict[str, object]] = []  # read ahead (problem-with-answer)

    def record(msg: dict[str, object]) -> dict[str, object]:
        method = msg.get("method")
        params = msg.get("params")
        if method == "$/cancelRequest" and isinstance(params, dict):
            log.append([method, params.get("id")])
        elif "id" in msg:
            log.append([method, list(answered)])
        else:
            log.append([method])
            if method == "textDocument/didChange":
                answered.clear()
        return msg

    def report_fatal(uri: object, version: object) -> None:
        """``$/lean/fileProgress``: processing of the version stopped for good."""
        whole = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
        send({"jsonrpc": "2.0", "method": "$/lean/fileProgress",
              "params": {"textDocument": {"uri": uri, "version": version},
                         "processing": [{"range": whole, "kind": 2}]}})  # fmt: skip

    opened: dict[str, object] = {}  # the last opened document
    while True:
        msg = pending.pop(0) if pending else record(next_message())
        method = msg.get("method")
        params = msg.get("params")
        if method == "textDocument/didOpen" and isinstance(params, dict):
            opened = params["textDocument"]
        if "id" not in msg:
            continue
        if mode == "fatal-at-shutdown" and method == "shutdown" and opened:
            report_fatal(opened["uri"], opened["version"])
        unanswered = mode.startswith("unanswered:") and method in mode[11:].split(",")
        if not unanswered:
            answered.append(str(method))  # (answered below, after any read-ahead)
        if method == "fake/log":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": log})
            continue
        if unanswered:
            continue
        if mode == "fatal-without-error" and method == WAIT and isinstance(params, dict):
            report_fatal(params["uri"], params["version"])
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
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
            # What the client wrote with the barrier is read (and logged) before its answer.
            answered.pop()  # not yet
            while (ahead := read_message(timeout=0.3)) is not None:
                pending.append(record(ahead))
            answered.append(WAIT)
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
