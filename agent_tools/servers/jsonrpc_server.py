"""The agent tools over plain JSON-RPC 2.0: one JSON message per line, on stdio or TCP.

Method names and params are the MCP tool names and arguments. Errors: -32700 parse error,
-32600 invalid request, -32601 unknown method, -32602 invalid params, -32000 tool error (with
``data: {code, hint}``). Each connection is one client: its sessions are invisible to others.
Requests on one connection run concurrently (calls on one session are serialized by the
service); a malformed line never stops the server.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import orjson
import structlog
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream

from ..sessions import ProofService, ToolError
from .tools import TOOL_BY_NAME, bind, validate_params

log = structlog.get_logger("leanrig.jsonrpc")
MAX_LINE = 4 * 2**20  # bodies up to 1 MB, JSON-escaped
WRITE_TIMEOUT = 30.0
_clients = itertools.count(1)


def _error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": err}


async def handle_message(service: ProofService, raw: bytes, client: str) -> dict[str, Any] | None:
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _error(None, -32700, "parse error: not JSON (one JSON object per line)")
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "method" not in msg:
        rid = msg.get("id") if isinstance(msg, dict) else None
        return _error(rid, -32600, "invalid request: need jsonrpc '2.0', method and id")
    rid = msg.get("id")
    notification = "id" not in msg
    spec = TOOL_BY_NAME.get(str(msg["method"]))
    if spec is None:
        return (
            None
            if notification
            else _error(
                rid, -32601, f"unknown method {msg['method']!r}", {"methods": sorted(TOOL_BY_NAME)}
            )
        )
    try:
        params = validate_params(spec, msg.get("params"))
    except ValueError as exc:
        return None if notification else _error(rid, -32602, f"invalid params: {exc}")
    try:
        result = await bind(service, spec, client)(**params)
    except ToolError as exc:
        return (
            None
            if notification
            else _error(rid, -32000, exc.message, {"code": exc.code, "hint": exc.hint})
        )
    except Exception:
        log.exception("jsonrpc.tool_crashed", method=spec.name)
        return None if notification else _error(rid, -32603, "internal error; see server log")
    return None if notification else {"jsonrpc": "2.0", "id": rid, "result": result}


async def serve_stream(
    service: ProofService, receive: ByteReceiveStream, send: Callable[[bytes], Awaitable[None]]
) -> None:
    client = f"jsonrpc-{next(_clients)}"
    reader = BufferedByteReceiveStream(receive)
    lock = anyio.Lock()

    async def respond(raw: bytes) -> None:
        reply = await handle_message(service, raw, client)
        if reply is not None:
            # A client that stops reading must not hold the server: bounded write, then the
            # connection is dropped.
            with anyio.fail_after(WRITE_TIMEOUT):
                async with lock:
                    await send(orjson.dumps(reply) + b"\n")

    try:
        await _read_requests(reader, respond, send, lock)
    except* TimeoutError:
        log.warning("jsonrpc.client_not_reading", client=client)
    # sessions of a closed connection are closed too
    for sid, session in list(service.sessions.items()):
        if session.client == client:
            try:
                await service.close_session(sid, client)
            except ToolError:
                pass


async def _read_requests(
    reader: BufferedByteReceiveStream,
    respond: Callable[[bytes], Coroutine[Any, Any, None]],
    send: Callable[[bytes], Awaitable[None]],
    lock: anyio.Lock,
) -> None:
    async with anyio.create_task_group() as tg:
        while True:
            try:
                line = await reader.receive_until(b"\n", MAX_LINE)
            except anyio.DelimiterNotFound:
                async with lock:
                    await send(orjson.dumps(_error(None, -32600, "message too long")) + b"\n")
                break
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                break
            if line.strip():
                tg.start_soon(respond, line)


async def serve_stdio(service: ProofService) -> None:
    stdin = anyio.wrap_file(sys.stdin.buffer)
    stdout = anyio.wrap_file(sys.stdout.buffer)  # a full pipe must not block the event loop

    class _Stdin(ByteReceiveStream):
        async def receive(self, max_bytes: int = 65536) -> bytes:
            data = await stdin.read1(max_bytes)
            if not data:
                raise anyio.EndOfStream
            return bytes(data)

        async def aclose(self) -> None:
            pass

    async def send(data: bytes) -> None:
        await stdout.write(data)
        await stdout.flush()

    await serve_stream(service, _Stdin(), send)


async def serve_tcp(
    service: ProofService, port: int, ready: Callable[[int], None] | None = None
) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)

    async def handle(stream: Any) -> None:
        async with stream:

            async def send(data: bytes) -> None:
                await stream.send(data)

            await serve_stream(service, stream, send)

    async with listener:
        if ready is not None:
            ready(listener.extra(anyio.abc.SocketAttribute.local_port))
        await listener.serve(handle)


__all__ = ["ByteSendStream", "handle_message", "serve_stdio", "serve_stream", "serve_tcp"]
