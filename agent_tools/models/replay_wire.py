"""The replay model's three wire formats: Anthropic Messages, OpenAI Responses and OpenAI Chat
Completions.

Responsibility (and nothing else): read a request body into a `Conversation` (what the replay
model needs to know: the texts that name the task, the tool results, how many tool calls and
tool searches the conversation already holds, which tools it can call now, whether it offers a
tool search, its size for the usage) and write one model turn (`Output`, with its `Usage`) as
that API's JSON body or its server-sent events. Each API's own conventions live here: tool
calls and tool searches as each harness expects them (Claude Code's `ToolSearch` tool with
``select:`` queries; Codex's client-executed `tool_search_call` items and `mcp__SERVER`
namespaces), usage fields (Anthropic's `input_tokens` is the uncached part; OpenAI's input and
prompt counts include the cached part), event names and their order.

It must not: decide what to answer (`replay.py` does), do I/O, or keep time.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .usage import Api

__all__ = [
    "Conversation",
    "OfferedTool",
    "Output",
    "Text",
    "ToolCall",
    "ToolSearch",
    "Usage",
    "WireError",
    "error_body",
    "output_bytes",
    "parse_request",
    "render_events",
    "render_json",
]

# Names a harness gives its tool-search tool (Claude Code: `ToolSearch`; Codex's is a tool of
# type `tool_search`, its calls `tool_search_call` items). Calls of these are not plan calls.
SEARCH_TOOL_NAMES: Final = frozenset({"ToolSearch", "tool_search"})
# Responses items that are the model's own output (the conversation's assistant side).
RESPONSES_OUTPUT_ITEMS: Final = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "tool_search_call",
        "web_search_call",
        "reasoning",
    }
)
RESPONSES_CALL_ITEMS: Final = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
RESPONSES_RESULT_ITEMS: Final = frozenset(
    {"function_call_output", "custom_tool_call_output", "mcp_tool_call_output"}
)


class WireError(ValueError):
    """A request body the replay model cannot read (answered 400 in the API's error shape)."""


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """A tool the model may call now: ``name`` as it is called, inside ``namespace`` (Codex's
    MCP tools: name ``open_task`` in namespace ``mcp__leanrig``) or not."""

    name: str
    namespace: str | None = None

    def matches(self, tool: str) -> bool:
        """A plan's tool `X` is a tool named `X` or ending in `__X` (`mcp__leanrig__X`)."""
        return self.name == tool or self.name.endswith("__" + tool)


@dataclass(slots=True)
class Conversation:
    """What one request says, in the terms the replay model decides by."""

    api: Api
    model: str
    stream: bool
    body_bytes: int
    # The request asks for reasoning (Responses `reasoning`, Chat `reasoning_effort`).
    reasoning: bool = False
    # System, developer and user texts, in order (where a prompt names its task).
    texts: list[str] = field(default_factory=list)
    # Tool results' texts, in order (where the last `session_id` is).
    results: list[str] = field(default_factory=list)
    # Tool calls the conversation already holds, tool searches not counted.
    calls_made: int = 0
    # Tool searches since the last of those calls.
    searches_since_call: int = 0
    # Tools callable now: sent in full, or loaded by an earlier tool search.
    tools: list[OfferedTool] = field(default_factory=list)
    # The name of the tool-search tool the request offers, if any.
    search_tool: str | None = None
    # Bytes of the conversation after the model's last turn (None: the model has not spoken).
    new_bytes: int | None = None
    # The request marks cache breakpoints (Anthropic `cache_control`).
    cache_marked: bool = False


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSearch:
    """Load tools: ``names`` as the request names them (Claude Code's ``select:`` query);
    ``query`` for a search by words (Codex)."""

    tool: str
    names: tuple[str, ...]
    query: str
    limit: int


@dataclass(frozen=True, slots=True)
class Text:
    text: str


Output = ToolCall | ToolSearch | Text


@dataclass(frozen=True, slots=True)
class Usage:
    """leanrig's convention: ``input_tokens`` is all input (cache reads and writes included),
    ``output_tokens`` all output (reasoning included)."""

    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int


# --- reading requests -------------------------------------------------------------------------


def parse_request(api: Api, body: bytes) -> Conversation:
    """The conversation of a request body; `WireError` when it is not one."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"the request body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise WireError("the request body must be a JSON object")
    model = value.get("model")
    if not isinstance(model, str) or not model:
        raise WireError("`model` is required (a string)")
    conv = Conversation(
        api=api, model=model, stream=value.get("stream") is True, body_bytes=len(body)
    )
    if api == "anthropic-messages":
        _read_anthropic(value, conv)
        conv.cache_marked = b'"cache_control"' in body
    elif api == "openai-responses":
        _read_responses(value, conv)
    else:
        _read_chat(value, conv)
    return conv


def _list(value: dict[str, Any], key: str) -> list[Any]:
    got = value.get(key)
    if got is None:
        return []
    if not isinstance(got, list):
        raise WireError(f"`{key}` must be a list")
    return got


def _texts(content: Any, kinds: frozenset[str]) -> Iterator[str]:
    """The text of a message's content: a string, or parts of the given types."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and part.get("type", "text") in kinds:
                text = part.get("text")
                if isinstance(text, str):
                    yield text


TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})


def _read_anthropic(value: dict[str, Any], conv: Conversation) -> None:
    conv.texts.extend(_texts(value.get("system"), TEXT_PARTS))
    messages = _list(value, "messages")
    last_assistant = -1
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise WireError("each of `messages` must be an object")
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            last_assistant = i
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    _count_call(conv, str(block.get("name")) in SEARCH_TOOL_NAMES)
            continue
        conv.texts.extend(_texts(content, TEXT_PARTS))
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                conv.results.append("\n".join(_texts(block.get("content"), TEXT_PARTS)))
    if last_assistant >= 0:
        conv.new_bytes = len(orjson.dumps(messages[last_assistant + 1 :]))
    for tool in _list(value, "tools"):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str):
            continue
        if name in SEARCH_TOOL_NAMES:
            conv.search_tool = name
        else:
            conv.tools.append(OfferedTool(name))


def _count_call(conv: Conversation, search: bool) -> None:
    if search:
        conv.searches_since_call += 1
    else:
        conv.calls_made += 1
        conv.searches_since_call = 0


def _responses_tools(tools: list[Any], conv: Conversation) -> None:
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        kind, name = tool.get("type"), tool.get("name")
        if kind == "tool_search":
            conv.search_tool = "tool_search"
        elif kind == "namespace" and isinstance(name, str):
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    conv.tools.append(OfferedTool(inner["name"], namespace=name))
        elif isinstance(name, str):
            conv.tools.append(OfferedTool(name))


def _read_responses(value: dict[str, Any], conv: Conversation) -> None:
    instructions = value.get("instructions")
    if isinstance(instructions, str):
        conv.texts.append(instructions)
    reasoning = value.get("reasoning")
    conv.reasoning = isinstance(reasoning, dict)
    raw = value.get("input")
    items: list[Any] = [{"role": "user", "content": raw}] if isinstance(raw, str) else []
    if not isinstance(raw, str):
        items = _list(value, "input")
    last_output = -1
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise WireError("each of `input` must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            if item.get("role") == "assistant":
                last_output = i
            else:
                conv.texts.extend(_texts(item.get("content"), TEXT_PARTS))
        elif kind in RESPONSES_OUTPUT_ITEMS:
            last_output = i
            if kind in RESPONSES_CALL_ITEMS:
                _count_call(conv, search=str(item.get("name")) in SEARCH_TOOL_NAMES)
            elif kind == "tool_search_call":
                _count_call(conv, search=True)
        elif kind in RESPONSES_RESULT_ITEMS:
            conv.results.append("\n".join(_texts(item.get("output"), TEXT_PARTS)))
        elif kind == "tool_search_output":
            _responses_tools(item.get("tools") or [], conv)
    if last_output >= 0:
        conv.new_bytes = len(orjson.dumps(items[last_output + 1 :]))
    _responses_tools(_list(value, "tools"), conv)


def _read_chat(value: dict[str, Any], conv: Conversation) -> None:
    conv.reasoning = value.get("reasoning_effort") is not None
    messages = _list(value, "messages")
    last_assistant = -1
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise WireError("each of `messages` must be an object")
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            last_assistant = i
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                name = function.get("name") if isinstance(function, dict) else None
                _count_call(conv, search=name in SEARCH_TOOL_NAMES)
        elif role in ("tool", "function"):
            conv.results.append("\n".join(_texts(content, TEXT_PARTS)))
        else:
            conv.texts.extend(_texts(content, TEXT_PARTS))
    if last_assistant >= 0:
        conv.new_bytes = len(orjson.dumps(messages[last_assistant + 1 :]))
    for tool in _list(value, "tools"):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            conv.tools.append(OfferedTool(name))


# --- writing answers --------------------------------------------------------------------------


def output_bytes(output: Output) -> int:
    """The size of what the model says (its usage's output tokens are this // 4)."""
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
        # (`max_results` is required by its schema; a `select:` returns at most that many.)
        return {"query": "select:" + ",".join(output.names), "max_results": len(output.names)}
    return {"query": output.query, "limit": output.limit}


def render_json(conv: Conversation, output: Output, usage: Usage) -> dict[str, Any]:
    """The whole answer as the API's non-streaming JSON body."""
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


def render_events(conv: Conversation, output: Output, usage: Usage) -> list[bytes]:
    """The answer as the API's server-sent events, each one whole event."""
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


def _anthropic_usage(usage: Usage, *, output_tokens: int) -> dict[str, Any]:
    uncached = usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "output_tokens": output_tokens,
    }


def _anthropic_message(
    conv: Conversation, output: Output, usage: Usage, mid: str, content: list[dict[str, Any]]
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


def _anthropic_events(conv: Conversation, output: Output, usage: Usage) -> list[bytes]:
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


def _responses_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _responses_object(
    conv: Conversation, rid: str, output: list[dict[str, Any]], usage: Usage | None
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


def _responses_events(conv: Conversation, output: Output, usage: Usage) -> list[bytes]:
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


def _chat_usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def _chat_events(conv: Conversation, output: Output, usage: Usage) -> list[bytes]:
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
    # The usage rides in a last chunk of its own, as OpenAI sends it for `include_usage`: sent
    # whether or not the request asked (the meters downstream read it when it is there).
    chunks.append({**head, "choices": [], "usage": _chat_usage(usage)})
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]
