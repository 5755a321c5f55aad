"""The agent tools over plain JSON-RPC 2.0: one JSON message per line, on stdio or TCP.

Methods and params are the MCP tool names and arguments; a tool error is -32000 with
``data: {code, hint}``. Each connection is one client; no client can affect another."""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Awaitable, Callable
from contextlib import nullcontext, suppress
from typing import Any

import anyio
import anyio.lowlevel
import orjson
import structlog
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream

from ..sessions import InvalidArguments, ProofService, ToolError
from .fdstreams import FdReceive, FdSend, Wire, claimed_stdio
from .textlines import LineTooLong, receive_line
from .tools import call_tool, service_tool, service_tools

log = structlog.get_logger("leanrig.jsonrpc")
MAX_LINE = 4 * 2**20  # bodies up to 1 MB, JSON-escaped
MAX_IN_FLIGHT = 32  # per connection: requests read whose replies are not yet written
TCP_WRITE_TIMEOUT = 30.0  # a TCP client taking no reply bytes this long is dropped
CLOSE_TIMEOUT = 10.0  # closing a gone client's sessions
_clients = itertools.count(1)


def _error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def request_id(message: Any) -> str | int | None:
    """The id for an error reply to ``message``: its id if a string or integer, else None."""
    if isinstance(message, dict):
        rid = message.get("id")
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
            return rid
    return None


def _parse(raw: bytes) -> tuple[Any, dict[str, Any] | None]:
    try:
        msg = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, _error(
            request_id(lenient_json(raw)),
            -32700,
            "parse error: not JSON (one JSON object per line, strings of valid Unicode)",
        )
    if isinstance(msg, dict) and isinstance(msg.get("id"), float):
        msg["id"] = _exact_id(msg["id"], raw)
    return msg, None


def _exact_id(rid: float, raw: bytes) -> Any:
    """An integer id beyond 64 bits, which orjson reads as a float, read exactly."""
    with suppress(ValueError, RecursionError):
        exact = json.loads(raw)
        if isinstance(exact, dict) and isinstance(exact.get("id"), int):
            return exact["id"]
    return rid


def lenient_json(raw: bytes | str) -> Any:
    """``raw`` decoded leniently for an error reply, or None if it is not JSON.

    Accepts invalid UTF-8, lone surrogates and integers beyond 64 bits, which orjson refuses."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    # The standard library's parser recurses: deep nesting raises RecursionError.
    except (ValueError, RecursionError):
        return None


async def handle_message(service: ProofService, raw: bytes, client: str) -> dict[str, Any] | None:
    """One line in, the reply out (None for a notification, which gets no reply)."""
    msg, parse_error = _parse(raw)
    if parse_error is not None:
        return parse_error
    if isinstance(msg, list):
        return _error(None, -32600, "invalid request: batches are not supported")
    if (
        not isinstance(msg, dict)
        or msg.get("jsonrpc") != "2.0"
        or not isinstance(msg.get("method"), str)
        or not _valid_id(msg.get("id"))
    ):
        return _error(
            request_id(msg),
            -32600,
            "invalid request: need jsonrpc '2.0', a string method, and an id (string or number)",
        )
    method: str = msg["method"]
    if "id" not in msg:
        # A tool call's result would be unreachable, so notifications are ignored.
        log.info("jsonrpc.notification_ignored", method=method, client=client)
        return None
    rid = msg["id"]
    spec = service_tool(service, method)
    if spec is None:
        methods = sorted(t.name for t in service_tools(service))
        hint = "call one of the methods in data.methods (the MCP tool names)"
        return _error(rid, -32601, f"unknown method {method!r}", {"methods": methods, "hint": hint})
    try:
        result = await call_tool(service, spec, msg.get("params"), client)
    except InvalidArguments as exc:  # before ToolError: it is one
        return _error(
            rid,
            -32602,
            f"invalid params: {exc.message}",
            {"code": exc.code, "hint": exc.hint, "field": exc.field},
        )
    except ToolError as exc:
        return _error(rid, -32000, exc.message, {"code": exc.code, "hint": exc.hint})
    except Exception:
        log.exception("jsonrpc.tool_crashed", method=spec.name)
        return _error(rid, -32603, "internal error; see server log")
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def dump_reply(payload: dict[str, Any], client: str) -> bytes:
    """One reply line; an unserializable reply becomes an internal error."""
    try:
        return orjson.dumps(payload) + b"\n"
    except TypeError:
        pass
    try:
        # Integers beyond 64 bits; ASCII output escapes lone surrogates.
        return json.dumps(payload, allow_nan=False).encode() + b"\n"
    except (TypeError, ValueError):
        log.exception("jsonrpc.unserializable_reply", client=client)
        rid = payload.get("id")
        return json.dumps(_error(rid, -32603, "internal error")).encode() + b"\n"


async def serve_stream(
    service: ProofService,
    receive: ByteReceiveStream,
    send: Callable[[bytes], Awaitable[None]],
    *,
    write_timeout: float | None = None,
    peer_gone: Callable[[], bool] | None = None,
) -> None:
    """Serve one client until it is done or gone, then close its sessions; nothing escapes.

    Calls in flight are answered at end of input unless the peer is gone (``peer_gone()``)."""
    client = f"jsonrpc-{next(_clients)}"
    reader = BufferedByteReceiveStream(receive)
    broken = False  # the input ended in an error (a reset), not a clean end
    slots = anyio.Semaphore(MAX_IN_FLIGHT)
    write_lock = anyio.Lock()
    try:
        async with anyio.create_task_group() as tg:

            async def reply(payload: dict[str, Any] | None) -> None:
                if payload is None:
                    return
                data = dump_reply(payload, client)
                try:
                    async with write_lock:
                        with anyio.fail_after(write_timeout) if write_timeout else nullcontext():
                            await send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    log.info("jsonrpc.client_gone", client=client, error=type(exc).__name__)
                    tg.cancel_scope.cancel()
                except TimeoutError:
                    log.warning("jsonrpc.client_not_reading", client=client, s=write_timeout)
                    tg.cancel_scope.cancel()

            async def handle(line: bytes) -> None:
                try:
                    await reply(await handle_message(service, line, client))
                finally:
                    slots.release()

            async def too_long() -> None:
                try:
                    await reply(_error(None, -32600, f"message too long (over {MAX_LINE} bytes)"))
                finally:
                    slots.release()

            while True:
                await slots.acquire()  # full: stop reading this client until it takes replies
                try:
                    line = await receive_line(reader, MAX_LINE)
                except LineTooLong:
                    tg.start_soon(too_long)
                    continue
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    line, broken = None, True
                if line is None:
                    slots.release()
                    break
                if not line.strip():
                    slots.release()
                    continue
                tg.start_soon(handle, line)
            if broken or (peer_gone is not None and peer_gone()):
                # No reply can reach it: cancel its calls rather than run them to their deadline.
                log.info(
                    "jsonrpc.client_gone", client=client, error="reset" if broken else "hangup"
                )
                tg.cancel_scope.cancel()
    finally:
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await _close_sessions(service, client)


async def _close_sessions(service: ProofService, client: str) -> None:
    for sid, session in list(service.sessions.items()):
        if session.client == client:
            try:
                await service.close_session(sid, client)
            except ToolError:
                pass


async def serve_stdio(service: ProofService, wire: Wire | None = None) -> None:
    """One client on stdin/stdout (``wire``: already claimed by the caller), until either ends."""
    with claimed_stdio(wire) as (stdin_fd, stdout_fd):
        send = FdSend(stdout_fd)
        await serve_stream(service, FdReceive(stdin_fd), send, peer_gone=send.hung_up)


async def _socket_send(sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    while view:
        await anyio.wait_writable(sock)
        try:
            view = view[sock.send(view) :]
        except (BlockingIOError, InterruptedError):
            continue
        except OSError as exc:
            raise anyio.BrokenResourceError from exc


async def serve_tcp(
    service: ProofService, listener: socket.socket, ready: Callable[[int], None] | None = None
) -> None:
    """JSON-RPC on ``listener``, one client per connection; closes the listener at the end."""

    async def handle(conn: socket.socket) -> None:
        with conn:
            try:
                await serve_stream(
                    service,
                    FdReceive(conn.fileno()),  # ``conn`` stays open until the end of ``with``
                    lambda data: _socket_send(conn, data),
                    write_timeout=TCP_WRITE_TIMEOUT,
                )
            except Exception:
                log.exception("jsonrpc.connection_failed")

    with listener:
        if ready is not None:
            ready(listener.getsockname()[1])
        async with anyio.create_task_group() as tg:
            while True:
                await anyio.wait_readable(listener)
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                conn.setblocking(False)
                tg.start_soon(handle, conn)


__all__ = [
    "MAX_IN_FLIGHT",
    "MAX_LINE",
    "ByteSendStream",
    "handle_message",
    "lenient_json",
    "request_id",
    "serve_stdio",
    "serve_stream",
    "serve_tcp",
]
