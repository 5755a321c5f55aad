"""The model gateway (agent_tools/models/gateway.py): a streaming reverse proxy on a Unix
socket, metering each call from the wire. The upstream here is a stand-in ASGI app (a model
API's wire format, scripted per test); the harnesses against the replay model are in
tests/test_harness_runs.py."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_tools.models import ModelGateway, gateway_client, model_time, upstream_url
from agent_tools.models.gateway import ModelCall
from agent_tools.models.usage import CallUsage
from agent_tools.servers import listen_local, serve_asgi

pytestmark = pytest.mark.anyio

KEY = "sk-real-key-never-written"
PLACEHOLDER = "leanrig-gateway-key"


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


START = _sse("message_start", {"type": "message_start", "message": {
    "id": "m1", "model": "stub-model", "usage": {
        "input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5,
        "output_tokens": 1}}})  # fmt: skip
DELTA = _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": "hi"}})  # fmt: skip
END = _sse(
    "message_delta",
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
) + _sse("message_stop", {"type": "message_stop"})


class Upstream:
    """A stand-in model API: answers /v1/messages with an event stream in three parts, the
    second released by ``release`` (so a test can see the first arrive alone)."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.seen: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.hung_up = anyio.Event()  # the gateway closed its connection to us
        self.hold = False  # never release: the test disconnects
        self.linger = False  # the whole answer, then the stream kept open until a hang-up

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        self.paths.append(scope["path"] + "?" + scope["query_string"].decode())
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
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
    upstream: Any, tmp: Path, *, key: str | None = KEY
) -> AsyncIterator[tuple[ModelGateway, httpx.AsyncClient]]:
    up = listen_local(0)
    url = f"http://127.0.0.1:{up.getsockname()[1]}"
    sock_path = tmp / "model.sock"
    async with gateway_client() as client, serving(upstream, up):
        gateway = ModelGateway(upstream=url, client=client, calls_path=tmp / "calls.jsonl",
                               placeholder=PLACEHOLDER, key=key)  # fmt: skip
        async with serving(gateway, unix_listener(sock_path)):
            transport = httpx.AsyncHTTPTransport(uds=str(sock_path))
            async with httpx.AsyncClient(transport=transport, base_url="http://agent") as agent:
                yield gateway, agent


REQUEST = {"model": "stub-model", "stream": True, "max_tokens": 10,
           "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip


async def test_an_event_stream_passes_through_chunk_by_chunk_and_is_metered(
    tmp_path: Path,
) -> None:
    upstream = Upstream()
    async with gateway_to(upstream, tmp_path) as (gateway, agent):
        headers = {"x-api-key": PLACEHOLDER, "anthropic-version": "2023-06-01"}
        async with agent.stream("POST", "/v1/messages?beta=true", json=REQUEST,
                                headers=headers) as response:  # fmt: skip
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
        await agent.post("/v1/messages", json=REQUEST,
                         headers={"authorization": f"Bearer {PLACEHOLDER}"})  # fmt: skip
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
        # (leaving the block closed the agent's connection mid-stream)
        with anyio.fail_after(10):
            await upstream.hung_up.wait()
            while not gateway.calls:
                await anyio.sleep(0.01)
    (call,) = gateway.calls
    assert not call.complete and call.error is not None and "closed" in call.error
    assert call.usage.input_tokens == 105  # what the wire said before the hang-up


async def test_an_agent_hanging_up_after_the_answer_s_end_event_got_the_whole_answer(
    tmp_path: Path,
) -> None:
    # Codex closes its connection on `response.completed`, before the stream's own end: the
    # call counted as broken off (complete: false) though the model had served all of it,
    # and a fresh clone's harness test found 4 answered calls against 5 served.
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
        gateway = ModelGateway(upstream=f"http://127.0.0.1:{port}", client=client,
                               calls_path=calls, placeholder=PLACEHOLDER)  # fmt: skip
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
        ("https://api.anthropic.com", "/v1/messages", "beta=true",
         "https://api.anthropic.com/v1/messages?beta=true"),
        ("https://api.openai.com/v1", "/v1/responses", "", "https://api.openai.com/v1/responses"),
        ("https://api.moonshot.ai/anthropic/", "/v1/messages", "",
         "https://api.moonshot.ai/anthropic/v1/messages"),
        ("http://127.0.0.1:9/v1", "/v1/chat/completions", "",
         "http://127.0.0.1:9/v1/chat/completions"),
    ],
)  # fmt: skip
def test_the_endpoint_and_the_request_path_join_as_each_vendor_expects(
    base: str, path: str, query: str, url: str
) -> None:
    assert upstream_url(base, path, query) == url


def _call(start: float, length: float) -> ModelCall:
    usage = CallUsage(None, None, None, None, None)
    return ModelCall(api=None, method="POST", path="/", status=200, model=None, streaming=None,
                     reasoning_effort=None, started=start, latency_s=length, ttft_s=None,
                     usage=usage, complete=True, request_bytes=0, response_bytes=0)  # fmt: skip


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 100)), max_size=20))
def test_model_time_counts_each_second_with_a_call_in_flight_once(
    spans: list[tuple[int, int]],
) -> None:
    covered = {t for a, n in spans for t in range(a, a + n)}  # unit slots [t, t+1)
    assert model_time([_call(a, n) for a, n in spans]) == pytest.approx(len(covered))


async def test_a_served_tcp_connection_sends_each_event_at_once() -> None:
    """Nagle's algorithm held every event after a connection's first answer until the client's
    delayed ACK: ~44 ms a call on keep-alive connections (bench gateway: 44 -> 1 ms). The
    listener's TCP_NODELAY is inherited by each connection it accepts."""
    listener = listen_local(0)
    async with serving(Upstream(), listener):
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
