"""The three model APIs' wire JSON and harness session logs as Inspect chat messages.

Unknown items become text, never an error. Must not read files or call a model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentReasoning,
    ContentText,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.tool import ToolCall, ToolCallError, ToolInfo, ToolParams
from pydantic import ValidationError

from ..models import Api


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def tool_name(name: str) -> str:
    """A harness's name for a leanrig tool, bare: ``mcp__leanrig__set_proof`` → ``set_proof``."""
    return name.rsplit("__", 1)[-1]


def _text(value: Any) -> str:
    """Text of a content value: a string, a list of text parts, or JSON of anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
        return "\n".join(parts)
    if value is None:
        return ""
    return orjson.dumps(value).decode()


def _arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments (an object, or its JSON text) and a parse error if any."""
    if isinstance(value, dict):
        return value, None
    if isinstance(value, str):
        if not value.strip():
            return {}, None
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            return {"_raw": value}, str(exc)
        return (parsed, None) if isinstance(parsed, dict) else ({"value": parsed}, None)
    return ({}, None) if value is None else ({"value": value}, None)


def _call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    args, error = _arguments(arguments)
    return ToolCall(
        id=str(call_id or ""), function=str(name or "?"), arguments=args, parse_error=error
    )


def _assistant(
    content: list[Content], calls: list[ToolCall], model: str | None
) -> ChatMessageAssistant:
    body: str | list[Content] = content
    if all(isinstance(c, ContentText) for c in content):
        body = "\n".join(c.text for c in content if isinstance(c, ContentText))
    return ChatMessageAssistant(
        content=body, tool_calls=calls or None, model=model, source="generate"
    )


def _user(role: str, content: Any) -> ChatMessage:
    text = _text(content)
    if role in ("system", "developer"):
        return ChatMessageSystem(content=text)
    return ChatMessageUser(content=text)


def _anthropic_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def anthropic_messages(
    messages: Iterable[Any], system: Any = None, model: str | None = None
) -> list[ChatMessage]:
    """Anthropic ``system`` and ``messages`` as Inspect messages, tool results as tool messages."""
    out: list[ChatMessage] = []
    if system:
        out.append(ChatMessageSystem(content=_text(system)))
    names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", "user"))
        blocks = _anthropic_blocks(message.get("content"))
        if role == "assistant":
            content: list[Content] = []
            calls: list[ToolCall] = []
            for b in blocks:
                kind = b.get("type")
                if kind == "text":
                    content.append(ContentText(text=str(b.get("text", ""))))
                elif kind in ("thinking", "redacted_thinking"):
                    content.append(
                        ContentReasoning(
                            reasoning=str(b.get("thinking") or b.get("data") or ""),
                            signature=b.get("signature"),
                            redacted=kind == "redacted_thinking",
                        )
                    )
                elif kind in ("tool_use", "server_tool_use"):
                    names[str(b.get("id"))] = str(b.get("name"))
                    calls.append(_call(b.get("id"), b.get("name"), b.get("input")))
                else:
                    content.append(ContentText(text=f"[{kind}]"))
            out.append(_assistant(content, calls, model))
            continue
        texts: list[str] = []
        for b in blocks:
            if b.get("type") == "tool_result":
                call_id = str(b.get("tool_use_id", ""))
                result = _text(b.get("content"))
                error = ToolCallError("unknown", result) if b.get("is_error") else None
                out.append(
                    ChatMessageTool(
                        content=result,
                        tool_call_id=call_id,
                        function=names.get(call_id),
                        error=error,
                    )
                )
            elif b.get("type") == "text":
                texts.append(str(b.get("text", "")))
            else:
                texts.append(f"[{b.get('type', 'part')}]")
        if texts:
            out.append(_user(role, "\n".join(texts)))
    return out


def _anthropic_output(response: dict[str, Any], model: str) -> ModelOutput:
    (message,) = anthropic_messages([{**response, "role": "assistant"}], model=model) or [
        ChatMessageAssistant(content="")
    ]
    usage = _obj(response.get("usage"))
    read, write = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    stop = {
        "end_turn": "stop",
        "tool_use": "tool_calls",
        "max_tokens": "max_tokens",
        "stop_sequence": "stop",
    }.get(str(response.get("stop_reason")), "unknown")
    return _output(
        message,
        model,
        stop,
        _usage(usage.get("input_tokens"), usage.get("output_tokens"), read, write),
        response,
    )


def responses_items(items: Iterable[Any], model: str | None = None) -> list[ChatMessage]:
    """Responses input or output items as Inspect messages; function calls join the turn before."""
    out: list[ChatMessage] = []
    names: dict[str, str] = {}
    turn: tuple[list[Content], list[ToolCall]] | None = None

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            out.append(_assistant(turn[0], turn[1], model))
            turn = None

    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message" and item.get("role") == "assistant":
            turn = turn or ([], [])
            turn[0].append(ContentText(text=_text(item.get("content"))))
        elif kind == "message":
            flush()
            out.append(_user(str(item.get("role", "user")), item.get("content")))
        elif kind == "reasoning":
            turn = turn or ([], [])
            summary = _text(item.get("summary")) or _text(item.get("content"))
            turn[0].append(
                ContentReasoning(reasoning=summary or "(reasoning)", redacted=not summary)
            )
        elif kind in ("function_call", "custom_tool_call", "tool_search_call", "local_shell_call"):
            turn = turn or ([], [])
            name = item.get("name") or kind.removesuffix("_call")
            if item.get("namespace"):
                name = f"{item['namespace']}__{name}"
            call_id = str(item.get("call_id") or item.get("id") or "")
            names[call_id] = str(name)
            arguments = item.get(
                "arguments",
                item.get(
                    "input",
                    {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")},
                ),
            )
            turn[1].append(_call(call_id, name, arguments))
        elif kind is not None and str(kind).endswith("_output"):
            flush()
            call_id = str(item.get("call_id") or item.get("id") or "")
            output = item.get("output", item.get("tools", item))
            out.append(
                ChatMessageTool(
                    content=_text(output), tool_call_id=call_id, function=names.get(call_id)
                )
            )
        else:
            flush()
            out.append(ChatMessageUser(content=f"[{kind}] {_text(item)[:2000]}"))
    flush()
    return out


def _responses_output(response: dict[str, Any], model: str) -> ModelOutput:
    messages = responses_items(response.get("output") or [], model)
    assistant = next(
        (m for m in reversed(messages) if isinstance(m, ChatMessageAssistant)),
        ChatMessageAssistant(content=""),
    )
    stop = "tool_calls" if assistant.tool_calls else "stop"
    usage = _openai_usage(_obj(response.get("usage")), "input", "output")
    return _output(assistant, model, stop, usage, response)


def chat_messages(messages: Iterable[Any], model: str | None = None) -> list[ChatMessage]:
    """Chat Completions messages as Inspect messages."""
    out: list[ChatMessage] = []
    names: dict[str, str] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role", "user"))
        if role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {} if isinstance(c, dict) else {}
                names[str(c.get("id"))] = str(fn.get("name"))
                calls.append(_call(c.get("id"), fn.get("name"), fn.get("arguments")))
            content: list[Content] = []
            for key in ("reasoning_content", "reasoning"):
                if isinstance(m.get(key), str) and m[key]:
                    content.append(ContentReasoning(reasoning=m[key]))
            if m.get("content"):
                content.append(ContentText(text=_text(m.get("content"))))
            out.append(_assistant(content, calls, model))
        elif role == "tool":
            call_id = str(m.get("tool_call_id", ""))
            out.append(
                ChatMessageTool(
                    content=_text(m.get("content")),
                    tool_call_id=call_id,
                    function=names.get(call_id),
                )
            )
        else:
            out.append(_user(role, m.get("content")))
    return out


def _chat_output(response: dict[str, Any], model: str) -> ModelOutput:
    choices = response.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = _obj(choice.get("message"))
    (assistant,) = chat_messages([{**message, "role": "assistant"}], model)
    stop = {
        "stop": "stop",
        "tool_calls": "tool_calls",
        "length": "max_tokens",
        "content_filter": "content_filter",
    }.get(str(choice.get("finish_reason")), "unknown")
    usage = _openai_usage(_obj(response.get("usage")), "prompt", "completion")
    return _output(assistant, model, stop, usage, response)


def _openai_usage(usage: dict[str, Any], given: str, made: str) -> ModelUsage | None:
    """OpenAI's usage: ``input``/``output`` tokens (Responses) or ``prompt``/``completion``
    (Chat Completions); cached input is counted apart from the fresh."""
    cached = _obj(usage.get(f"{given}_tokens_details")).get("cached_tokens")
    total_in = usage.get(f"{given}_tokens")
    return _usage(
        None if total_in is None else total_in - (cached or 0),
        usage.get(f"{made}_tokens"),
        cached,
        None,
        _obj(usage.get(f"{made}_tokens_details")).get("reasoning_tokens"),
    )


def _usage(
    fresh: Any, output: Any, read: Any = None, write: Any = None, reasoning: Any = None
) -> ModelUsage | None:
    """Inspect's usage (cache reads and writes apart from ``input_tokens``); None without counts."""
    if not isinstance(fresh, int) or not isinstance(output, int):
        return None
    read = read if isinstance(read, int) else None
    write = write if isinstance(write, int) else None
    total = fresh + (read or 0) + (write or 0) + output
    return ModelUsage(
        input_tokens=fresh,
        output_tokens=output,
        total_tokens=total,
        input_tokens_cache_read=read,
        input_tokens_cache_write=write,
        reasoning_tokens=reasoning if isinstance(reasoning, int) else None,
    )


def _output(
    message: ChatMessage,
    model: str,
    stop: Any,
    usage: ModelUsage | None,
    response: dict[str, Any],
) -> ModelOutput:
    assert isinstance(message, ChatMessageAssistant)
    error = response.get("error")
    return ModelOutput(
        model=model,
        choices=[ChatCompletionChoice(message=message, stop_reason=stop)],
        usage=usage,
        error=_text(error) if error else None,
    )


def request_messages(api: Api, request: Any) -> list[ChatMessage]:
    """The conversation a recorded request sent (empty for a body that is no JSON object)."""
    if not isinstance(request, dict):
        return []
    model = request.get("model") if isinstance(request.get("model"), str) else None
    if api == "anthropic-messages":
        return anthropic_messages(request.get("messages") or [], request.get("system"), model)
    if api == "openai-responses":
        items = request.get("input")
        head: list[ChatMessage] = []
        if request.get("instructions"):
            head.append(ChatMessageSystem(content=_text(request["instructions"])))
        if isinstance(items, str):
            return [*head, ChatMessageUser(content=items)]
        return [*head, *responses_items(items or [], model)]
    return chat_messages(request.get("messages") or [], model)


def response_output(api: Api, response: Any, model: str) -> ModelOutput:
    """A recorded answer as Inspect's model output (an error answer: its error)."""
    if not isinstance(response, dict):
        return ModelOutput.from_content(model, "", error=_text(response) or "no answer kept")
    if api == "anthropic-messages":
        return _anthropic_output(response, model)
    if api == "openai-responses":
        return _responses_output(response, model)
    return _chat_output(response, model)


def request_tools(api: Api, request: Any) -> list[ToolInfo]:
    """The tools a recorded request offered (their schemas where Inspect can read them)."""
    if not isinstance(request, dict):
        return []
    found: list[ToolInfo] = []
    for tool in request.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        spec = _obj(tool.get("function")) or tool
        name = spec.get("name") or tool.get("type")
        if not isinstance(name, str):
            continue
        schema = spec.get("input_schema") or spec.get("parameters") or {}
        try:
            params = ToolParams.model_validate(schema)
        except ValidationError:
            params = ToolParams()
        found.append(
            ToolInfo(name=name, description=str(spec.get("description") or ""), parameters=params)
        )
    return found
