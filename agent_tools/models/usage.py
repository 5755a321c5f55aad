"""Token usage and the first output token of one model call, read off the wire as it passes.

Covers Anthropic Messages, OpenAI Responses and Chat Completions, streamed or not. Must not: do
I/O, keep time, invent a count (unsent is None, never 0), raise on wire input, or grow unbounded."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

import orjson

from .model_request import Api, count
from .sse_events import SseEvents

__all__ = ["MAX_BODY_BYTES", "MAX_EVENT_BYTES", "CallUsage", "WireMeter"]


MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
"""An SSE line or event longer than this is dropped (with a note), the stream read on."""
MAX_BODY_BYTES: Final = 64 * 1024 * 1024
"""A non-streaming body longer than this is not buffered further: its usage is unknown."""
MAX_ERRORS: Final = 32
"""Notes kept in `WireMeter.errors`; past that, one line counts the rest."""
_MAX_ERROR_TEXT: Final = 300

_BOM: Final = b"\xef\xbb\xbf"
_SNIFF_SKIP: Final = frozenset(b" \t\r\n" + _BOM)

# Output-only events, left unparsed once the first token and model are known.
_ANTHROPIC_CONTENT: Final = frozenset(
    {b"content_block_delta", b"content_block_start", b"content_block_stop", b"ping"}
)
_RESPONSES_CONTENT_SUFFIXES: Final = (b".delta", b".done", b".added")
_RESPONSES_TERMINAL: Final = frozenset(
    {"response.completed", "response.incomplete", "response.failed"}
)
_RESPONSES_FIRST: Final = frozenset(
    {
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_summary_part.added",
    }
)
_CHAT_DELTA_KEYS: Final = (
    "content",
    "tool_calls",
    "reasoning_content",
    "reasoning",
    "refusal",
    "function_call",
    "audio",
)


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One call's token counts in leanrig's convention (docs/runs.md); None = the API did not say.

    ``input_tokens`` includes cache reads and writes; ``output_tokens`` includes reasoning.
    """

    input_tokens: int | None
    cached_input_tokens: int | None
    cache_write_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None
    model: str | None = None  # as the response names it

    def to_json(self) -> dict[str, int | str | None]:
        return asdict(self)


class WireMeter:
    """Reads one call's response as it passes: `feed` every chunk in order, then `finish`.

    `streaming` None: decide SSE vs JSON from `content_type` or the body's first byte. A decisive
    Content-Type wins over `streaming`: a streamed request may get a JSON error body.
    """

    __slots__ = (
        "_api",
        "_ended",
        "_events",
        "_first_token",
        "_json",
        "_json_overflow",
        "_max_body",
        "_mode",
        "_model",
        "_more_errors",
        "_raw",
        "_result",
        "_sse",
        "_started",
        "_streaming_hint",
        "api_error",
        "errors",
    )

    def __init__(
        self,
        api: Api,
        *,
        streaming: bool | None = None,
        max_event_bytes: int = MAX_EVENT_BYTES,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._api: Api = api
        self._streaming_hint = streaming
        self._mode: Literal["sse", "json"] | None = None
        self._max_body = max_body_bytes
        self._started = False
        self._result: CallUsage | None = None
        self._sse = SseEvents(self._on_event, self._note, max_event_bytes)
        self._events = 0
        self._json = bytearray()
        self._json_overflow = False
        self._first_token = False
        self._ended = False
        self._model: str | None = None
        self._raw: dict[str, int] = {}
        self._more_errors = 0
        self.errors: list[str] = []
        """What could not be read, in order."""
        self.api_error: str | None = None
        """The error the API itself reported (an `error` event or error body), if any."""

    @property
    def ended(self) -> bool:
        """The API marked the end of its answer (False for a stream cut short)."""
        return self._ended

    @property
    def answer_is_json(self) -> bool:
        """The answer is one JSON body (from its Content-Type or first byte), not a stream."""
        return self._mode == "json"

    @property
    def first_token_seen(self) -> bool:
        return self._first_token

    def content_type(self, value: str) -> None:
        """Pass the response's Content-Type; decides SSE vs JSON unless a chunk came first."""
        if self._started:
            return
        media = value.split(";", 1)[0].strip().lower()
        if media == "text/event-stream":
            self._mode = "sse"
        elif media.endswith("json"):
            self._mode = "json"

    def feed(self, chunk: bytes) -> bool:
        """Read the next chunk; True when it completed the call's first output event (once)."""
        if self._result is not None:
            self._note("a chunk after finish() was ignored")
            return False
        if not chunk:
            return False
        self._started = True
        start = 0
        if self._mode is None:
            if self._streaming_hint is not None:
                self._mode = "sse" if self._streaming_hint else "json"
            else:
                while start < len(chunk) and chunk[start] in _SNIFF_SKIP:
                    start += 1
                if start == len(chunk):
                    return False
                self._mode = "json" if chunk[start] in b"{[" else "sse"
        if self._mode == "json":
            self._feed_json(chunk[start:])
            return False
        before = self._first_token
        self._sse.feed(chunk, start)
        return self._first_token and not before

    def finish(self) -> CallUsage:
        """The call's usage, after its last chunk. Idempotent."""
        if self._result is not None:
            return self._result
        if self._mode == "json":
            self._finish_json()
        elif self._mode == "sse":
            self._sse.finish()
        if self._more_errors:
            self.errors.append(f"… and {self._more_errors} more")
            self._more_errors = 0
        self._result = self._usage()
        return self._result

    def _on_event(self, name: bytes, payload: bytes) -> None:
        self._events += 1
        if self._skippable(name, payload):
            return
        if payload.strip() == b"[DONE]":
            self._ended = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            self._note(f"SSE event {self._events} ({_name(name)}): bad JSON: {exc}")
            return
        if not isinstance(obj, dict):
            self._note(f"SSE event {self._events} ({_name(name)}): not a JSON object")
            return
        kind = obj.get("type")
        if not isinstance(kind, str):
            kind = name.decode("utf-8", "replace")
        if self._api == "anthropic-messages":
            self._anthropic_event(kind, obj)
        elif self._api == "openai-responses":
            self._responses_event(kind, obj)
        else:
            self._chat_chunk(obj)

    def _skippable(self, name: bytes, payload: bytes) -> bool:
        if not self._first_token or self._model is None:
            return False
        if self._api == "anthropic-messages":
            return name in _ANTHROPIC_CONTENT
        if self._api == "openai-responses":
            return name.endswith(_RESPONSES_CONTENT_SUFFIXES)
        return b"usage" not in payload and b"error" not in payload and b"[DONE]" not in payload

    def _anthropic_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind in ("content_block_delta", "content_block_start"):
            self._first_token = True
        elif kind == "message_start":
            message = obj.get("message")
            if isinstance(message, dict):
                self._take_model(message.get("model"))
                self._anthropic_usage(message.get("usage"), final=False)
        elif kind == "message_delta":
            self._anthropic_usage(obj.get("usage"), final=True)
        elif kind == "message_stop":
            self._ended = True
        elif kind == "error":
            self._take_error(obj)

    def _anthropic_usage(self, usage: object, *, final: bool) -> None:
        if not isinstance(usage, dict):
            return
        self._take(usage, "input_tokens", "input")
        self._take(usage, "cache_read_input_tokens", "cache_read")
        if not self._take(usage, "cache_creation_input_tokens", "cache_write"):
            parts = usage.get("cache_creation")  # per-TTL breakdown
            if isinstance(parts, dict):
                counts = [count(v) for v in parts.values()]
                known = [c for c in counts if c is not None]
                if known:
                    self._raw["cache_write"] = sum(known)
        self._take(usage, "output_tokens", "output" if final else "output_start")

    def _responses_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind.endswith(".delta") or kind in _RESPONSES_FIRST:
            self._first_token = True
            return
        response = obj.get("response")
        if isinstance(response, dict):
            self._take_model(response.get("model"))
            self._openai_usage(response.get("usage"))
            if kind in _RESPONSES_TERMINAL:
                self._ended = True
                if kind == "response.failed":
                    self._take_error(response)
                    self.api_error = self.api_error or "response.failed"
        elif kind == "error":
            self._take_error(obj)

    def _chat_chunk(self, obj: dict[str, Any]) -> None:
        self._take_model(obj.get("model"))
        if not self._first_token:
            choices = obj.get("choices")
            if isinstance(choices, list):
                for choice in choices:
                    delta = choice.get("delta") if isinstance(choice, dict) else None
                    if isinstance(delta, dict) and any(delta.get(k) for k in _CHAT_DELTA_KEYS):
                        self._first_token = True
                        break
        self._openai_usage(obj.get("usage"))
        self._take_error(obj)

    def _openai_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        chat = "prompt_tokens" in usage or "completion_tokens" in usage
        self._take(usage, "prompt_tokens" if chat else "input_tokens", "input")
        self._take(usage, "completion_tokens" if chat else "output_tokens", "output")
        details = usage.get("prompt_tokens_details" if chat else "input_tokens_details")
        if not (isinstance(details, dict) and self._take(details, "cached_tokens", "cached")):
            self._take(usage, "prompt_cache_hit_tokens", "cached")  # DeepSeek's name
        details = usage.get("completion_tokens_details" if chat else "output_tokens_details")
        if isinstance(details, dict):
            self._take(details, "reasoning_tokens", "reasoning")

    def _feed_json(self, chunk: bytes) -> None:
        if self._json_overflow:
            return
        if len(self._json) + len(chunk) > self._max_body:
            self._note(f"the JSON body is over {self._max_body} bytes: its usage is unknown")
            self._json_overflow = True
            self._json = bytearray()
            return
        self._json += chunk

    def _finish_json(self) -> None:
        if self._json_overflow:
            return
        body = bytes(self._json).lstrip()
        self._json = bytearray()
        body = body.removeprefix(_BOM)
        if not body:
            self._note("the JSON body is empty")
            return
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            self._note(f"the JSON body is not JSON: {exc}")
            return
        if not isinstance(obj, dict):
            self._note("the JSON body is not an object")
            return
        self._ended = True
        self._take_model(obj.get("model"))
        self._take_error(obj)
        if self._api == "anthropic-messages":
            self._anthropic_usage(obj.get("usage"), final=True)
        else:
            self._openai_usage(obj.get("usage"))

    def _take(self, usage: dict[str, Any], key: str, slot: str) -> bool:
        """Record `usage[key]` if it is a count: the latest non-null value wins."""
        value = usage.get(key)
        if value is None:
            return False
        tokens = count(value)
        if tokens is None:
            self._note(f"usage field {key} is not a count: {_short(repr(value))}")
            return False
        self._raw[slot] = tokens
        return True

    def _take_model(self, value: object) -> None:
        if self._model is None and isinstance(value, str) and value:
            self._model = value[:200]

    def _take_error(self, obj: dict[str, Any]) -> None:
        error = obj.get("error")
        if isinstance(error, dict):
            kind, message = error.get("type") or error.get("code"), error.get("message")
        elif isinstance(error, str):
            kind, message = None, error
        elif obj.get("type") == "error":
            kind, message = obj.get("code"), obj.get("message")
        else:
            return
        parts = [str(p) for p in (kind, message) if p is not None and p != ""]
        self.api_error = _short(": ".join(parts) if parts else "error")

    def _note(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(_short(message))
        else:
            self._more_errors += 1

    def _usage(self) -> CallUsage:
        raw = self._raw
        if self._api == "anthropic-messages":
            uncached = raw.get("input")
            read = raw.get("cache_read")
            write = raw.get("cache_write")
            total = None if uncached is None else uncached + (read or 0) + (write or 0)
            output = raw.get("output")
            if output is None and self._ended:
                output = raw.get("output_start")
            return CallUsage(total, read, write, output, None, self._model)
        return CallUsage(
            raw.get("input"),
            raw.get("cached"),
            None,
            raw.get("output"),
            raw.get("reasoning"),
            self._model,
        )


def _name(event: bytes) -> str:
    return _short(event.decode("utf-8", "replace")) if event else "unnamed"


def _short(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"
