"""The replay model's answers: one model turn as each API's JSON body or events, and error bodies.

Must not read requests, decide what to answer, do I/O or keep time."""

from __future__ import annotations

import secrets
import time
from typing import Any

import orjson

from .model_request import Api
from .replay_requests import Conversation, Output, ServedUsage, Text, ToolCall, ToolSearch


def output_bytes(output: Output) -> int:
    """The size of what the model says, in bytes."""
    if isinstance(output, Text):
        return len(output.text.encode())
    if isinstance(output, ToolCall):
        return len(output.name.encode()) + len(orjson.dumps(output.arguments))
    return len(output.tool.encode()) + len(output.query.encode())


def _id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _search_input(output: ToolSearch) -> dict[str, Any]:
    """A tool-search call's arguments: Claude Code selects names, Codex searches words."""
    if output.tool == "ToolSearch":
        # `max_results` is required by its schema.
        return {"query": "select:" + ",".join(output.names), "max_results": len(output.names)}
    return {"query": output.query, "limit": output.limit}


def render_json(conv: Conversation, output: Output, usage: ServedUsage) -> dict[str, Any]:
    if conv.api == "anthropic-messages":
        return _anthropic_message(conv, output, usage, _id("msg_"), [_anthropic_block(output)])
    if conv.api == "openai-responses":
        return _responses_object(conv, _id("resp_"), [_responses_item(output)], usage)
    return {
        "id": _id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": conv.model,
        "choices": [
            {
                "index": 0,
                "message": _chat_message(output),
                "logprobs": None,
                "finish_reason": "stop" if isinstance(output, Text) else "tool_calls",
            }
        ],
        "usage": _chat_usage(usage),
    }


def render_events(conv: Conversation, output: Output, usage: ServedUsage) -> list[bytes]:
    """The answer as the API's server-sent events, each one whole."""
    if conv.api == "anthropic-messages":
        return _anthropic_events(conv, output, usage)
    if conv.api == "openai-responses":
        return _responses_events(conv, output, usage)
    return _chat_events(conv, output, usage)


def error_body(api: Api | None, status: int, message: str) -> dict[str, Any]:
    """An error in the API's own shape (both shapes at once when the API is unknown)."""
    anthropic_type = {
        400: "invalid_request_error",
        404: "not_found_error",
        413: "request_too_large",
        415: "invalid_request_error",
        503: "overloaded_error",
    }.get(status, "api_error")
    if api == "anthropic-messages":
        return {"type": "error", "error": {"type": anthropic_type, "message": message}}
    openai_type = "server_error" if status >= 500 else "invalid_request_error"
    error: dict[str, Any] = {"message": message, "type": openai_type, "param": None, "code": None}
    if api is None:
        return {"type": "error", "error": {**error, "type": anthropic_type}}
    return {"error": error}


# Anthropic Messages


def _anthropic_block(output: Output) -> dict[str, Any]:
    if isinstance(output, Text):
        return {"type": "text", "text": output.text}
    if isinstance(output, ToolCall):
        return {
            "type": "tool_use",
            "id": _id("toolu_"),
            "name": output.name,
            "input": output.arguments,
        }
    return {
        "type": "tool_use",
        "id": _id("toolu_"),
        "name": output.tool,
        "input": _search_input(output),
    }


def _anthropic_usage(usage: ServedUsage, *, output_tokens: int) -> dict[str, Any]:
    uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "output_tokens": output_tokens,
    }


def _anthropic_message(
    conv: Conversation, output: Output, usage: ServedUsage, mid: str, content: list[dict[str, Any]]
) -> dict[str, Any]:
    done = bool(content)
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": content,
        "stop_reason": ("end_turn" if isinstance(output, Text) else "tool_use") if done else None,
        "stop_sequence": None,
        "usage": _anthropic_usage(usage, output_tokens=usage.output_tokens if done else 0),
    }


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _anthropic_events(conv: Conversation, output: Output, usage: ServedUsage) -> list[bytes]:
    block = _anthropic_block(output)
    if block["type"] == "text":
        start = {**block, "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}
    message = _anthropic_message(conv, output, usage, _id("msg_"), [])
    stop_reason = "end_turn" if isinstance(output, Text) else "tool_use"
    return [
        _sse("message_start", {"type": "message_start", "message": message}),
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": start},
        ),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage.output_tokens},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]


# OpenAI Responses


def _responses_item(output: Output) -> dict[str, Any]:
    if isinstance(output, Text):
        return {
            "type": "message",
            "id": _id("msg_"),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": output.text, "annotations": []}],
        }
    if isinstance(output, ToolCall):
        item: dict[str, Any] = {
            "type": "function_call",
            "id": _id("fc_"),
            "call_id": _id("call_"),
            "name": output.name,
            "arguments": orjson.dumps(output.arguments).decode(),
            "status": "completed",
        }
        if output.namespace is not None:
            item["namespace"] = output.namespace
        return item
    return {
        "type": "tool_search_call",
        "id": _id("ts_"),
        "call_id": _id("call_"),
        "execution": "client",
        "status": "completed",
        "arguments": _search_input(output),
    }


def _responses_usage(usage: ServedUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _responses_object(
    conv: Conversation, rid: str, output: list[dict[str, Any]], usage: ServedUsage | None
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed" if usage is not None else "in_progress",
        "error": None,
        "incomplete_details": None,
        "model": conv.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _responses_usage(usage) if usage is not None else None,
    }


def _responses_events(conv: Conversation, output: Output, usage: ServedUsage) -> list[bytes]:
    rid = _id("resp_")
    item = _responses_item(output)
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": _responses_object(conv, rid, [], None)}),
        ("response.in_progress", {"response": _responses_object(conv, rid, [], None)}),
    ]
    at = {"item_id": item["id"], "output_index": 0}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        empty = {"type": "output_text", "text": "", "annotations": []}
        events += [
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
            ),
            ("response.content_part.added", {**at, "content_index": 0, "part": empty}),
            ("response.output_text.delta", {**at, "content_index": 0, "delta": text}),
            ("response.output_text.done", {**at, "content_index": 0, "text": text}),
            ("response.content_part.done", {**at, "content_index": 0, "part": item["content"][0]}),
        ]
    elif item["type"] == "function_call":
        events += [
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**item, "status": "in_progress", "arguments": ""}},
            ),
            ("response.function_call_arguments.delta", {**at, "delta": item["arguments"]}),
            ("response.function_call_arguments.done", {**at, "arguments": item["arguments"]}),
        ]
    else:
        events.append(
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**item, "status": "in_progress"}},
            )
        )
    events += [
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": _responses_object(conv, rid, [item], usage)}),
    ]
    return [
        _sse(name, {"type": name, "sequence_number": n, **data})
        for n, (name, data) in enumerate(events)
    ]


# OpenAI Chat Completions


def _chat_message(output: Output) -> dict[str, Any]:
    if isinstance(output, Text):
        return {"role": "assistant", "content": output.text, "refusal": None}
    name = output.name if isinstance(output, ToolCall) else output.tool
    arguments = output.arguments if isinstance(output, ToolCall) else _search_input(output)
    call = {
        "id": _id("call_"),
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }
    return {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}


def _chat_usage(usage: ServedUsage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def _chat_events(conv: Conversation, output: Output, usage: ServedUsage) -> list[bytes]:
    head = {
        "id": _id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": conv.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice]}

    message = _chat_message(output)
    chunks = [chunk({"role": "assistant", "content": ""})]
    if isinstance(output, Text):
        chunks.append(chunk({"content": output.text}))
        chunks.append(chunk({}, "stop"))
    else:
        call = message["tool_calls"][0]
        arguments = call["function"]["arguments"]
        opening = {
            **call,
            "index": 0,
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [opening]}))
        chunks.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}))
        chunks.append(chunk({}, "tool_calls"))
    # Usage in a last chunk, as for `include_usage`, whether or not the request asked.
    chunks.append({**head, "choices": [], "usage": _chat_usage(usage)})
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]
