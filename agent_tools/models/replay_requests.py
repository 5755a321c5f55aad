"""The replay model's requests, in its three wire formats, read into a `Conversation`.

Also the model turn's shapes and each harness's tool conventions. Must not decide or write
answers, do I/O, or keep time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from lsp_bridge import LeanrigError

from .model_request import Api

# Tool-search tools (Claude Code, Codex): their calls are not plan calls.
SEARCH_TOOL_NAMES: Final = frozenset({"ToolSearch", "tool_search"})
# Responses items that are the model's own output.
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


class WireError(LeanrigError, ValueError):
    """A request body the replay model cannot read (answered 400)."""


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """A tool the model may call now, inside ``namespace`` (Codex's MCP tools) or not."""

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
    reasoning: bool = False
    texts: list[str] = field(default_factory=list)  # system, developer and user texts
    results: list[str] = field(default_factory=list)  # tool results' texts
    calls_made: int = 0  # tool searches not counted
    searches_since_call: int = 0
    tools: list[OfferedTool] = field(default_factory=list)  # callable now
    search_tool: str | None = None
    new_bytes: int | None = None  # after the model's last turn (None: it has not spoken)
    cache_marked: bool = False  # Anthropic `cache_control`


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSearch:
    """Load tools by ``names`` (Claude Code) or by a ``query`` of words (Codex)."""

    tool: str
    names: tuple[str, ...]
    query: str
    limit: int


@dataclass(frozen=True, slots=True)
class Text:
    text: str


Output = ToolCall | ToolSearch | Text


@dataclass(frozen=True, slots=True)
class ServedUsage:
    """Token counts in leanrig's convention (``input_tokens`` includes cache reads and writes)."""

    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int


def parse_request(api: Api, body: bytes) -> Conversation:
    """The conversation of a request body; raises `WireError` when it is not one."""
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
