"""The model gateway: a streaming, metering reverse proxy from an attempt's agent to its model.

Forwards only the model APIs' routes, writes one ``model_calls.jsonl`` line per request (refusals
too) and swaps the agent's placeholder key for the real one. Must not: change a forwarded body,
retry, or write the key or headers anywhere."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import unquote_to_bytes

import anyio
import httpx2 as httpx
import orjson
import structlog

from lsp_bridge import LeanrigError

from .model_io import AnswerCapture, append_io_line, io_line
from .model_request import Api, RequestFacts, api_of, request_facts
from .usage import CallUsage, WireMeter

log = structlog.get_logger("leanrig.gateway")

MAX_REQUEST_BYTES: Final = 8 * 2**20
"""The largest request body forwarded by default; a larger one is a 413."""
MAX_CONCURRENT: Final = 8
"""Calls in flight at once per attempt by default (`ModelGateway.max_concurrent`)."""
SLOT_WAIT_S: Final = 30.0
"""How long a call beyond ``max_concurrent`` waits for a free slot by default, then 429."""
METER_AFTER_HANG_UP_S: Final = 10.0
"""How long a JSON answer is still read, to meter it, after its agent hung up."""
# Hop-by-hop headers (RFC 9110 §7.6.1) and those the proxy sets itself.
_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
_AUTH: Final = ("x-api-key", "authorization", "api-key")
# A reasoning model may think for minutes before its first token; the attempt's limit bounds all.
UPSTREAM_TIMEOUT: Final = httpx.Timeout(connect=30.0, read=900.0, write=60.0, pool=30.0)
_UNKNOWN: Final = CallUsage(None, None, None, None, None)

CallKind = Literal["model", "other", "refused"]
# Path segments past an optional `/v1` -> the one method allowed.
_ROUTES: Final[Mapping[tuple[str, ...], str]] = {
    ("messages",): "POST",
    ("messages", "count_tokens"): "POST",
    ("responses",): "POST",
    ("chat", "completions"): "POST",
    ("models",): "GET",
}
_MODEL_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+~-]{0,199}")
# A decoded segment may not hold `/` or `%`: it would mean another path upstream.
_RAW_PATH: Final = re.compile(rb"[A-Za-z0-9._~!$&'()*+,;=:@/%-]*")
_SEGMENT: Final = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@-]+")
_ESCAPE: Final = re.compile(rb"%(?![0-9A-Fa-f]{2})")  # a `%` not followed by two hex digits
_QUERY: Final = re.compile(rb"[\x21-\x22\x24-\x7e]*")  # printable ASCII but `#`
_SHOWN: Final = 256  # characters of a refused request's target kept in its line
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


class RequestRefused(LeanrigError):
    """A request the gateway answers itself with ``status`` (never forwarded)."""

    def __init__(self, status: int, reason: str, headers: Iterable[tuple[bytes, bytes]] = ()):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = list(headers)


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One request as the gateway saw it: one line of ``model_calls.jsonl``."""

    api: str | None  # anthropic-messages | openai-responses | openai-chat | None (no model call)
    method: str
    path: str  # the decoded path; a refused request's target as it came (cut short)
    status: int | None  # None: no answer from upstream
    model: str | None
    streaming: bool | None
    reasoning_effort: str | None  # as the request asked
    started: float  # epoch seconds
    latency_s: float  # request in until the answer's last byte out
    ttft_s: float | None
    usage: CallUsage
    complete: bool  # the upstream's whole answer reached the agent
    request_bytes: int
    response_bytes: int
    error: str | None = None
    refused: bool = False  # answered by the gateway itself (`error` says why), not forwarded

    @property
    def kind(self) -> CallKind:
        if self.refused:
            return "refused"
        return "other" if self.api is None else "model"

    def to_json(self) -> dict[str, Any]:
        return {
            "v": 1,
            "ts": datetime.fromtimestamp(self.started, UTC).isoformat(),
            "kind": self.kind,
            "api": self.api,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "model": self.model,
            "streaming": self.streaming,
            "reasoning_effort": self.reasoning_effort,
            "latency_s": round(self.latency_s, 4),
            "ttft_s": None if self.ttft_s is None else round(self.ttft_s, 4),
            **{k: v for k, v in self.usage.to_json().items() if k != "model"},
            "complete": self.complete,
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
            "error": self.error,
        }


def count_kinds(calls: Iterable[ModelCall]) -> dict[CallKind, int]:
    counts: dict[CallKind, int] = {"model": 0, "other": 0, "refused": 0}
    for call in calls:
        counts[call.kind] += 1
    return counts


def upstream_url(base: str, path: str, query: str) -> str:
    """``base`` joined with the request's path; a base ending in ``/v1`` drops the path's own."""
    base = base.rstrip("/")
    if base.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
        path = path[3:]
    return f"{base}{path}" + (f"?{query}" if query else "")


def checked_path(raw: bytes, *, encoded: bool = True) -> str:
    """The request path decoded segment by segment (``encoded``: ``raw`` is ASGI's ``raw_path``).

    Raises `RequestRefused` (400) for a path that would mean another once decoded or normalized.
    """
    if raw == b"/":
        return "/"
    if not raw.startswith(b"/") or _RAW_PATH.fullmatch(raw) is None:
        raise RequestRefused(400, "malformed path: only ASCII path characters, from a leading /")
    if encoded and _ESCAPE.search(raw):
        raise RequestRefused(400, "malformed path: a % that is no escape")
    segments: list[str] = []
    for part in raw[1:].split(b"/"):
        text = (unquote_to_bytes(part) if encoded else part).decode("ascii", errors="replace")
        if not text:
            raise RequestRefused(400, "malformed path: an empty segment (// or a trailing /)")
        if text in (".", ".."):
            raise RequestRefused(400, "malformed path: a dot segment")
        if _SEGMENT.fullmatch(text) is None:
            message = "malformed path: a slash, backslash, %, ?, #, space, control or non-ASCII"
            raise RequestRefused(400, f"{message} character in a segment (encoded or not)")
        segments.append(text)
    return "/" + "/".join(segments)


def check_route(method: str, path: str) -> None:
    """Raise `RequestRefused` unless ``method path`` is a model API's route (404, or 405)."""
    segments = tuple(path.split("/")[1:]) if path != "/" else ()
    if segments[:1] == ("v1",):
        segments = segments[1:]
    allowed = _ROUTES.get(segments)
    if allowed is None and len(segments) == 2 and segments[0] == "models":
        allowed = "GET" if _MODEL_ID.fullmatch(segments[1]) else None
    if allowed is None:
        message = f"no such endpoint: {path} (the gateway forwards the model APIs only)"
        raise RequestRefused(404, message)
    if method != allowed:
        message = f"{method} {path}: the endpoint takes {allowed} only"
        raise RequestRefused(405, message, [(b"allow", allowed.encode())])


def forwarded_headers(
    headers: Iterable[tuple[bytes, bytes]], placeholder: str, key: str | None
) -> list[tuple[str, str]]:
    """The request's headers for upstream, the placeholder swapped for ``key`` (if any)."""
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
    """Seconds during which at least one call was in flight."""
    spans = sorted((c.started, c.started + c.latency_s) for c in calls)
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


@dataclass(slots=True)
class _Meter:
    method: str
    path: str
    started: float = field(default_factory=time.time)
    t0: float = field(default_factory=time.perf_counter)
    api: Api | None = None
    facts: RequestFacts | None = None
    meter: WireMeter | None = None
    status: int | None = None
    ttft: float | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    complete: bool = False
    hung_up: bool = False
    refused: bool = False
    error: str | None = None
    request_body: bytes = b""  # with model I/O recorded
    capture: AnswerCapture | None = None

    def refuse(self, status: int | None, reason: str) -> None:
        self.refused, self.status, self.error = True, status, reason
        self.api = self.facts = self.meter = self.capture = None

    def record(self) -> ModelCall:
        usage = self.meter.finish() if self.meter is not None else _UNKNOWN
        facts = self.facts
        return ModelCall(
            api=self.api,
            method=self.method,
            path=self.path,
            status=self.status,
            model=usage.model or (facts.model if facts is not None else None),
            streaming=facts.stream if facts is not None else None,
            reasoning_effort=facts.reasoning_effort if facts is not None else None,
            started=self.started,
            latency_s=time.perf_counter() - self.t0,
            ttft_s=self.ttft,
            usage=usage,
            complete=self.complete,
            request_bytes=self.request_bytes,
            response_bytes=self.response_bytes,
            error=self.error,
            refused=self.refused,
        )


@dataclass(slots=True)
class ModelGateway:
    """An ASGI app forwarding the model APIs' routes to ``upstream``, metering into ``calls``."""

    upstream: str
    client: httpx.AsyncClient
    calls_path: Path
    placeholder: str
    key: str | None = None
    calls: list[ModelCall] = field(default_factory=list)
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_concurrent: int = MAX_CONCURRENT
    slot_wait_s: float = SLOT_WAIT_S
    io_path: Path | None = None  # set: also record each call's request and answer here
    _slots: anyio.Semaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_request_bytes < 0 or self.max_concurrent < 1 or self.slot_wait_s < 0:
            raise ValueError("max_request_bytes >= 0, max_concurrent >= 1, slot_wait_s >= 0")
        self._slots = anyio.Semaphore(self.max_concurrent)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = scope.get("raw_path")
        shown = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))
        call = _Meter(method=str(scope.get("method", "")), path=shown[:_SHOWN])
        answering = False  # a 500 of our own can go out only before an answer

        async def answer(message: dict[str, Any]) -> None:
            nonlocal answering
            answering = True
            await send(message)

        try:
            await self._handle(scope, receive, answer, call)
        except RequestRefused as exc:
            call.refuse(exc.status, exc.reason)
            await _error(send, exc.status, exc.reason, exc.headers)
        except Exception as exc:  # whatever failed, the request keeps its line
            reason = f"the gateway failed: {type(exc).__name__}: {exc}"
            log.exception("gateway.failed", path=call.path)
            if call.status is None:
                call.refuse(500, reason)
            else:
                call.error = reason
            if not answering:
                await _error(send, 500, f"leanrig gateway: {reason}")
        finally:
            record = call.record()
            self.calls.append(record)
            _append_line(self.calls_path, record.to_json())
            if call.capture is not None and call.api is not None and self.io_path is not None:
                # Shielded: the record must keep the last turn even of a cancelled call.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._record_io, record, call)

    def _record_io(self, record: ModelCall, call: _Meter) -> None:
        assert call.capture is not None
        assert call.api is not None
        assert self.io_path is not None
        try:
            line = io_line(
                api=call.api,
                path=record.path,
                started=record.started,
                status=record.status,
                streaming=record.streaming,
                latency_s=record.latency_s,
                complete=record.complete,
                error=record.error,
                request=call.request_body,
                answer=call.capture,
                secrets=(self.key, self.placeholder),
            )
            append_io_line(self.io_path, line)
        except (OSError, ValueError, TypeError) as exc:
            log.warning("gateway.model_io_unwritable", path=str(self.io_path), error=str(exc))

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any, call: _Meter) -> None:
        """Check one request, wait for its slot and forward it; raises `RequestRefused`."""
        raw = scope.get("raw_path")
        if isinstance(raw, bytes):
            path = checked_path(raw)
        else:
            path = checked_path(str(scope["path"]).encode("utf-8"), encoded=False)
        query = scope.get("query_string", b"")
        if _QUERY.fullmatch(query) is None:
            raise RequestRefused(400, "malformed query string: printable ASCII only")
        check_route(call.method, path)
        call.path = path
        declared = _declared_length(scope["headers"])
        if declared is not None and declared > self.max_request_bytes:
            raise _too_large(self.max_request_bytes, f"its Content-Length is {declared}")
        if not await self._take_slot():
            busy = f"more than {self.max_concurrent} calls at once: try again"
            raise RequestRefused(429, busy, [(b"retry-after", b"1")])
        try:
            body = await self._body(receive)
            if body is None:
                call.refuse(None, "the agent closed its connection before its request ended")
                return
            call.request_bytes = len(body)
            call.api = api_of(path)
            if call.api is not None:
                call.facts = request_facts(call.api, body)
                call.meter = WireMeter(call.api)
                if self.io_path is not None:
                    call.request_body, call.capture = body, AnswerCapture()
            url = upstream_url(self.upstream, path, query.decode("ascii"))
            request = self.client.build_request(
                call.method,
                url,
                content=body,
                headers=forwarded_headers(scope["headers"], self.placeholder, self.key),
            )
            await self._forward(request, receive, send, call)
        finally:
            self._slots.release()

    async def _take_slot(self) -> bool:
        """Take a slot, waiting up to ``slot_wait_s``; False if none came free."""
        try:
            self._slots.acquire_nowait()
            return True
        except anyio.WouldBlock:
            pass
        with anyio.move_on_after(self.slot_wait_s):
            await self._slots.acquire()
            return True
        return False

    async def _forward(self, request: httpx.Request, receive: Any, send: Any, call: _Meter) -> None:
        meter = call.meter
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_hang_up, receive, scope, call)
                try:
                    response = await self.client.send(request, stream=True)
                except httpx.HTTPError as exc:
                    call.error = f"cannot reach the model endpoint: {type(exc).__name__}: {exc}"
                    await _error(send, 502, f"leanrig gateway: {call.error}")
                    tg.cancel_scope.cancel()
                    return
                try:
                    call.status = response.status_code
                    if meter is not None:
                        meter.content_type(response.headers.get("content-type", ""))
                    if call.capture is not None:
                        call.capture.content_type = response.headers.get("content-type", "")
                    await send(
                        {
                            "type": "http.response.start",
                            "status": call.status,
                            "headers": _answer_headers(response.headers),
                        }
                    )
                    async for chunk in response.aiter_raw():
                        if meter is not None and meter.feed(chunk) and call.ttft is None:
                            call.ttft = time.perf_counter() - call.t0
                        call.response_bytes += len(chunk)
                        if call.capture is not None:
                            call.capture.feed(chunk)
                        if call.hung_up:
                            continue  # read to meter it, forwarded to no one
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                        # The agent may hang up after the API's end event, before the stream's.
                        call.complete = call.complete or (meter is not None and meter.ended)
                    if not call.hung_up:
                        await send({"type": "http.response.body", "body": b""})
                        call.complete = True
                except httpx.HTTPError as exc:
                    call.error = f"the answer broke off: {type(exc).__name__}: {exc}"
                finally:
                    with anyio.CancelScope(shield=True):
                        await response.aclose()
                tg.cancel_scope.cancel()
        if call.hung_up and not call.complete:
            call.error = "the agent closed its connection before the answer ended"

    async def _body(self, receive: Any) -> bytes | None:
        """The request's body (None: the agent hung up first); 413 past ``max_request_bytes``."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_request_bytes:
                raise _too_large(self.max_request_bytes, f"its body passed {size} bytes")
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)


def _declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            if not value.strip().isdigit():
                raise RequestRefused(400, "malformed content-length")
            return int(value)
    return None


def _too_large(limit: int, seen: str) -> RequestRefused:
    # The connection stays open: a closed one reaches the SDK as a network error it retries.
    return RequestRefused(
        413, f"the request is larger than the {limit} bytes the gateway takes: {seen}"
    )


async def _watch_hang_up(receive: Any, scope: anyio.CancelScope, call: _Meter) -> None:
    """On the agent's hang-up, end the call: at once for a stream, whose upstream then stops
    generating; a JSON answer, already generated and billed, is read on to meter it."""
    while (await receive())["type"] != "http.disconnect":
        pass
    call.hung_up = True
    if call.meter is not None and call.meter.answer_is_json:
        scope.deadline = min(scope.deadline, anyio.current_time() + METER_AFTER_HANG_UP_S)
    else:
        scope.cancel()


async def _error(
    send: Callable[[dict[str, Any]], Awaitable[None]],
    status: int,
    message: str,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    kind = _ERROR_TYPES.get(status, "api_error")
    body = orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _append_line(path: Path, record: dict[str, Any]) -> None:
    """One ``O_APPEND`` write per line, so parallel calls never interleave."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, orjson.dumps(record) + b"\n")
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("gateway.calls_unwritable", path=str(path), error=str(exc))


def gateway_client() -> httpx.AsyncClient:
    """The run's one upstream client, shared across attempts."""
    return httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT, follow_redirects=False)


__all__ = [
    "MAX_CONCURRENT",
    "MAX_REQUEST_BYTES",
    "SLOT_WAIT_S",
    "CallKind",
    "ModelCall",
    "ModelGateway",
    "RequestRefused",
    "check_route",
    "checked_path",
    "count_kinds",
    "forwarded_headers",
    "gateway_client",
    "model_time",
    "upstream_url",
]
