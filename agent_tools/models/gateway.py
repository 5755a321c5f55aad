"""The model gateway: the one way from an attempt's agent to its model, owned by the run.

A streaming reverse proxy (an ASGI app; `asgi.serve_asgi` serves it on the attempt's Unix
socket, which a forwarder inside the agent's sandbox exposes on the sandbox's own loopback):
each request is forwarded to the upstream endpoint (``--model-endpoint``) as it came, the
answer passed back chunk by chunk as it arrives (server-sent events are not buffered), and the
call metered from the wire (`usage.WireMeter`: the API's own ``usage``, the first token) into
one ``model_calls.jsonl`` line per call.

The API key never reaches the agent: the agent is given a placeholder, and the gateway swaps
it for the key (from the runner's environment) in the authentication headers on the way out.
Neither the key nor the headers are written anywhere.

Must not: interpret or change a request's or an answer's body; retry (the harness decides);
hold a call past its deadlines.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2 as httpx
import orjson
import structlog

from .model_request import api_of, request_facts
from .usage import CallUsage, WireMeter

log = structlog.get_logger("leanrig.gateway")

MAX_REQUEST_BYTES: Final = 64 * 2**20
# Headers that belong to one connection (RFC 9110 §7.6.1), and what the proxy sets itself.
_HOP: Final = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
})  # fmt: skip
_AUTH: Final = ("x-api-key", "authorization", "api-key")
# Upstream deadlines: connecting, and the longest silence between two chunks of an answer (a
# reasoning model may think for minutes before its first token); the attempt's own time limit
# bounds the whole call.
UPSTREAM_TIMEOUT: Final = httpx.Timeout(connect=30.0, read=900.0, write=60.0, pool=30.0)
_UNKNOWN: Final = CallUsage(None, None, None, None, None)


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call as the gateway saw it (one line of ``model_calls.jsonl``)."""

    api: str | None  # anthropic-messages | openai-responses | openai-chat | None (other path)
    method: str
    path: str
    status: int | None  # None: no answer from upstream
    model: str | None
    streaming: bool | None
    reasoning_effort: str | None  # as the request asked (the harness's --reasoning on the wire)
    started: float  # epoch seconds
    latency_s: float  # request in until the answer's last byte out (or the failure)
    ttft_s: float | None  # until the chunk holding the first token
    usage: CallUsage
    complete: bool  # the whole answer reached the agent
    request_bytes: int
    response_bytes: int
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "v": 1, "ts": datetime.fromtimestamp(self.started, UTC).isoformat(),
            "api": self.api, "method": self.method, "path": self.path, "status": self.status,
            "model": self.model, "streaming": self.streaming,
            "reasoning_effort": self.reasoning_effort,
            "latency_s": round(self.latency_s, 4),
            "ttft_s": None if self.ttft_s is None else round(self.ttft_s, 4),
            **{k: v for k, v in self.usage.to_json().items() if k != "model"},
            "complete": self.complete,
            "request_bytes": self.request_bytes, "response_bytes": self.response_bytes,
            "error": self.error,
        }  # fmt: skip


def upstream_url(base: str, path: str, query: str) -> str:
    """``base`` (``--model-endpoint``) joined with the request's path: a base ending in
    ``/v1`` takes the path without its own ``/v1`` (Codex's providers name the ``/v1`` base,
    Anthropic's SDK the bare host), and the query string passes through."""
    base = base.rstrip("/")
    if base.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
        path = path[3:]
    return f"{base}{path}" + (f"?{query}" if query else "")


def forwarded_headers(
    headers: Iterable[tuple[bytes, bytes]], placeholder: str, key: str | None
) -> list[tuple[str, str]]:
    """The request's headers for upstream: hop-by-hop ones dropped, the answer asked
    unencoded (the meter reads it), and the placeholder key swapped for ``key`` in the
    authentication headers (left as it is without a key: a local endpoint needs none)."""
    out: list[tuple[str, str]] = []
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        if name in _HOP:
            continue
        value = raw_value.decode("latin-1")
        if name in _AUTH and key is not None:
            value = value.replace(placeholder, key)
        out.append((name, value))
    out.append(("accept-encoding", "identity"))
    return out


def _answer_headers(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    return [
        (k.encode("latin-1"), v.encode("latin-1"))
        for k, v in headers.multi_items()
        if k.lower() not in _HOP
    ]


def model_time(calls: Iterable[ModelCall]) -> float:
    """Seconds during which at least one call was in flight (calls that overlap count once)."""
    spans = sorted((c.started, c.started + c.latency_s) for c in calls)
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


@dataclass(slots=True)
class ModelGateway:
    """An ASGI app forwarding to ``upstream`` and metering each call (``calls``, and one line
    per call appended to ``calls_path``)."""

    upstream: str
    client: httpx.AsyncClient
    calls_path: Path
    placeholder: str
    key: str | None = None
    calls: list[ModelCall] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        started, t0 = time.time(), time.perf_counter()
        path: str = scope["path"]
        method: str = scope["method"]
        api = api_of(path)
        body = await self._body(receive)
        if body is None:
            await _error(send, 413, "the request is larger than the gateway takes")
            return
        facts = request_facts(api, body) if api is not None else None
        url = upstream_url(self.upstream, path, scope.get("query_string", b"").decode("latin-1"))
        request = self.client.build_request(
            method, url, headers=forwarded_headers(scope["headers"], self.placeholder, self.key),
            content=body,
        )  # fmt: skip
        meter = WireMeter(api) if api is not None else None
        status: int | None = None
        ttft: float | None = None
        sent = 0
        complete = False
        error: str | None = None
        try:
            with anyio.CancelScope() as call:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_cancel_on_disconnect, receive, call)
                    try:
                        response = await self.client.send(request, stream=True)
                    except httpx.HTTPError as exc:
                        error = f"cannot reach the model endpoint: {type(exc).__name__}: {exc}"
                        await _error(send, 502, f"leanrig gateway: {error}")
                        tg.cancel_scope.cancel()
                        return
                    try:
                        status = response.status_code
                        if meter is not None:
                            meter.content_type(response.headers.get("content-type", ""))
                        await send({
                            "type": "http.response.start", "status": status,
                            "headers": _answer_headers(response.headers),
                        })  # fmt: skip
                        async for chunk in response.aiter_raw():
                            if meter is not None and meter.feed(chunk) and ttft is None:
                                ttft = time.perf_counter() - t0
                            sent += len(chunk)
                            await send({"type": "http.response.body", "body": chunk,
                                        "more_body": True})  # fmt: skip
                            # The API's end event reached the agent: the answer is whole,
                            # and the agent may hang up before the stream's own end (Codex
                            # closes on `response.completed`).
                            complete = complete or (meter is not None and meter.ended)
                        await send({"type": "http.response.body", "body": b""})
                        complete = True
                    except httpx.HTTPError as exc:
                        error = f"the answer broke off: {type(exc).__name__}: {exc}"
                    finally:
                        with anyio.CancelScope(shield=True):
                            await response.aclose()
                    tg.cancel_scope.cancel()
            if call.cancelled_caught and not complete:
                error = "the agent closed its connection before the answer ended"
        finally:
            usage = meter.finish() if meter is not None else _UNKNOWN
            record = ModelCall(
                api=api, method=method, path=path, status=status,
                model=usage.model or (facts.model if facts is not None else None),
                streaming=facts.stream if facts is not None else None,
                reasoning_effort=facts.reasoning_effort if facts is not None else None,
                started=started,
                latency_s=time.perf_counter() - t0, ttft_s=ttft, usage=usage,
                complete=complete, request_bytes=len(body), response_bytes=sent, error=error,
            )  # fmt: skip
            self.calls.append(record)
            _append_line(self.calls_path, record.to_json())

    async def _body(self, receive: Any) -> bytes | None:
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_REQUEST_BYTES:
                return None
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(parts)


async def _cancel_on_disconnect(receive: Any, scope: anyio.CancelScope) -> None:
    """The agent hung up (killed at its limit, or it gave up): the upstream call ends too."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _error(send: Any, status: int, message: str) -> None:
    # Both APIs' clients read an `error.message`; Anthropic's also an `error.type`.
    body = orjson.dumps({"type": "error", "error": {"type": "api_error", "message": message}})
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


def _append_line(path: Path, record: dict[str, Any]) -> None:
    """One ``O_APPEND`` write per line (parallel calls never interleave inside a line)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, orjson.dumps(record) + b"\n")
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("gateway.calls_unwritable", path=str(path), error=str(exc))


def gateway_client() -> httpx.AsyncClient:
    """The run's one upstream client (connections kept alive across attempts), no
    environment proxies or netrc read implicitly beyond httpx's defaults for the endpoint."""
    return httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT, follow_redirects=False)


__all__ = [
    "MAX_REQUEST_BYTES",
    "ModelCall",
    "ModelGateway",
    "forwarded_headers",
    "gateway_client",
    "model_time",
    "upstream_url",
]
