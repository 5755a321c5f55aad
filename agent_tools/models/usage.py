"""Token usage and the first token of one model call, read off the wire as it passes.

Responsibility (and nothing else): a metering proxy hands each response chunk of a model call
to a `WireMeter` as it forwards it; the meter says which chunk held the call's first output
token and, at the end, the token usage the API itself reported, converted to leanrig's
convention (`CallUsage`). `request_facts` reads the request's model, stream flag and reasoning
setting; `api_of` names the API from the request path. Three APIs: Anthropic Messages, OpenAI
Responses and OpenAI Chat Completions, each as server-sent events or one JSON body.

It must not: do I/O, keep time (the proxy stamps the chunks), estimate or invent a count (a
count the API did not send is None, never 0), raise on anything the wire carries (malformed
input becomes a note in `WireMeter.errors`), hold more than a bounded amount of memory per call
(`max_event_bytes` per event, `max_body_bytes` per JSON body), or re-scan what it has already
read (each chunk's bytes are looked at once, plus the current unfinished line).

leanrig's convention (docs/runs.md): `input_tokens` is all input, cache reads and cache writes
included (Anthropic's own `input_tokens` is the uncached part only: leanrig's is its sum with
`cache_read_input_tokens` and `cache_creation_input_tokens`; OpenAI's already includes the
cached part); `cached_input_tokens` is the cache-read part; `cache_write_tokens` the cache
creation part (Anthropic only); `output_tokens` includes reasoning; `reasoning_tokens` is the
reasoning part when the API says (OpenAI only). Within one call the latest non-null value of
each field wins (Anthropic's `message_delta` usage is cumulative and may repeat or first supply
the input and cache counts; Chat Completions vendors may send usage in more than one chunk).
Anthropic's `message_start` output count is provisional: it is used only when the stream
reached `message_stop` without a `message_delta` count.

The first token is the first sign of model output: an Anthropic `content_block_start` or
`content_block_delta`; a Responses `response.output_item.added`, `…content_part.added` or any
`….delta` event (text, refusal, tool-call arguments, reasoning); a Chat Completions chunk whose
`delta` has non-empty content, refusal, reasoning or tool calls. An event counts when it is
complete (its terminating blank line), which is when the harness's own SSE parser hands it on.
A non-streaming body has no first token on the wire: `feed` returns False for it.

SSE framing follows the WHATWG rules for `\\n` and `\\r\\n` line ends (a lone `\\r` is not a
line end here), `data:` lines joined by `\\n`, `:` comments, a leading BOM ignored; an event
left unterminated when the body ends is still read at `finish` (a stream cut after its last
`data:` line keeps its usage).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

import orjson

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_EVENT_BYTES",
    "Api",
    "CallUsage",
    "RequestFacts",
    "WireMeter",
    "api_of",
    "request_facts",
]

Api = Literal["anthropic-messages", "openai-responses", "openai-chat"]

MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
"""An SSE line or event longer than this is dropped (with a note), the stream read on."""
MAX_BODY_BYTES: Final = 64 * 1024 * 1024
"""A non-streaming body longer than this is not buffered further: its usage is unknown."""
MAX_ERRORS: Final = 32
"""Notes kept in `WireMeter.errors`; past that, one line counts the rest."""
_MAX_ERROR_TEXT: Final = 300

_BOM: Final = b"\xef\xbb\xbf"
_SNIFF_SKIP: Final = frozenset(b" \t\r\n" + _BOM)

# Events that carry output only: once the first token and the model are known, their data is
# not parsed (the Responses `.done`/`.added` events repeat whole items and can be large).
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


def api_of(path: str) -> Api | None:
    """The API a request path (or URL) calls, or None for anything else.

    Matches the path's end, so any prefix (`/v1`, `/openai/v1`, a gateway's route) and a query
    are ignored: `…/messages` is Anthropic Messages, `…/responses` OpenAI Responses,
    `…/chat/completions` Chat Completions. Endpoints below those (`/v1/messages/count_tokens`,
    `/v1/responses/{id}`) make no model call and are None.
    """
    if "://" in path:
        path = path.split("://", 1)[1]
        slash = path.find("/")
        path = path[slash:] if slash >= 0 else "/"
    path = path.split("?", 1)[0].split("#", 1)[0]
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    last = parts[-1]
    if last == "messages" and "threads" not in parts:
        return "anthropic-messages"
    if last == "responses":
        return "openai-responses"
    if last == "completions" and len(parts) >= 2 and parts[-2] == "chat":
        return "openai-chat"
    return None


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One call's token counts in leanrig's convention; None = the API did not say."""

    input_tokens: int | None
    cached_input_tokens: int | None
    cache_write_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None
    model: str | None = None  # as the response names it

    def to_json(self) -> dict[str, int | str | None]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What a request body says about the call; None where it does not say (or is not JSON).

    `reasoning_effort`: Responses `reasoning.effort`; Chat Completions `reasoning_effort` (or
    an OpenRouter-style `reasoning.effort`); Anthropic `output_config.effort` when given, else
    the `thinking` type (`"enabled"`, `"adaptive"`, `"disabled"`). `thinking_budget`: Anthropic
    `thinking.budget_tokens`.
    """

    model: str | None
    stream: bool | None
    reasoning_effort: str | None
    thinking_budget: int | None = None

    def to_json(self) -> dict[str, int | str | bool | None]:
        return asdict(self)


def request_facts(api: Api, body: bytes) -> RequestFacts:
    """The model, stream flag and reasoning setting of a request body; junk gives all None."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return RequestFacts(None, None, None)
    if not isinstance(obj, dict):
        return RequestFacts(None, None, None)
    model = _str(obj.get("model"))
    stream = obj.get("stream")
    effort: str | None = None
    budget: int | None = None
    if api == "anthropic-messages":
        config = obj.get("output_config")
        if isinstance(config, dict):
            effort = _str(config.get("effort"))
        thinking = obj.get("thinking")
        if isinstance(thinking, dict):
            effort = effort or _str(thinking.get("type"))
            budget = _count(thinking.get("budget_tokens"))
    else:
        if api == "openai-chat":
            effort = _str(obj.get("reasoning_effort"))
        reasoning = obj.get("reasoning")
        if effort is None and isinstance(reasoning, dict):
            effort = _str(reasoning.get("effort"))
    return RequestFacts(model, stream if isinstance(stream, bool) else None, effort, budget)


class WireMeter:
    """Reads one call's response as it passes: `feed` every chunk in order, then `finish`.

    `streaming`: True for server-sent events, False for one JSON body, None to decide from
    `content_type(...)` (called with the response's Content-Type before the first chunk) or,
    failing that, from the body itself (a body whose first non-blank byte is `{` or `[` is
    JSON, anything else SSE). A decisive Content-Type (`text/event-stream`, `…json`) wins over
    `streaming`: a request made with `stream: true` can be answered by a JSON error body.
    """

    __slots__ = (
        "_api",
        "_data",
        "_data_size",
        "_dropping_event",
        "_ended",
        "_event",
        "_events",
        "_first_line",
        "_first_token",
        "_json",
        "_json_overflow",
        "_max_body",
        "_max_event",
        "_mode",
        "_model",
        "_more_errors",
        "_raw",
        "_result",
        "_skipping_line",
        "_started",
        "_streaming_hint",
        "_tail",
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
        self._max_event = max_event_bytes
        self._max_body = max_body_bytes
        self._started = False
        self._result: CallUsage | None = None
        # SSE state: the unfinished line, the event being assembled.
        self._tail = bytearray()
        self._skipping_line = False
        self._first_line = True
        self._event: bytes = b""
        self._data: list[bytes] = []
        self._data_size = 0
        self._dropping_event = False
        self._events = 0
        # JSON body state.
        self._json = bytearray()
        self._json_overflow = False
        # What was read.
        self._first_token = False
        self._ended = False
        self._model: str | None = None
        self._raw: dict[str, int] = {}
        self._more_errors = 0
        self.errors: list[str] = []
        """What could not be read (bad JSON in an event, an oversized event…), in order."""
        self.api_error: str | None = None
        """The error the API itself reported (an `error` event or error body), if any."""

    # -- the proxy's side ------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """The API marked the end of its answer: `message_stop`, a terminal `response.*`
        event, `data: [DONE]`, or a whole JSON body. False for a stream cut short."""
        return self._ended

    @property
    def first_token_seen(self) -> bool:
        """Some `feed` has returned True."""
        return self._first_token

    def content_type(self, value: str) -> None:
        """The response's Content-Type header; decides SSE vs JSON unless a chunk came first."""
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
                    return False  # blank so far: nothing to decide on, nothing to keep
                self._mode = "json" if chunk[start] in b"{[" else "sse"
        if self._mode == "json":
            self._feed_json(chunk[start:])
            return False
        before = self._first_token
        self._feed_sse(chunk, start)
        return self._first_token and not before

    def finish(self) -> CallUsage:
        """The call's usage, after its last chunk (a JSON body is parsed here). Idempotent."""
        if self._result is not None:
            return self._result
        if self._mode == "json":
            self._finish_json()
        elif self._mode == "sse":
            if self._tail and not self._skipping_line:
                self._line(bytes(self._tail))
            elif self._skipping_line:
                self._dropping_event = True
            self._tail.clear()
            self._dispatch()
        if self._more_errors:
            self.errors.append(f"… and {self._more_errors} more")
            self._more_errors = 0
        self._result = self._usage()
        return self._result

    # -- server-sent events ----------------------------------------------------------------

    def _feed_sse(self, chunk: bytes, start: int) -> None:
        end = len(chunk)
        while start < end:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._keep_tail(chunk, start, end)
                return
            if self._skipping_line:
                self._skipping_line = False
            elif self._tail:
                self._tail += chunk[start:nl]
                line = bytes(self._tail)
                self._tail.clear()
                self._line(line)
            else:
                self._line(chunk[start:nl])
            start = nl + 1

    def _keep_tail(self, chunk: bytes, start: int, end: int) -> None:
        if self._skipping_line:
            return
        if len(self._tail) + (end - start) > self._max_event:
            self._drop_line()
            self._tail.clear()
            self._skipping_line = True
            return
        self._tail += chunk[start:end]

    def _drop_line(self) -> None:
        self._note(f"an SSE line over {self._max_event} bytes was dropped, and its event")
        self._first_line = False
        self._dropping_event = True

    def _line(self, line: bytes) -> None:
        if len(line) > self._max_event:  # the same limit as an unfinished line's
            self._drop_line()
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._first_line:
            self._first_line = False
            if line.startswith(_BOM):
                line = line[3:]
        if not line:
            self._dispatch()
            return
        if line[0] == 0x3A:  # ":" a comment
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            if self._dropping_event:
                return
            self._data_size += len(value) + 1
            if self._data_size > self._max_event:
                self._note(f"an SSE event over {self._max_event} bytes was dropped")
                self._data.clear()
                self._dropping_event = True
                return
            self._data.append(value)
        elif name == b"event":
            self._event = value
        # `id`, `retry` and unknown fields say nothing about usage.

    def _dispatch(self) -> None:
        data = self._data
        name = self._event
        dropped = self._dropping_event
        self._data = []
        self._data_size = 0
        self._event = b""
        self._dropping_event = False
        if dropped or not data:
            return
        self._events += 1
        payload = data[0] if len(data) == 1 else b"\n".join(data)
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
        """An event that can only carry output, once nothing more is wanted from such events."""
        if not self._first_token or self._model is None:
            return False
        if self._api == "anthropic-messages":
            return name in _ANTHROPIC_CONTENT
        if self._api == "openai-responses":
            return name.endswith(_RESPONSES_CONTENT_SUFFIXES)
        return b"usage" not in payload and b"error" not in payload and b"[DONE]" not in payload

    # -- the three APIs --------------------------------------------------------------------

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
            parts = usage.get("cache_creation")  # the per-TTL breakdown, when the total is absent
            if isinstance(parts, dict):
                counts = [_count(v) for v in parts.values()]
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
        """Responses (`input_tokens`…) or Chat Completions (`prompt_tokens`…) usage."""
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

    # -- one JSON body ---------------------------------------------------------------------

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

    # -- shared ----------------------------------------------------------------------------

    def _take(self, usage: dict[str, Any], key: str, slot: str) -> bool:
        """Record `usage[key]` when it is a count; a null or absent field keeps what was known."""
        value = usage.get(key)
        if value is None:
            return False
        count = _count(value)
        if count is None:
            self._note(f"usage field {key} is not a count: {_short(repr(value))}")
            return False
        self._raw[slot] = count
        return True

    def _take_model(self, value: object) -> None:
        if self._model is None and isinstance(value, str) and value:
            self._model = value[:200]

    def _take_error(self, obj: dict[str, Any]) -> None:
        """An error as the API words it: `{"error": {"type"|"code", "message"}}`, a bare
        `{"error": "text"}`, or the event itself (`{"type": "error", "code", "message"}`)."""
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


def _count(value: object) -> int | None:
    """A token count: a non-negative int (or an integral float); anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _name(event: bytes) -> str:
    return _short(event.decode("utf-8", "replace")) if event else "unnamed"


def _short(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"
