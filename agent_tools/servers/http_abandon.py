"""MCP over HTTP: a call whose client closed its connection is cancelled, not run on.

An HTTP client gives up on a call by closing its connection (the 2026-07-28 revision says so
outright: there is no other cancellation on that wire). The SDK's streamable-HTTP app notices
only on its event-stream path; leanrig answers calls as JSON bodies (mcp_server.py), where
the SDK's handler never reads the connection again — an abandoned `set_proof` whose
elaboration ran away kept a Lean worker at a full core until the step's deadline, and the
session's next call queued behind it. ``CancelAbandonedCalls`` wraps the SDK's app and, once
a POST's body is read, watches its connection:

- a stateless (2026-07-28) request is handled in the ASGI task: its handling is cancelled;
- a request of a session (`Mcp-Session-Id`, the handshake revisions) runs in that session's
  own tasks: it gets what its client would have sent, `notifications/cancelled` for its id,
  posted to the same app with the request's own headers.

Either way the tool sees the cancellation a stdio client's `notifications/cancelled` causes
(the pool stops the step's Lean work, the session stays usable). Written here rather than
taken from a library: it must know which of the SDK's two dispatch paths a request takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import orjson
import structlog

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = structlog.get_logger("leanrig.http")

SESSION_HEADER = b"mcp-session-id"
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
        chunks: list[bytes] = []
        while True:  # the whole body first: the app reads it from us
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone before the request was complete: nothing was asked
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        gone = anyio.Event()
        given = answered = False

        async def app_receive() -> Message:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def app_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                # Before the send: the server reports a disconnect once the response is
                # complete too, and that one is no abandonment.
                answered = True
            await send(message)

        async with anyio.create_task_group() as watching:
            with anyio.CancelScope() as handling:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    gone.set()
                    request_id = _request_id(body)
                    if answered or request_id is None:
                        return  # answered, or a notification: nothing runs on
                    log.info("http.call_abandoned", request_id=request_id)
                    session = dict(scope["headers"]).get(SESSION_HEADER)
                    if session is None:
                        handling.cancel()  # stateless: handled in this very task
                    else:
                        await self._cancel_in_session(scope, request_id)

                watching.start_soon(watch)
                await self.app(scope, app_receive, app_send)
            watching.cancel_scope.cancel()

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
    """The JSON-RPC id of the request in ``body`` (None: not a single request)."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(message, dict) and "method" in message and "id" in message:
        return message["id"]
    return None
