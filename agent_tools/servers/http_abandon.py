"""MCP over HTTP: a call whose client closed its connection is cancelled, not run on.

An HTTP client gives up on a call by closing its connection (the 2026-07-28 revision says so
outright: there is no other cancellation on that wire). The SDK's streamable-HTTP app notices
only on its event-stream paths; leanrig answers calls as JSON bodies (mcp_server.py), where
the SDK's handler never reads the connection again — an abandoned `set_proof` whose
elaboration ran away kept a Lean worker at a full core until the step's deadline, and the
session's next call queued behind it. ``CancelAbandonedCalls`` wraps the SDK's app and, once
the app has read a POST's whole body, watches its connection. When the client goes before
any response has started (a started one is an event stream, which the SDK watches itself):

- a request the SDK handles in the ASGI task — the 2026-07-28 revision's, routed by the SDK
  on its `MCP-Protocol-Version` header (any version that is not a handshake one), and a
  handshake request outside a session — has its handling cancelled;
- a request of a session (`Mcp-Session-Id`, a handshake revision) runs in that session's own
  tasks: it gets what its client would have sent, `notifications/cancelled` for its id, posted
  to the same app with the request's own headers.

Either way the tool sees the cancellation a stdio client's `notifications/cancelled` causes
(the pool stops the step's Lean work, the session stays usable). The body passes through as
the app reads it (the SDK's size limit answers 413 as before); a copy of it is kept, up to
that limit, for the id. Written here rather than taken from a library: it must know which of
the SDK's two dispatch paths a request takes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import structlog
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = structlog.get_logger("leanrig.http")

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
# The injected notification is tiny; the app answers it at once (202). Bounded all the same.
CANCEL_DEADLINE = 5.0


class CancelAbandonedCalls:
    """ASGI middleware around the SDK's streamable-HTTP app (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        version = headers.get(VERSION_HEADER)
        in_session = SESSION_HEADER in headers and (
            version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
        )
        kept: list[bytes] | None = [] if in_session else None
        size = 0
        read = anyio.Event()  # the app has the whole body: the connection is ours to watch
        gone = anyio.Event()
        started = False  # a response has begun

        async def app_receive() -> Message:
            nonlocal kept, size
            if read.is_set():  # (Starlette asks whether the client is still there)
                await gone.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                chunk = message.get("body", b"")
                size += len(chunk)
                if kept is not None and size > DEFAULT_MAX_REQUEST_BODY_SIZE:
                    kept = None  # over the SDK's limit: it answers 413, nothing runs
                elif kept is not None:
                    kept.append(chunk)
                if not message.get("more_body", False):
                    read.set()
            return message

        async def app_send(message: Message) -> None:
            nonlocal started
            # Before the send: the server reports a disconnect once a response is complete
            # too, and that one is no abandonment.
            started = True
            await send(message)

        async def watch(handling: anyio.CancelScope) -> None:
            await read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            if started:
                return  # answered, or an event stream (the SDK watches those itself)
            if not in_session:
                log.info("http.call_abandoned")
                handling.cancel()  # handled in this very task
                return
            request_id = _request_id(b"".join(kept)) if kept is not None else None
            if request_id is not None:  # (else a notification: nothing runs on)
                log.info("http.call_abandoned", request_id=request_id)
                await self._cancel_in_session(scope, request_id)

        try:
            async with anyio.create_task_group() as watching:
                with anyio.CancelScope() as handling:
                    watching.start_soon(watch, handling)
                    await self.app(scope, app_receive, app_send)
                watching.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The app's own exception as it raised it (the watcher raises none), for the
            # server's error handling and logs.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    async def _cancel_in_session(self, scope: Scope, request_id: Any) -> None:
        """Post `notifications/cancelled` for ``request_id`` to the app, as the request's own
        client would have (its headers: session, protocol version, accepted types)."""
        cancel = orjson.dumps({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the HTTP client closed its connection"},
        })  # fmt: skip
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(cancel)).encode()))
        sent = False

        async def cancel_receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": cancel, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def discard(_message: Message) -> None:
            pass

        # Shielded: the abandoned call may end meanwhile (its handler returns and this
        # middleware stops watching), and a half-posted cancellation would leave it running.
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_DEADLINE):
            await self.app({**scope, "headers": headers}, cancel_receive, discard)


def _request_id(body: bytes) -> Any:
    """The JSON-RPC id of the request in ``body`` (None: not a single request). Read as
    leniently as the SDK reads it (orjson refuses a bare `NaN`, Python's json does not)."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            message = json.loads(body)
        except ValueError:
            return None
    if isinstance(message, dict) and "method" in message and "id" in message:
        return message["id"]
    return None
