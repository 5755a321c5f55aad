"""The replay model: a local model endpoint playing a plan of leanrig tool calls (docs/agents.md).

Stateless: the plan position is the number of tool calls the conversation already holds. Must
not keep state between requests, call a tool itself, or crash on an unreadable request."""

from __future__ import annotations

import gzip
import os
import socket
import zlib
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
import orjson

from lsp_bridge import LeanrigError

from ..servers import serve_asgi
from .model_request import Api
from .replay_answers import error_body, render_events, render_json
from .replay_plan import ReplayPlan, ReplayPlanInvalid, load_plan
from .replay_requests import (
    Conversation,
    ServedUsage,
    ToolCall,
    ToolSearch,
    WireError,
    parse_request,
)
from .replay_turns import Turn, next_turn, usage_of

__all__ = [
    "ReplayApp",
    "ReplayPlan",
    "ReplayPlanInvalid",
    "ReplayPortUnavailable",
    "Turn",
    "load_plan",
    "next_turn",
    "replay_app",
    "serve_replay_model",
]

MAX_BODY_BYTES: Final = 64 * 1024 * 1024


class ReplayPortUnavailable(LeanrigError):
    hint = "choose another port (0 lets the system pick a free one; the server says which)"


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ROUTES: Final[dict[str, Api]] = {
    "/messages": "anthropic-messages",
    "/responses": "openai-responses",
    "/chat/completions": "openai-chat",
}


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ReplayApp:
    """The ASGI app; after ``close()`` pausing and new requests get 503."""

    def __init__(self, plan: ReplayPlan, *, log: Path | None = None) -> None:
        self.plan = plan
        self.log = log
        self.closing = False
        self.pausing: set[anyio.CancelScope] = set()

    def close(self) -> None:
        self.closing = True
        for scope in list(self.pausing):
            scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = str(scope["path"]).rstrip("/")
        path = path.removeprefix("/v1") if path.startswith("/v1/") else path
        method = scope["method"]
        api = ROUTES.get(path.removesuffix("/count_tokens"))
        if method == "GET" and (path == "/models" or path.startswith("/models/")):
            await _send_json(send, 200, _models(path))
        elif method != "POST" or api is None:
            message = f"no such endpoint: {method} {scope['path']}"
            await _send_json(send, 404, error_body(None, 404, message))
        else:
            try:
                body = await _read_body(scope, receive)
                conv = parse_request(api, body)
            except _Refused as exc:
                await _send_json(send, exc.status, error_body(api, exc.status, exc.message))
            except WireError as exc:
                await _send_json(send, 400, error_body(api, 400, str(exc)))
            else:
                if path.endswith("/count_tokens"):
                    await _send_json(send, 200, {"input_tokens": max(1, conv.body_bytes // 4)})
                else:
                    await self._answer(conv, receive, send)

    async def _answer(self, conv: Conversation, receive: Receive, send: Send) -> None:
        turn = next_turn(self.plan, conv)
        if turn.pause > 0 or self.closing:
            outcome = await self._pause(turn.pause, receive)
            if outcome == "gone":
                return
            if outcome == "closing":
                body = error_body(conv.api, 503, "the replay model is shutting down")
                await _send_json(send, 503, body)
                return
        usage = usage_of(conv, turn.output)
        if conv.stream:
            headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for event in render_events(conv, turn.output, usage):
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        else:
            await _send_json(send, 200, render_json(conv, turn.output, usage))
        self._log(conv, turn, usage)

    async def _pause(self, seconds: float, receive: Receive) -> str:
        """Wait ``seconds``: "done", "gone" (the client disconnected) or "closing"."""
        gone = False
        with anyio.CancelScope() as scope:
            self.pausing.add(scope)
            try:
                if self.closing:
                    scope.cancel()
                async with anyio.create_task_group() as tg:

                    async def watch() -> None:
                        nonlocal gone
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        gone = True
                        tg.cancel_scope.cancel()

                    tg.start_soon(watch)
                    await anyio.sleep(seconds)
                    tg.cancel_scope.cancel()
            finally:
                self.pausing.discard(scope)
        if gone:
            return "gone"
        return "closing" if scope.cancelled_caught else "done"

    def _log(self, conv: Conversation, turn: Turn, usage: ServedUsage) -> None:
        if self.log is None:
            return
        output = turn.output
        tool = (
            output.name
            if isinstance(output, ToolCall)
            else output.tool
            if isinstance(output, ToolSearch)
            else None
        )
        line = {
            "api": conv.api,
            "task": turn.task,
            "step": turn.step,
            "streaming": conv.stream,
            "model": conv.model,
            "input_tokens": usage.input_tokens,
            "cached_input_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "tool": tool,
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
        }
        # One O_APPEND write per line: concurrent requests never interleave.
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, orjson.dumps(line) + b"\n")
        finally:
            os.close(fd)


def replay_app(plan: ReplayPlan, *, log: Path | None = None) -> ReplayApp:
    """The replay model as an ASGI app; ``log``: one JSON line per served model call."""
    return ReplayApp(plan, log=log)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(scope: Scope, receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Refused(400, "the client disconnected before its request ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _Refused(413, f"the request body is over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    encoding = dict(scope.get("headers", [])).get(b"content-encoding", b"identity").lower()
    try:
        if encoding == b"gzip":
            return gzip.decompress(body)
        if encoding == b"deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error, EOFError) as exc:
        raise _Refused(400, f"the request body is not valid {encoding.decode()}: {exc}") from None
    if encoding != b"identity":
        raise _Refused(415, f"unsupported content-encoding {encoding.decode(errors='replace')}")
    return body


def _models(path: str) -> dict[str, Any]:
    model = {
        "id": "replay",
        "object": "model",
        "type": "model",
        "created": 0,
        "created_at": "1970-01-01T00:00:00Z",
        "owned_by": "leanrig",
        "display_name": "leanrig replay model",
    }
    if path.startswith("/models/"):
        return {**model, "id": path.removeprefix("/models/")}
    listing = {"object": "list", "data": [model], "has_more": False}
    return {**listing, "first_id": "replay", "last_id": "replay"}


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.create_server((host, port), family=family)
    except OverflowError as exc:
        raise ReplayPortUnavailable(f"cannot listen on {host}:{port}: {exc}") from exc
    except OSError as exc:
        reason = exc.strerror or exc
        raise ReplayPortUnavailable(f"cannot listen on {host}:{port}: {reason}") from exc
    listener.setblocking(False)
    return listener


async def serve_replay_model(
    plan: ReplayPlan,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    log: Path | None = None,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the replay model on ``host:port`` (0: a free port) until cancelled.

    ``task_status.started(url)`` once it listens; on cancel, pausing requests get 503."""
    listener = _listen(host, port)
    bound = listener.getsockname()[1]
    url = f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"
    app = ReplayApp(plan, log=log)
    stop, settled = anyio.Event(), anyio.Event()
    listening = False

    def ready() -> None:
        nonlocal listening
        listening = True
        settled.set()

    async def run() -> None:
        try:
            # Shielded: the server stops gracefully when `stop` is set.
            with anyio.CancelScope(shield=True):
                await serve_asgi(app, listener, stop, ready)
        finally:
            listener.close()
            settled.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await settled.wait()
            if not listening:
                raise ReplayPortUnavailable(f"the replay model did not start on {url}")
            task_status.started(url)
            await anyio.sleep_forever()
        finally:
            app.close()
            stop.set()
