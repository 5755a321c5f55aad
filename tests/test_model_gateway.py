"""The model gateway: a streaming reverse proxy on a Unix socket, metering each call from the
wire, against a scripted stand-in model API (tests/test_harness_runs.py has the replay model)."""

from __future__ import annotations

import gc
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import orjson
import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_tools.models import CallUsage, ModelGateway, gateway_client, model_time, upstream_url
from agent_tools.models.gateway import (
    MAX_REQUEST_BYTES,
    ModelCall,
    RequestRefused,
    checked_path,
    count_kinds,
)
from agent_tools.runs.model_access import gateway_usage
from agent_tools.servers import listen_local, serve_asgi

pytestmark = pytest.mark.anyio

KEY = "sk-real-key-never-written"
PLACEHOLDER = "leanrig-gateway-key"


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


START = _sse(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "m1",
            "model": "stub-model",
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 90,
                "cache_creation_input_tokens": 5,
                "output_tokens": 1,
            },
        },
    },
)
DELTA = _sse(
    "content_block_delta",
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
)
END = _sse(
    "message_delta",
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
) + _sse("message_stop", {"type": "message_stop"})


class Upstream:
    """/v1/messages answers an event stream in three parts, the second sent on ``release``."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.seen: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.hung_up = anyio.Event()  # the gateway closed its connection to us
        self.hold = False  # never release: the test disconnects
        self.linger = False  # the whole answer, then the stream kept open until a hang-up
        self.json = False  # one JSON answer, its body sent on ``release``

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        self.paths.append(scope["path"] + "?" + scope["query_string"].decode())
        while (await receive()).get("more_body"):
            pass
        if self.json:
            await self._answer_json(send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": START, "more_body": True})
        if self.hold:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.hung_up.set()
            return
        await self.release.wait()
        await send({"type": "http.response.body", "body": DELTA, "more_body": True})
        await send({"type": "http.response.body", "body": END, "more_body": self.linger})
        if self.linger:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.hung_up.set()

    async def _answer_json(self, send: Any) -> None:
        body = MESSAGE
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await self.release.wait()
        await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def serving(app: Any, listener: socket.socket) -> AsyncIterator[None]:
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        ready = anyio.Event()
        tg.start_soon(serve_asgi, app, listener, stop, ready.set)
        with anyio.fail_after(10):
            await ready.wait()
        yield
        stop.set()


def unix_listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(16)
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def gateway_to(
    upstream: Any, tmp: Path, *, key: str | None = KEY, **limits: Any
) -> AsyncIterator[tuple[ModelGateway, httpx.AsyncClient]]:
    up = listen_local(0)
    url = f"http://127.0.0.1:{up.getsockname()[1]}"
    sock_path = tmp / "model.sock"
    async with gateway_client() as client, serving(upstream, up):
        gateway = ModelGateway(
            upstream=url,
            client=client,
            calls_path=tmp / "calls.jsonl",
            placeholder=PLACEHOLDER,
            key=key,
            **limits,
        )
        async with serving(gateway, unix_listener(sock_path)):
            transport = httpx.AsyncHTTPTransport(uds=str(sock_path))
            async with httpx.AsyncClient(transport=transport, base_url="http://agent") as agent:
                yield gateway, agent


REQUEST = {
    "model": "stub-model",
    "stream": True,
    "max_tokens": 10,
    "messages": [{"role": "user", "content": "hi"}],
}


async def test_an_event_stream_passes_through_chunk_by_chunk_and_is_metered(
    tmp_path: Path,
) -> None:
    upstream = Upstream()
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        headers = {"x-api-key": PLACEHOLDER, "anthropic-version": "2023-06-01"}
        async with agent.stream(
            "POST", "/v1/messages?beta=true", json=REQUEST, headers=headers
        ) as response:
            assert response.status_code == 200
            chunks = response.aiter_raw()
            with anyio.fail_after(10):
                first = await anext(chunks)
            # The upstream has not sent the rest yet: the first part arrived on its own.
            assert first == START
            upstream.release.set()
            rest = b"".join([c async for c in chunks])
        assert first + rest == START + DELTA + END
    (call,) = gateway.calls
    assert call.status == 200 and call.complete and call.api == "anthropic-messages"
    assert call.usage.input_tokens == 105 and call.usage.cached_input_tokens == 90
    assert call.usage.output_tokens == 7 and call.model == "stub-model"
    assert call.ttft_s is not None and call.ttft_s <= call.latency_s
    (line,) = (tmp_path / "calls.jsonl").read_bytes().splitlines()
    record = orjson.loads(line)
    assert record["input_tokens"] == 105 and record["output_tokens"] == 7
    assert record["path"] == "/v1/messages" and record["streaming"] is True
    assert upstream.paths == ["/v1/messages?beta=true"]


async def test_the_key_is_swapped_in_on_the_way_out_and_written_nowhere(tmp_path: Path) -> None:
    upstream = Upstream()
    upstream.release.set()
    async with gateway_to(upstream, tmp_path) as (_, agent):
        await agent.post("/v1/messages", json=REQUEST, headers={"x-api-key": PLACEHOLDER})
        await agent.post(
            "/v1/messages", json=REQUEST, headers={"authorization": f"Bearer {PLACEHOLDER}"}
        )
    assert upstream.seen[0]["x-api-key"] == KEY
    assert upstream.seen[1]["authorization"] == f"Bearer {KEY}"
    assert all(h.get("accept-encoding") == "identity" for h in upstream.seen)
    assert KEY.encode() not in (tmp_path / "calls.jsonl").read_bytes()


async def test_without_a_key_the_agent_s_headers_pass_as_they_are(tmp_path: Path) -> None:
    upstream = Upstream()
    upstream.release.set()
    async with gateway_to(upstream, tmp_path, key=None) as (_, agent):
        await agent.post("/v1/messages", json=REQUEST, headers={"x-api-key": PLACEHOLDER})
    assert upstream.seen[0]["x-api-key"] == PLACEHOLDER


async def test_an_agent_hanging_up_mid_answer_ends_the_upstream_call(tmp_path: Path) -> None:
    upstream = Upstream()
    upstream.hold = True
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        async with agent.stream("POST", "/v1/messages", json=REQUEST) as response:
            with anyio.fail_after(10):
                await anext(response.aiter_raw())
        # leaving the block closed the agent's connection mid-stream
        with anyio.fail_after(10):
            await upstream.hung_up.wait()
            while not gateway.calls:
                await anyio.sleep(0.01)
    (call,) = gateway.calls
    assert not call.complete and call.error is not None and "closed" in call.error
    assert call.usage.input_tokens == 105  # what the wire said before the hang-up


async def test_an_agent_hanging_up_before_a_json_answer_s_body_still_has_it_metered(
    tmp_path: Path,
) -> None:
    # The upstream generated (and bills) the whole answer before its headers: hanging up after
    # them must not hide the call's tokens.
    upstream = Upstream()
    upstream.json = True
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        async with agent.stream("POST", "/v1/messages", json=REQUEST) as response:
            assert response.status_code == 200
        # leaving the block closed the agent's connection before the body came
        await anyio.sleep(0.2)
        upstream.release.set()
        with anyio.fail_after(10):
            while not gateway.calls:
                await anyio.sleep(0.01)
    (call,) = gateway.calls
    assert not call.complete and call.error is not None and "closed" in call.error
    assert call.usage.input_tokens == 10 and call.usage.output_tokens == 5
    assert gateway_usage(gateway).input_tokens == 10


async def test_an_agent_hanging_up_after_the_answer_s_end_event_got_the_whole_answer(
    tmp_path: Path,
) -> None:
    # As Codex does: the connection closes on `response.completed`, before the stream's end.
    upstream = Upstream()
    upstream.release.set()
    upstream.linger = True
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        async with agent.stream("POST", "/v1/messages", json=REQUEST) as response:
            seen = b""
            with anyio.fail_after(10):
                async for chunk in response.aiter_raw():
                    seen += chunk
                    if b"message_stop" in seen:
                        break
        with anyio.fail_after(10):
            await upstream.hung_up.wait()
            while not gateway.calls:
                await anyio.sleep(0.01)
    (call,) = gateway.calls
    assert call.complete and call.error is None
    assert call.usage.output_tokens == 7


async def test_an_unreachable_endpoint_is_a_502_in_the_api_s_error_shape(tmp_path: Path) -> None:
    closed = listen_local(0)
    port = closed.getsockname()[1]
    closed.close()
    sock_path = tmp_path / "model.sock"
    async with gateway_client() as client:
        calls = tmp_path / "calls.jsonl"
        gateway = ModelGateway(
            upstream=f"http://127.0.0.1:{port}",
            client=client,
            calls_path=calls,
            placeholder=PLACEHOLDER,
        )
        async with serving(gateway, unix_listener(sock_path)):
            transport = httpx.AsyncHTTPTransport(uds=str(sock_path))
            async with httpx.AsyncClient(transport=transport, base_url="http://a") as agent:
                response = await agent.post("/v1/responses", json={"model": "m"})
    assert response.status_code == 502
    assert "cannot reach the model endpoint" in response.json()["error"]["message"]
    (call,) = gateway.calls
    assert call.status is None and call.error is not None and call.api == "openai-responses"


@pytest.mark.parametrize(
    ("base", "path", "query", "url"),
    [
        (
            "https://api.anthropic.com",
            "/v1/messages",
            "beta=true",
            "https://api.anthropic.com/v1/messages?beta=true",
        ),
        ("https://api.openai.com/v1", "/v1/responses", "", "https://api.openai.com/v1/responses"),
        (
            "https://api.moonshot.ai/anthropic/",
            "/v1/messages",
            "",
            "https://api.moonshot.ai/anthropic/v1/messages",
        ),
        (
            "http://127.0.0.1:9/v1",
            "/v1/chat/completions",
            "",
            "http://127.0.0.1:9/v1/chat/completions",
        ),
    ],
)
def test_the_endpoint_and_the_request_path_join_as_each_vendor_expects(
    base: str, path: str, query: str, url: str
) -> None:
    assert upstream_url(base, path, query) == url


def _call(start: float, length: float) -> ModelCall:
    usage = CallUsage(None, None, None, None, None)
    return ModelCall(
        api=None,
        method="POST",
        path="/",
        status=200,
        model=None,
        streaming=None,
        reasoning_effort=None,
        started=start,
        latency_s=length,
        ttft_s=None,
        usage=usage,
        complete=True,
        request_bytes=0,
        response_bytes=0,
    )


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 100)), max_size=20))
def test_model_time_counts_each_second_with_a_call_in_flight_once(
    spans: list[tuple[int, int]],
) -> None:
    covered = {t for a, n in spans for t in range(a, a + n)}  # unit slots [t, t+1)
    assert model_time([_call(a, n) for a, n in spans]) == pytest.approx(len(covered))


async def test_a_served_tcp_connection_sends_each_event_at_once() -> None:
    """Accepted connections inherit the listener's TCP_NODELAY."""
    listener = listen_local(0)
    async with serving(Upstream(), listener):
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


# -- the gateway as a model gateway: routes, limits, refusals (the agent is untrusted) --------

MODELS_LIST = orjson.dumps({"object": "list", "data": [{"id": "stub-model", "object": "model"}]})
USAGE = {
    "input_tokens": 10,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
    "output_tokens": 5,
}
MESSAGE = orjson.dumps({"id": "m1", "type": "message", "model": "stub-model", "usage": USAGE})
MESSAGE_NO_USAGE = orjson.dumps({"id": "m2", "type": "message", "model": "stub-model"})


class Recorder:
    """Answers JSON (``answer``, if given), recording each request's method and raw target."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes]] = []
        self.answer = MESSAGE

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        self.seen.append((scope["method"], scope.get("raw_path", b"")))
        while (await receive()).get("more_body"):
            pass
        body = MODELS_LIST if "/models" in scope["path"] else self.answer
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


CHUNK = b"x" * 2**16


async def raw_call(
    sock: Path,
    method: bytes,
    target: bytes,
    *,
    declared: int | None = None,
    streamed: int | None = None,
) -> tuple[int, bytes]:
    """One request sent byte for byte, its body until the answer comes: status and body."""
    head = method + b" " + target + b" HTTP/1.1\r\nhost: agent\r\n"
    if declared is not None:
        head += b"content-length: %d\r\n" % declared
    if streamed is not None:
        head += b"transfer-encoding: chunked\r\n"
    async with await anyio.connect_unix(sock) as stream:

        async def send_body() -> None:
            size = declared if declared is not None else streamed or 0
            piece = CHUNK if declared is not None else b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
            try:
                for _ in range(size // len(CHUNK)):
                    await stream.send(piece)
                if streamed is not None:
                    await stream.send(b"0\r\n\r\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the gateway hung up

        async with anyio.create_task_group() as tg:
            await stream.send(head + b"\r\n")
            tg.start_soon(send_body)
            answer = await _read_answer(stream, body=method != b"HEAD")
            tg.cancel_scope.cancel()
    return answer


async def _read_answer(stream: Any, *, body: bool = True) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        None,
    )
    while body and length is not None and len(rest) < length:
        rest += await stream.receive()
    return status, rest


def _refused_lines(path: Path) -> list[dict[str, Any]]:
    return [r for r in map(orjson.loads, path.read_bytes().splitlines()) if r["status"] != 200]


@pytest.mark.parametrize(
    "target",
    [
        b"/v1/%2e%2e/%2e%2e/x",
        b"/v1/%2E%2E/messages",
        b"/v1/../x",
        b"/v1/./messages",
        b"//x",
        b"//v1/messages",
        b"/v1//messages",
        b"/v1/messages/",
        b"/v1/messages%2f..",
        b"/v1/messages%2F..%2Fx",
        b"/v1%2fmessages",
        b"/v1/%5cmessages",
        b"/v1\\messages",
        b"/v1/messages%0d%0aX-Injected:%201",
        b"/v1/%0d%0a",
        b"/v1/mess%00ages",
        b"/v1/messages%ff",
        b"/v1/caf%c3%a9",
        b"/v1/%zz",
        b"/v1/messages%",
        b"/v1/models/%252e%252e",
        b"/v1/models/a%20b",
        b"/v1/models/a%3Fb",
        b"/v1/models/a%23b",
    ],
)
async def test_a_path_that_bends_the_route_is_a_400_never_forwarded_and_metered(
    tmp_path: Path, target: bytes
) -> None:
    """Dot/empty segments, encoded slashes, backslashes, control bytes, non-ASCII, bad escapes."""
    upstream = Recorder()
    async with gateway_to(upstream, tmp_path) as (gateway, _):
        with anyio.fail_after(10):
            status, body = await raw_call(tmp_path / "model.sock", b"POST", target, declared=2)
    assert status == 400 and "path" in orjson.loads(body)["error"]["message"]
    assert upstream.seen == []
    (line,) = _refused_lines(tmp_path / "calls.jsonl")
    assert line["status"] == 400 and line["kind"] == "refused" and line["api"] is None
    assert line["error"] and gateway.calls[0].kind == "refused"


@pytest.mark.parametrize(
    ("method", "target", "status"),
    [
        (b"GET", b"/admin", 404),
        (b"GET", b"/", 404),
        (b"POST", b"/v1/files", 404),
        (b"POST", b"/v1/completions", 404),
        (b"GET", b"/v1/responses/resp_1", 404),
        (b"POST", b"/v1/threads/t1/messages", 404),
        (b"GET", b"/v1/models/a:b/c", 404),
        (b"DELETE", b"/v1/messages", 405),
        (b"GET", b"/v1/messages", 405),
        (b"PUT", b"/v1/responses", 405),
        (b"POST", b"/v1/models", 405),
        (b"HEAD", b"/v1/chat/completions", 405),
    ],
)
async def test_a_route_outside_the_model_apis_is_refused_and_metered(
    tmp_path: Path, method: bytes, target: bytes, status: int
) -> None:
    """An unknown route is a 404, a model route with another method a 405."""
    upstream = Recorder()
    async with gateway_to(upstream, tmp_path) as (gateway, _):
        with anyio.fail_after(10):
            got, _body = await raw_call(tmp_path / "model.sock", method, target)
    assert got == status and upstream.seen == []
    (call,) = gateway.calls
    assert call.status == status and call.kind == "refused" and call.api is None and call.error
    (line,) = _refused_lines(tmp_path / "calls.jsonl")
    assert line["kind"] == "refused" and line["status"] == status


@pytest.mark.parametrize(
    ("method", "path", "kind"),
    [
        ("POST", "/v1/messages?beta=true", "model"),  # Claude Code
        ("POST", "/v1/messages/count_tokens?beta=true", "other"),
        ("POST", "/v1/responses", "model"),  # Codex (base URL: the gateway's + /v1)
        ("POST", "/responses", "model"),
        ("POST", "/v1/chat/completions", "model"),
        ("GET", "/v1/models", "other"),
        ("GET", "/v1/models?limit=1000", "other"),
        ("GET", "/v1/models/claude-sonnet-4-5-20250929", "other"),
        ("GET", "/v1/models/ft%3Agpt-4o%3Aorg%3Aid", "other"),
    ],
)
async def test_the_model_apis_routes_are_forwarded(
    tmp_path: Path, method: str, path: str, kind: str
) -> None:
    """As asked, each metering line saying whether it was a model call."""
    upstream = Recorder()
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        response = await agent.request(method, path, json=REQUEST if method == "POST" else None)
    assert response.status_code == 200
    assert [m for m, _ in upstream.seen] == [method]
    (call,) = gateway.calls
    assert call.kind == kind and call.status == 200
    (line,) = map(orjson.loads, (tmp_path / "calls.jsonl").read_bytes().splitlines())
    assert line["kind"] == kind


async def test_a_non_model_call_never_erases_the_attempt_s_tokens(tmp_path: Path) -> None:
    async with gateway_to(Recorder(), tmp_path) as (gateway, agent):
        assert (await agent.get("/v1/models")).status_code == 200
        assert (await agent.post("/v1/messages", json=REQUEST)).status_code == 200
        await raw_call(tmp_path / "model.sock", b"GET", b"/v1/%2e%2e/admin")
    usage = gateway_usage(gateway)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (10, 0, 5)
    assert count_kinds(gateway.calls) == {"model": 1, "other": 1, "refused": 1}


async def test_a_model_call_with_unknown_usage_still_makes_the_total_unknown(
    tmp_path: Path,
) -> None:
    upstream = Recorder()
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        await agent.get("/v1/models")
        await agent.post("/v1/messages", json=REQUEST)
        upstream.answer = MESSAGE_NO_USAGE
        await agent.post("/v1/messages", json=REQUEST)
    assert gateway_usage(gateway).input_tokens is None
    assert gateway_usage(gateway).output_tokens is None


async def test_a_declared_body_over_the_limit_is_a_413_before_it_is_read(tmp_path: Path) -> None:
    """Not forwarded, metered; a client sending its body before reading gets the 413 too."""
    upstream = Recorder()
    async with gateway_to(upstream, tmp_path, max_request_bytes=2**20) as (gateway, agent):
        sock = tmp_path / "model.sock"
        with anyio.fail_after(10):
            head = b"POST /v1/messages HTTP/1.1\r\nhost: a\r\ncontent-length: %d\r\n\r\n"
            async with await anyio.connect_unix(sock) as stream:
                await stream.send(head % (2**20 + 1))
                status, body = await _read_answer(stream)
            whole = await agent.post("/v1/messages", content=b"x" * (4 * 2**20))
    assert status == 413 and "Content-Length" in orjson.loads(body)["error"]["message"]
    assert whole.status_code == 413 and whole.json()["error"]["type"] == "request_too_large"
    assert upstream.seen == []
    assert [(c.status, c.kind) for c in gateway.calls] == [(413, "refused")] * 2
    assert all(c.error for c in gateway.calls)


async def test_a_streamed_body_over_the_limit_is_a_413(tmp_path: Path) -> None:
    """A chunked body: not forwarded, metered; one within the limit is forwarded whole."""
    upstream = Recorder()
    async with gateway_to(upstream, tmp_path, max_request_bytes=2**20) as (gateway, _):
        sock = tmp_path / "model.sock"
        with anyio.fail_after(10):
            over = await raw_call(sock, b"POST", b"/v1/messages", streamed=2 * 2**20)
            within = await raw_call(sock, b"POST", b"/v1/messages", streamed=2**19)
    assert over[0] == 413 and within[0] == 200
    assert len(upstream.seen) == 1
    assert [(c.status, c.kind) for c in gateway.calls] == [(413, "refused"), (200, "model")]
    assert gateway.calls[1].request_bytes == 2**19


async def test_a_call_beyond_max_concurrent_waits_for_a_slot_then_gets_429(tmp_path: Path) -> None:
    """It waits up to ``slot_wait_s``: through if a slot frees in time, else a metered 429."""
    upstream = Upstream()
    limits: dict[str, Any] = {"max_concurrent": 1, "slot_wait_s": 1.0}
    waited: list[int] = []
    async with (
        gateway_to(upstream, tmp_path, **limits) as (gw, agent),
        agent.stream("POST", "/v1/messages", json=REQUEST) as first,
    ):
        chunks = first.aiter_raw()  # kept: a dropped iterator closes the stream
        with anyio.fail_after(10):
            await anext(chunks)  # in flight, holding the one slot
            refused = await agent.post("/v1/messages", json=REQUEST)
        assert refused.status_code == 429 and "retry-after" in refused.headers

        async def second() -> None:
            waited.append((await agent.post("/v1/messages", json=REQUEST)).status_code)

        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            await anyio.sleep(0.1)
            upstream.release.set()
            assert b"".join([c async for c in chunks]) == DELTA + END
    assert waited == [200]
    assert [c.status for c in gw.calls] == [429, 200, 200]
    assert gw.calls[0].kind == "refused" and len(upstream.paths) == 2


class Exploding:
    def build_request(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")


async def test_an_unexpected_failure_is_a_500_in_the_api_s_shape_and_still_metered(
    tmp_path: Path,
) -> None:
    sock_path = tmp_path / "model.sock"
    client: Any = Exploding()
    gateway = ModelGateway(
        upstream="http://127.0.0.1:9",
        client=client,
        calls_path=tmp_path / "calls.jsonl",
        placeholder=PLACEHOLDER,
    )
    async with serving(gateway, unix_listener(sock_path)):
        transport = httpx.AsyncHTTPTransport(uds=str(sock_path))
        async with httpx.AsyncClient(transport=transport, base_url="http://a") as agent:
            response = await agent.post("/v1/messages", json=REQUEST)
    assert response.status_code == 500 and response.json()["error"]["message"]
    (line,) = map(orjson.loads, (tmp_path / "calls.jsonl").read_bytes().splitlines())
    assert line["status"] == 500 and "RuntimeError" in line["error"]


OVERSIZED = 60 * 2**20


async def test_oversized_posts_leave_the_process_s_memory_flat(tmp_path: Path) -> None:
    """Concurrent posts declaring or streaming 60 MiB: each a metered 413, memory near flat."""
    process = psutil.Process()
    upstream = Recorder()
    peak = 0
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        await agent.get("/v1/models")  # the serving's own allocations, before the baseline
        gc.collect()
        base = process.memory_info().rss
        statuses: list[int] = []

        async def post(**size: int) -> None:
            status, _ = await raw_call(tmp_path / "model.sock", b"POST", b"/v1/messages", **size)
            statuses.append(status)

        async with anyio.create_task_group() as tg:

            async def sample() -> None:
                nonlocal peak
                while True:
                    peak = max(peak, process.memory_info().rss - base)
                    if peak > 512 * 2**20:  # unbounded buffering: stop before the machine's
                        tg.cancel_scope.cancel()
                    await anyio.sleep(0.005)

            tg.start_soon(sample)
            with anyio.fail_after(60):
                async with anyio.create_task_group() as posts:
                    for _ in range(12):
                        posts.start_soon(partial(post, declared=OVERSIZED))
                    for _ in range(4):
                        posts.start_soon(partial(post, streamed=OVERSIZED))
            tg.cancel_scope.cancel()
    assert peak < 4 * MAX_REQUEST_BYTES + 16 * 2**20, f"RSS grew {peak / 2**20:.0f} MiB"
    assert statuses == [413] * 16 and upstream.seen[1:] == []
    assert [c.status for c in gateway.calls[1:]] == [413] * 16
    assert all(c.kind == "refused" and c.error for c in gateway.calls[1:])


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        (b"/v1/caf\xc3\xa9", True),
        (b"/v1/mess ages", True),
        (b"v1/messages", True),
        (b"/v1/messages#x", True),
        (b"/v1/messages\\..", True),
        (b"", True),
        (b"/v1/models/a%2e", False),
        (b"/v1/../messages", False),
    ],
)
def test_a_path_no_http_parser_stopped_is_refused_by_the_gateway_itself(
    raw: bytes, encoded: bool
) -> None:
    """Raw non-ASCII, a space, or a path decoded already (no ``raw_path``)."""
    with pytest.raises(RequestRefused) as refused:
        checked_path(raw, encoded=encoded)
    assert refused.value.status == 400


def test_a_clean_path_is_kept_as_it_came() -> None:
    assert checked_path(b"/v1/messages") == "/v1/messages"
    assert checked_path(b"/v1/models/ft%3Agpt-4o%3Aorg") == "/v1/models/ft:gpt-4o:org"
    assert checked_path(b"/v1/messages", encoded=False) == "/v1/messages"
