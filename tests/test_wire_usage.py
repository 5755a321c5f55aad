"""The wire meter: usage and the first token of a model call from streams and bodies of the
three APIs, whatever the chunk boundaries and line ends; malformed input becomes notes."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_tools.models import Api, CallUsage, RequestFacts, WireMeter, api_of, request_facts


@pytest.fixture(autouse=True)
def no_stray_lean() -> None:
    """These tests start no process: skip conftest's ps scan."""


def sse(*events: tuple[str | None, Any]) -> bytes:
    """An SSE body as the APIs write it; a str payload is written as is (`[DONE]`, bad JSON)."""
    out = bytearray()
    for name, payload in events:
        if name is not None:
            out += b"event: " + name.encode() + b"\n"
        data = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
        out += b"data: " + data + b"\n\n"
    return bytes(out)


def run(
    api: Api, chunks: Sequence[bytes], *, streaming: bool | None = None, ctype: str | None = None
) -> tuple[CallUsage, list[bool], WireMeter]:
    meter = WireMeter(api, streaming=streaming)
    if ctype is not None:
        meter.content_type(ctype)
    flags = [meter.feed(c) for c in chunks]
    return meter.finish(), flags, meter


# -- fixtures: Anthropic Messages ----------------------------------------------------------------

CLAUDE = "claude-sonnet-4-5-20250929"


def anthropic_text(text: str, index: int = 0) -> list[tuple[str | None, Any]]:
    return [
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        *[
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": part},
                },
            )
            for part in text.split(" ")
        ],
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


# Claude Code's second turn: cache hit, a cache write, thinking, then a tool call; newer API
# versions repeat the input counts in message_delta.
ANTHROPIC_CACHED = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "model": CLAUDE,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 12,
                    "cache_creation_input_tokens": 1893,
                    "cache_read_input_tokens": 20544,
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": 1893,
                        "ephemeral_1h_input_tokens": 0,
                    },
                    "output_tokens": 2,
                    "service_tier": "standard",
                },
            },
        },
    ),
    ("ping", {"type": "ping"}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "The goal is `b ∧ a`; swap."},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "name": "mcp__leanrig__set_proof",
                "input": {},
            },
        },
    ),
    *[
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": part},
            },
        )
        for part in ['{"session_id": "s1', '", "body": "⟨h.2, h', '.1⟩"}']
    ],
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {
                "input_tokens": 12,
                "cache_creation_input_tokens": 1893,
                "cache_read_input_tokens": 20544,
                "output_tokens": 187,
            },
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)
ANTHROPIC_CACHED_USAGE = CallUsage(
    input_tokens=12 + 1893 + 20544,
    cached_input_tokens=20544,
    cache_write_tokens=1893,
    output_tokens=187,
    reasoning_tokens=None,
    model=CLAUDE,
)

# An Anthropic-compatible vendor (Kimi's shape): no cache fields, a null one, the final output
# count in message_delta only.
ANTHROPIC_VENDOR = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "chatcmpl-7f3kPqG0c2VvHh0zS1aQ",
                "type": "message",
                "role": "assistant",
                "model": "kimi-k2-0905-preview",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 3602,
                    "output_tokens": 0,
                    "cache_read_input_tokens": None,
                },
            },
        },
    ),
    *anthropic_text("I will set the proof body now."),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 41},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)
ANTHROPIC_VENDOR_USAGE = CallUsage(3602, None, None, 41, None, "kimi-k2-0905-preview")

# Cache counts only at the end (Qwen's Anthropic endpoint), no space after the colon.
ANTHROPIC_GATEWAY = (
    b"event:message_start\n"
    b'data:{"type":"message_start","message":{"id":"msg_q1","type":"message","role":"assistant",'
    b'"model":"qwen3-coder-plus","content":[],"usage":{"input_tokens":0,"output_tokens":0}}}\n'
    b"\n"
    b"event:content_block_start\n"
    b'data:{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n'
    b"\n"
    b"event:content_block_delta\n"
    b'data:{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}\n'
    b"\n"
    b"event:content_block_stop\n"
    b'data:{"type":"content_block_stop","index":0}\n'
    b"\n"
    b"event:message_delta\n"
    b'data:{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":'
    b'2,"cache_creation_input_tokens":0,"cache_read_input_tokens":3604,"output_tokens":878}}\n'
    b"\n"
    b"event:message_stop\n"
    b'data:{"type":"message_stop"}\n'
    b"\n"
)
ANTHROPIC_GATEWAY_USAGE = CallUsage(3606, 3604, 0, 878, None, "qwen3-coder-plus")

# Overloaded mid-answer: the stream ends with an error event, no message_delta.
ANTHROPIC_OVERLOADED = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_01Overloaded",
                "type": "message",
                "role": "assistant",
                "model": CLAUDE,
                "content": [],
                "usage": {
                    "input_tokens": 2140,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        },
    ),
    *anthropic_text("Let me")[:2],
    ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
)

# -- fixtures: OpenAI Responses ------------------------------------------------------------------

CODEX_MODEL = "gpt-5.1-codex"


def responses_event(kind: str, seq: int, **fields: Any) -> tuple[str, Any]:
    return kind, {"type": kind, "sequence_number": seq, **fields}


def response_object(status: str, usage: Any, **fields: Any) -> dict[str, Any]:
    return {
        "id": "resp_0a1b2c3d4e5f",
        "object": "response",
        "created_at": 1767225600,
        "status": status,
        "model": CODEX_MODEL,
        "output": [],
        "reasoning": {"effort": "medium", "summary": "auto"},
        "usage": usage,
        **fields,
    }


CODEX_USAGE = {
    "input_tokens": 9541,
    "input_tokens_details": {"cached_tokens": 8576},
    "output_tokens": 412,
    "output_tokens_details": {"reasoning_tokens": 320},
    "total_tokens": 9953,
}
REASONING_ITEM = {"id": "rs_68af", "type": "reasoning", "summary": []}
CALL_ITEM = {
    "id": "fc_68af",
    "type": "function_call",
    "status": "in_progress",
    "arguments": "",
    "call_id": "call_Qx2",
    "name": "set_proof",
    "namespace": "mcp__leanrig",
}
RESPONSES_REASONING = sse(
    responses_event("response.created", 0, response=response_object("in_progress", None)),
    responses_event("response.in_progress", 1, response=response_object("in_progress", None)),
    responses_event("response.output_item.added", 2, output_index=0, item=REASONING_ITEM),
    responses_event(
        "response.reasoning_summary_part.added",
        3,
        item_id="rs_68af",
        output_index=0,
        summary_index=0,
        part={"type": "summary_text", "text": ""},
    ),
    *[
        responses_event(
            "response.reasoning_summary_text.delta",
            4 + i,
            item_id="rs_68af",
            output_index=0,
            summary_index=0,
            delta=part,
        )
        for i, part in enumerate(["**Swapping", " the conjunction**"])
    ],
    responses_event("response.output_item.done", 6, output_index=0, item=REASONING_ITEM),
    responses_event("response.output_item.added", 7, output_index=1, item=CALL_ITEM),
    *[
        responses_event(
            "response.function_call_arguments.delta",
            8 + i,
            item_id="fc_68af",
            output_index=1,
            delta=part,
        )
        for i, part in enumerate(['{"session_id":"s1",', '"body":"⟨h.2, h.1⟩"}'])
    ],
    responses_event(
        "response.function_call_arguments.done",
        10,
        item_id="fc_68af",
        output_index=1,
        arguments='{"session_id":"s1","body":"⟨h.2, h.1⟩"}',
    ),
    responses_event("response.output_item.done", 11, output_index=1, item=CALL_ITEM),
    responses_event(
        "response.completed",
        12,
        response=response_object("completed", CODEX_USAGE, output=[REASONING_ITEM, CALL_ITEM]),
    ),
)
RESPONSES_REASONING_USAGE = CallUsage(9541, 8576, None, 412, 320, CODEX_MODEL)

RESPONSES_FAILED = sse(
    responses_event("response.created", 0, response=response_object("in_progress", None)),
    responses_event(
        "response.failed",
        1,
        response=response_object(
            "failed",
            None,
            error={"code": "server_error", "message": "The model failed to generate a response."},
        ),
    ),
)

# -- fixtures: OpenAI Chat Completions -----------------------------------------------------------

CHAT_MODEL = "gpt-5-mini-2025-08-07"


def chat_chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None) -> Any:
    return {
        "id": "chatcmpl-CJ8d2lT3v0",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": CHAT_MODEL,
        "system_fingerprint": None,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


CHAT_STREAM = sse(
    (None, chat_chunk({"role": "assistant", "content": "", "refusal": None})),
    *[(None, chat_chunk({"content": part})) for part in ["The", " body", " is", " `⟨h.2, h.1⟩`."]],
    (None, chat_chunk({}, finish="stop")),
    (
        None,
        chat_chunk(
            None,
            usage={
                "prompt_tokens": 1843,
                "completion_tokens": 96,
                "total_tokens": 1939,
                "prompt_tokens_details": {"cached_tokens": 1792, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 64,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
        ),
    ),
    (None, "[DONE]"),
)
CHAT_STREAM_USAGE = CallUsage(1843, 1792, None, 96, 64, CHAT_MODEL)

STREAMS: dict[str, tuple[Api, bytes]] = {
    "anthropic-cached": ("anthropic-messages", ANTHROPIC_CACHED),
    "anthropic-vendor": ("anthropic-messages", ANTHROPIC_VENDOR),
    "anthropic-gateway": ("anthropic-messages", ANTHROPIC_GATEWAY),
    "anthropic-overloaded": ("anthropic-messages", ANTHROPIC_OVERLOADED),
    "responses-reasoning": ("openai-responses", RESPONSES_REASONING),
    "responses-failed": ("openai-responses", RESPONSES_FAILED),
    "chat": ("openai-chat", CHAT_STREAM),
}

# -- fixtures: non-streaming bodies --------------------------------------------------------------

ANTHROPIC_BODY = orjson.dumps(
    {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": [{"type": "text", "text": "⟨h.2, h.1⟩"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 2095,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 503,
        },
    },
    option=orjson.OPT_INDENT_2,
)
RESPONSES_BODY = orjson.dumps(
    response_object("completed", CODEX_USAGE, error=None, incomplete_details=None)
)
CHAT_BODY = orjson.dumps(
    {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "deepseek-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "exact ⟨h.2, h.1⟩"},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 1117,
            "completion_tokens": 46,
            "total_tokens": 1163,
            "prompt_cache_hit_tokens": 1024,
            "prompt_cache_miss_tokens": 93,
        },
    }
)
BODIES: dict[str, tuple[Api, bytes, CallUsage]] = {
    "anthropic": ("anthropic-messages", ANTHROPIC_BODY, CallUsage(2095, 0, 0, 503, None, CLAUDE)),
    "responses": ("openai-responses", RESPONSES_BODY, RESPONSES_REASONING_USAGE),
    "chat": ("openai-chat", CHAT_BODY, CallUsage(1117, 1024, None, 46, None, "deepseek-chat")),
}


# -- the APIs' streams ---------------------------------------------------------------------------


def test_api_is_named_from_the_request_path() -> None:
    assert api_of("/v1/messages?beta=true") == "anthropic-messages"
    assert api_of("/messages") == "anthropic-messages"
    assert api_of("/anthropic/v1/messages") == "anthropic-messages"
    assert api_of("/v1/responses") == "openai-responses"
    assert api_of("/openai/v1/responses/") == "openai-responses"
    assert api_of("/responses") == "openai-responses"
    assert api_of("/v1/chat/completions") == "openai-chat"
    assert api_of("/chat/completions?api-version=2025-01-01") == "openai-chat"
    assert api_of("http://127.0.0.1:8080/v1/chat/completions") == "openai-chat"
    for other in [
        "/v1/messages/count_tokens",
        "/v1/responses/resp_123",
        "/v1/completions",
        "/v1/models",
        "/v1/threads/t1/messages",
        "/",
        "",
    ]:
        assert api_of(other) is None, other


def test_anthropic_input_counts_cache_reads_and_writes_and_the_final_output_count() -> None:
    usage, flags, meter = run("anthropic-messages", [ANTHROPIC_CACHED])
    assert usage == ANTHROPIC_CACHED_USAGE
    assert flags == [True]
    assert meter.ended
    assert meter.errors == []
    assert meter.api_error is None


def test_a_vendor_without_cache_fields_leaves_the_cache_counts_unknown() -> None:
    usage, _, meter = run("anthropic-messages", [ANTHROPIC_VENDOR])
    assert usage == ANTHROPIC_VENDOR_USAGE
    assert usage.cached_input_tokens is None and usage.cache_write_tokens is None
    assert meter.errors == []


def test_counts_first_sent_in_message_delta_replace_the_placeholders_of_message_start() -> None:
    usage, flags, meter = run("anthropic-messages", [ANTHROPIC_GATEWAY])
    assert usage == ANTHROPIC_GATEWAY_USAGE
    assert flags == [True]
    assert meter.errors == []


def test_an_error_event_is_reported_and_the_provisional_output_count_is_not_used() -> None:
    usage, _, meter = run("anthropic-messages", [ANTHROPIC_OVERLOADED])
    assert meter.api_error == "overloaded_error: Overloaded"
    assert not meter.ended
    assert usage == CallUsage(2140, 0, 0, None, None, CLAUDE)
    assert meter.errors == []


def test_the_provisional_output_count_stands_when_the_stream_ended_without_a_final_one() -> None:
    body = ANTHROPIC_VENDOR.replace(b',"usage":{"output_tokens":41}', b"").replace(
        b'"output_tokens":0', b'"output_tokens":5'
    )
    usage, _, meter = run("anthropic-messages", [body])
    assert meter.ended
    assert usage.output_tokens == 5


def test_responses_usage_includes_cached_input_and_reasoning_output() -> None:
    usage, flags, meter = run("openai-responses", [RESPONSES_REASONING])
    assert usage == RESPONSES_REASONING_USAGE
    assert flags == [True]
    assert meter.ended
    assert meter.errors == []


def test_a_failed_response_names_its_error() -> None:
    usage, flags, meter = run("openai-responses", [RESPONSES_FAILED])
    assert meter.api_error == "server_error: The model failed to generate a response."
    assert flags == [False]
    assert usage == CallUsage(None, None, None, None, None, CODEX_MODEL)


def test_an_incomplete_response_keeps_its_usage() -> None:
    stream = sse(
        responses_event("response.created", 0, response=response_object("in_progress", None)),
        responses_event("response.output_text.delta", 1, item_id="msg_1", delta="⟨h.2"),
        responses_event(
            "response.incomplete",
            2,
            response=response_object(
                "incomplete",
                {**CODEX_USAGE, "output_tokens": 128000},
                incomplete_details={"reason": "max_output_tokens"},
            ),
        ),
    )
    usage, flags, meter = run("openai-responses", [stream])
    assert usage.output_tokens == 128000 and usage.input_tokens == 9541
    assert flags == [True]
    assert meter.ended and meter.api_error is None


def test_a_responses_error_event_is_reported() -> None:
    stream = sse(
        ("error", {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down."}),
    )
    usage, _, meter = run("openai-responses", [stream])
    assert meter.api_error == "rate_limit_exceeded: Slow down."
    assert usage == CallUsage(None, None, None, None, None)


def test_chat_usage_comes_from_the_final_chunk_and_done_ends_the_stream() -> None:
    usage, flags, meter = run("openai-chat", [CHAT_STREAM])
    assert usage == CHAT_STREAM_USAGE
    assert flags == [True]
    assert meter.ended
    assert meter.errors == []


def test_the_chat_role_chunk_is_not_the_first_token() -> None:
    events = CHAT_STREAM.split(b"\n\n")
    role_chunk = events[0] + b"\n\n"
    meter = WireMeter("openai-chat")
    assert meter.feed(role_chunk) is False
    assert meter.feed(b"\n\n".join(events[1:])) is True


def test_a_chat_tool_call_delta_is_the_first_token() -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "set_proof"}}
    stream = sse(
        (None, chat_chunk({"role": "assistant", "content": None})),
        (None, chat_chunk({"tool_calls": [call]})),
    )
    meter = WireMeter("openai-chat")
    assert [meter.feed(e + b"\n\n") for e in stream.split(b"\n\n")[:2]] == [False, True]


def test_the_first_token_is_reported_once() -> None:
    meter = WireMeter("anthropic-messages")
    events = [e + b"\n\n" for e in ANTHROPIC_CACHED.split(b"\n\n") if e]
    flags = [meter.feed(e) for e in events]
    assert flags.count(True) == 1
    assert flags.index(True) == 2  # after message_start and ping
    assert meter.first_token_seen


def test_a_stream_without_output_has_no_first_token() -> None:
    _, flags, _ = run("openai-responses", [RESPONSES_FAILED])
    assert flags == [False]


# -- chunking and line ends (properties) ---------------------------------------------------------


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@functools.cache
def first_token_byte(api: Api, data: bytes) -> int | None:
    """The offset of the byte whose arrival completes the first output event."""
    meter = WireMeter(api)
    for i in range(len(data)):
        if meter.feed(data[i : i + 1]):
            return i
    return None


def outcome(meter: WireMeter, usage: CallUsage) -> tuple[Any, ...]:
    return usage, meter.errors, meter.api_error, meter.ended


def test_the_first_token_byte_is_the_end_of_the_first_output_event() -> None:
    start = ANTHROPIC_CACHED.index(b"event: content_block_start")
    end_of_event = ANTHROPIC_CACHED.index(b"\n\n", start) + 1
    assert first_token_byte("anthropic-messages", ANTHROPIC_CACHED) == end_of_event
    crlf = ANTHROPIC_CACHED.replace(b"\n", b"\r\n")
    start = crlf.index(b"event: content_block_start")
    assert first_token_byte("anthropic-messages", crlf) == crlf.index(b"\r\n\r\n", start) + 3


def whole(api: Api, data: bytes) -> tuple[Any, ...]:
    meter = WireMeter(api)
    meter.feed(data)
    return outcome(meter, meter.finish())


@pytest.mark.parametrize("name", sorted(STREAMS))
@given(cuts=st.lists(st.integers(min_value=0, max_value=20000), max_size=40), crlf=st.booleans())
@settings(max_examples=60, deadline=None)
def test_any_chunking_and_either_line_end_give_the_same_reading(
    name: str, cuts: list[int], crlf: bool
) -> None:
    api, data = STREAMS[name]
    expected = whole(api, data)
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    first = first_token_byte(api, data)
    cuts = [c % (len(data) + 1) for c in cuts]
    chunks = split(data, cuts)
    usage, flags, meter = run(api, chunks)
    assert outcome(meter, usage) == expected
    if first is None:
        assert not any(flags)
    else:
        assert flags.count(True) == 1
        holder = flags.index(True)
        offset = sum(len(c) for c in chunks[:holder])
        assert offset <= first < offset + len(chunks[holder])


@pytest.mark.parametrize("name", sorted(BODIES))
@given(cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20))
@settings(max_examples=30, deadline=None)
def test_a_json_body_reads_the_same_in_any_chunks(name: str, cuts: list[int]) -> None:
    api, body, expected = BODIES[name]
    usage, flags, meter = run(api, split(body, [c % (len(body) + 1) for c in cuts]))
    assert usage == expected
    assert not any(flags)
    assert meter.ended and meter.errors == []


@given(junk=st.binary(max_size=2000), cuts=st.lists(st.integers(0, 2000), max_size=10))
@settings(max_examples=200, deadline=None)
def test_junk_never_raises(junk: bytes, cuts: list[int]) -> None:
    for api in ("anthropic-messages", "openai-responses", "openai-chat"):
        for streaming in (None, True, False):
            meter = WireMeter(api, streaming=streaming)
            for chunk in split(junk, cuts):
                meter.feed(chunk)
            assert isinstance(meter.finish(), CallUsage)


@given(
    events=st.lists(
        st.tuples(
            st.sampled_from(["message_start", "message_delta", "content_block_delta", "error"]),
            st.recursive(
                st.none() | st.booleans() | st.integers(-5, 10**12) | st.text(max_size=8),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(
                        st.sampled_from(
                            ["type", "usage", "message", "input_tokens", "output_tokens", "error"]
                        ),
                        inner,
                        max_size=4,
                    )
                ),
                max_leaves=12,
            ),
        ),
        max_size=6,
    )
)
@settings(max_examples=200, deadline=None)
def test_wrongly_typed_json_never_raises(events: list[tuple[str, Any]]) -> None:
    for api in ("anthropic-messages", "openai-responses", "openai-chat"):
        meter = WireMeter(api)
        meter.feed(sse(*events))
        usage = meter.finish()
        for count in (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens):
            assert count is None or (isinstance(count, int) and count >= 0)


# -- non-streaming bodies and deciding SSE vs JSON -----------------------------------------------


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_non_streaming_body_is_read_at_finish(name: str) -> None:
    api, body, expected = BODIES[name]
    for ctype, streaming in [("application/json", None), (None, None), (None, False)]:
        usage, flags, meter = run(api, [body], streaming=streaming, ctype=ctype)
        assert usage == expected
        assert flags == [False]
        assert meter.ended


def test_a_json_error_body_wins_over_the_requested_stream() -> None:
    body = b'{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 9"}}'
    usage, _, meter = run(
        "anthropic-messages", [body], streaming=True, ctype="application/json; charset=utf-8"
    )
    assert meter.api_error == "invalid_request_error: max_tokens: 9"
    assert usage == CallUsage(None, None, None, None, None)


def test_an_openai_error_body_is_reported() -> None:
    body = b'{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error"}}'
    _, _, meter = run("openai-chat", [body])
    assert meter.api_error == "invalid_request_error: Incorrect API key provided."


def test_the_body_itself_decides_sse_or_json_without_a_content_type() -> None:
    usage, flags, _ = run("openai-chat", [b"\r\n", CHAT_STREAM])
    assert usage == CHAT_STREAM_USAGE and flags == [False, True]
    # OpenRouter opens its streams with a comment line.
    usage, _, _ = run("openai-chat", [b": OPENROUTER PROCESSING\n\n" + CHAT_STREAM])
    assert usage == CHAT_STREAM_USAGE
    usage, _, _ = run("anthropic-messages", [b"\xef\xbb\xbf" + ANTHROPIC_CACHED])
    assert usage == ANTHROPIC_CACHED_USAGE
    usage, _, _ = run("anthropic-messages", [b"\n  " + ANTHROPIC_BODY])
    assert usage == BODIES["anthropic"][2]


def test_an_event_stream_content_type_is_read_as_sse() -> None:
    usage, _, _ = run("openai-chat", [CHAT_STREAM], streaming=False, ctype="text/event-stream")
    assert usage == CHAT_STREAM_USAGE


def test_a_content_type_after_the_first_chunk_changes_nothing() -> None:
    meter = WireMeter("openai-chat")
    meter.feed(CHAT_STREAM[:10])
    meter.content_type("application/json")
    meter.feed(CHAT_STREAM[10:])
    assert meter.finish() == CHAT_STREAM_USAGE


# -- SSE framing and malformed input -------------------------------------------------------------


def test_multi_line_data_comments_and_ids_follow_the_sse_rules() -> None:
    stream = (
        b": keep-alive\n"
        b"id: 7\n"
        b"retry: 3000\n"
        b"event: message_delta\n"
        b'data: {"type": "message_delta",\n'
        b'data:  "usage": {"output_tokens": 9}}\n'
        b"\n"
        b"event: message_stop\n"
        b'data: {"type":"message_stop"}\n'
        b"\n"
    )
    usage, _, meter = run("anthropic-messages", [stream])
    assert usage.output_tokens == 9
    assert meter.ended and meter.errors == []


def test_an_event_cut_off_at_the_end_of_the_body_is_still_read() -> None:
    usage, _, meter = run("openai-chat", [CHAT_STREAM.removesuffix(b"data: [DONE]\n\n")[:-2]])
    assert usage == CHAT_STREAM_USAGE
    assert not meter.ended


def test_bad_json_in_an_event_is_noted_and_the_rest_is_read() -> None:
    broken = sse(("message_delta", '{"type":"message_delta","usage":{"output_tokens":'))
    usage, _, meter = run("anthropic-messages", [broken + ANTHROPIC_VENDOR])
    assert usage == ANTHROPIC_VENDOR_USAGE
    assert len(meter.errors) == 1
    assert meter.errors[0].startswith("SSE event 1 (message_delta): bad JSON")


def test_a_usage_field_that_is_not_a_count_is_noted_and_ignored() -> None:
    body = orjson.dumps({"model": "m", "usage": {"prompt_tokens": "many", "completion_tokens": -1}})
    usage, _, meter = run("openai-chat", [body])
    assert usage == CallUsage(None, None, None, None, None, "m")
    assert len(meter.errors) == 2


def test_an_oversized_line_is_dropped_with_its_event_and_the_stream_read_on() -> None:
    huge = sse(("content_block_delta", {"type": "content_block_delta", "text": "x" * 5000}))
    for chunks in ([huge, ANTHROPIC_VENDOR], [huge[:100], huge[100:], ANTHROPIC_VENDOR]):
        meter = WireMeter("anthropic-messages", max_event_bytes=4096)
        flags = [meter.feed(c) for c in chunks]
        assert meter.finish() == ANTHROPIC_VENDOR_USAGE
        assert flags[-1] and not any(flags[:-1])  # the dropped delta was no first token
        assert meter.errors == ["an SSE line over 4096 bytes was dropped, and its event"]


def test_an_oversized_multi_line_event_is_dropped() -> None:
    lines = b"".join(b"data: " + b"y" * 1000 + b"\n" for _ in range(5))
    meter = WireMeter("openai-chat", max_event_bytes=4096)
    meter.feed(lines + b"\n" + CHAT_STREAM)
    assert meter.finish() == CHAT_STREAM_USAGE
    assert meter.errors == ["an SSE event over 4096 bytes was dropped"]


def test_an_oversized_json_body_is_not_buffered_and_its_usage_is_unknown() -> None:
    meter = WireMeter("anthropic-messages", streaming=False, max_body_bytes=1000)
    for _ in range(10):
        meter.feed(ANTHROPIC_BODY)
    assert meter.finish() == CallUsage(None, None, None, None, None)
    assert meter.errors == ["the JSON body is over 1000 bytes: its usage is unknown"]
    assert not meter.ended


def test_errors_are_bounded() -> None:
    stream = b"data: {oops\n\n" * 1000
    meter = WireMeter("openai-chat")
    meter.feed(stream)
    meter.finish()
    assert len(meter.errors) == 33
    assert meter.errors[-1] == "… and 968 more"


def test_finish_is_idempotent_and_a_chunk_after_it_is_noted() -> None:
    meter = WireMeter("openai-chat")
    meter.feed(CHAT_STREAM)
    first = meter.finish()
    assert meter.feed(CHAT_STREAM) is False
    assert meter.finish() is first
    assert meter.errors == ["a chunk after finish() was ignored"]


def test_an_empty_response_has_unknown_usage() -> None:
    usage, _, meter = run("openai-responses", [b""])
    assert usage == CallUsage(None, None, None, None, None)
    assert not meter.ended


def test_usage_serialises_every_field() -> None:
    assert ANTHROPIC_CACHED_USAGE.to_json() == {
        "input_tokens": 22449,
        "cached_input_tokens": 20544,
        "cache_write_tokens": 1893,
        "output_tokens": 187,
        "reasoning_tokens": None,
        "model": CLAUDE,
    }


# -- request facts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "body", "facts"),
    [
        (
            "anthropic-messages",
            {
                "model": CLAUDE,
                "stream": True,
                "thinking": {"type": "enabled", "budget_tokens": 8000},
            },
            RequestFacts(CLAUDE, True, "enabled", 8000),
        ),
        (
            "anthropic-messages",
            {"model": "claude-opus-4-5", "output_config": {"effort": "high"}, "max_tokens": 64},
            RequestFacts("claude-opus-4-5", None, "high", None),
        ),
        (
            "anthropic-messages",
            {"model": "kimi-k2", "stream": "yes"},
            RequestFacts("kimi-k2", None, None, None),
        ),
        (
            "openai-responses",
            {"model": CODEX_MODEL, "stream": True, "reasoning": {"effort": "medium"}},
            RequestFacts(CODEX_MODEL, True, "medium"),
        ),
        (
            "openai-chat",
            {"model": CHAT_MODEL, "stream": False, "reasoning_effort": "low"},
            RequestFacts(CHAT_MODEL, False, "low"),
        ),
        (
            "openai-chat",
            {"model": "deepseek/deepseek-r1", "reasoning": {"effort": "high"}},
            RequestFacts("deepseek/deepseek-r1", None, "high"),
        ),
    ],
)
def test_request_facts_name_model_stream_and_reasoning(
    api: Api, body: dict[str, Any], facts: RequestFacts
) -> None:
    assert request_facts(api, orjson.dumps(body)) == facts


@pytest.mark.parametrize("body", [b"", b"not json", b"[1, 2]", b'{"model": 5, "reasoning": 3}'])
def test_request_facts_of_junk_are_unknown(body: bytes) -> None:
    assert request_facts("openai-responses", body) == RequestFacts(None, None, None)
