"""`CancelAbandonedCalls` (agent_tools/servers/http_abandon.py) at its edges. The cancellation
itself runs against the real server and Lean in test_cancelled_steps.py; here stand-in ASGI
apps (named as such) play the SDK's paths a real request cannot reach on demand, and the real
`leanrig serve --http` answers what the middleware must not change."""

from __future__ import annotations

import socket
from collections.abc import MutableMapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from agent_tools.servers.http_abandon import CancelAbandonedCalls, _request_id
from tests.test_cancelled_steps import serving_on_a_port

pytestmark = pytest.mark.anyio

SCOPE: dict[str, Any] = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}


def client(*messages: dict[str, Any]) -> Any:
    """The connection: ``messages`` in order, then the client gone for good."""
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        await anyio.sleep(0.05)  # (a client that waits, then goes)
        return {"type": "http.disconnect"}

    return receive


BODY = {"type": "http.request", "body": b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}'}


async def test_a_stand_in_event_stream_is_left_to_its_own_disconnect_handling() -> None:
    """A response already streaming (the SDK's `subscriptions/listen`, its event streams) is
    the SDK's to end: the middleware does not cancel it (the review of the first version
    found each listen's end taken for an abandoned call)."""
    sent: list[MutableMapping[str, Any]] = []
    ended: list[str] = []

    async def stand_in_stream(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # the body
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
        assert (await receive())["type"] == "http.disconnect"  # its own watch
        await anyio.lowlevel.checkpoint()  # (a handling cancelled from outside ends here)
        ended.append("saw the disconnect")

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(5):
        await CancelAbandonedCalls(stand_in_stream)(SCOPE, client(BODY), send)
    assert ended == ["saw the disconnect"] and len(sent) == 2


async def test_a_stand_in_app_s_error_is_raised_as_itself() -> None:
    """Not wrapped in the watcher's task group (`ExceptionGroup`), so the server's error
    handling and logs see what the app raised."""

    async def stand_in_failing(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        raise RuntimeError("boom")

    async def send(message: MutableMapping[str, Any]) -> None:
        pass

    with pytest.raises(RuntimeError, match="boom"):
        await CancelAbandonedCalls(stand_in_failing)(SCOPE, client(BODY), send)


async def test_a_stand_in_stateless_call_is_cancelled_when_its_client_goes() -> None:
    cancelled: list[bool] = []

    async def stand_in_slow(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise

    async def send(message: MutableMapping[str, Any]) -> None:
        raise AssertionError("nothing is answered to a client that is gone")

    with anyio.fail_after(5):
        await CancelAbandonedCalls(stand_in_slow)(SCOPE, client(BODY), send)
    assert cancelled == [True]


def test_the_request_id_is_read_as_leniently_as_the_sdk_reads_a_body() -> None:
    """A body the SDK accepts (Python's json takes a bare NaN; orjson does not) still names
    the request its session must cancel."""
    assert _request_id(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":NaN}}') == 7
    assert _request_id(b'{"jsonrpc":"2.0","id":"a","method":"tools/call"}') == "a"
    assert _request_id(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') is None
    assert _request_id(b"[1, 2]") is None
    assert _request_id(b"{") is None


def test_an_oversized_body_is_refused_at_once_as_the_sdk_refuses_it() -> None:
    """A POST declaring a body over the SDK's 4 MiB limit gets its 413 before any of it is
    read (the first version read every body whole before the SDK saw it: a declared 100 MB
    body got no answer, and a sent one grew the server by its size)."""
    with serving_on_a_port("--http") as (_server, port):
        conn = socket.create_connection(("127.0.0.1", port), timeout=60)
        conn.settimeout(5)
        conn.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"Content-Length: {100 * 2**20}\r\n\r\n{{".encode()
        )
        status = conn.recv(1 << 16).split(b"\r\n", 1)[0]
        conn.close()
        assert b" 413 " in status, status
