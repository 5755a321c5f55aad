"""Each model call's request and reassembled answer, recorded as a ``model_io.jsonl`` line.

Must not: record a header or an unmasked key, interpret a call beyond reassembling its answer,
or hold more than `MAX_ANSWER_BYTES` of one answer."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from .model_request import Api
from .sse_events import SseEvents

__all__ = [
    "MAX_ANSWER_BYTES",
    "MODEL_IO_FILE",
    "MODEL_IO_SCHEMA",
    "AnswerCapture",
    "append_io_line",
    "io_line",
    "masked",
    "reassemble",
]

MODEL_IO_FILE: Final = "model_io.jsonl"
MODEL_IO_SCHEMA: Final = 1
MAX_ANSWER_BYTES: Final = 32 * 2**20
"""The most of one answer kept for its record (the agent gets all of it)."""
MASK: Final = "[masked]"


@dataclass(slots=True)
class AnswerCapture:
    """An answer's bytes as they pass to the agent, kept up to ``limit``."""

    limit: int = MAX_ANSWER_BYTES
    content_type: str = ""
    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    cut: bool = False

    def feed(self, chunk: bytes) -> None:
        if self.cut:
            return
        if self.size + len(chunk) > self.limit:
            self.cut = True
            self.parts.clear()  # a partial answer would read as a whole one
            return
        self.parts.append(chunk)
        self.size += len(chunk)

    def body(self) -> bytes:
        return b"".join(self.parts)


def masked(data: bytes, secrets: tuple[str | None, ...]) -> bytes:
    """``data`` with each of ``secrets`` (of 8 characters or more) replaced by `MASK`."""
    for secret in secrets:
        if secret and len(secret) >= 8:
            data = data.replace(secret.encode(), MASK.encode())
    return data


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _json_or_text(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", errors="replace")


def reassemble(api: Api, content_type: str, body: bytes) -> tuple[Any, list[str]]:
    """The answer in its API's whole-response shape, and notes on what did not parse."""
    if "text/event-stream" not in content_type.lower():
        return _json_or_text(body), []
    notes: list[str] = []
    events: list[tuple[str, Any]] = []

    def on_event(name: bytes, payload: bytes) -> None:
        if payload.strip() == b"[DONE]":
            return
        try:
            events.append((name.decode("utf-8", "replace"), orjson.loads(payload)))
        except orjson.JSONDecodeError:
            notes.append(f"an event that is not JSON was left out: {payload[:80]!r}")

    parser = SseEvents(on_event, notes.append, MAX_ANSWER_BYTES)
    parser.feed(body)
    parser.finish()
    objects = [obj for _, obj in events if isinstance(obj, dict)]
    if api == "anthropic-messages":
        return _anthropic_message(objects, notes), notes
    if api == "openai-responses":
        return _response(objects), notes
    return _chat_completion(objects), notes


def _anthropic_message(events: list[dict[str, Any]], notes: list[str]) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message.update({k: v for k, v in event["message"].items() if k != "content"})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[int(event.get("index", len(blocks)))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            index = int(event.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event["delta"]
            for key in ("text", "thinking", "signature"):
                if isinstance(delta.get(key), str):
                    block[key] = str(block.get(key) or "") + delta[key]
            if isinstance(delta.get("partial_json"), str):
                partial.setdefault(index, []).append(delta["partial_json"])
        elif kind == "message_delta":
            if isinstance(event.get("delta"), dict):
                message.update(event["delta"])
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**message.get("usage", {}), **event["usage"]}
        elif kind == "error":
            message["error"] = event.get("error")
    for index, pieces in partial.items():
        text = "".join(pieces)
        try:
            blocks[index]["input"] = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError:
            notes.append(f"content block {index}: its streamed input is not JSON")
            blocks[index]["input"] = {"_unparsed": text}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _response(events: list[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI ``Response``: the final event's, its output filled from the items if empty."""
    final: dict[str, Any] = {"object": "response", "output": []}
    items: list[Any] = []
    for event in events:
        kind = str(event.get("type", ""))
        if kind == "response.output_item.done" and "item" in event:
            items.append(event["item"])
        elif kind in (
            "response.created",
            "response.in_progress",
            "response.completed",
            "response.incomplete",
            "response.failed",
        ) and isinstance(event.get("response"), dict):
            final = dict(event["response"])
        elif kind == "error":
            final["error"] = event
    if not final.get("output"):
        final["output"] = items
    return final


def _chat_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"object": "chat.completion", "choices": []}
    choices: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for key in ("id", "model", "created", "usage", "system_fingerprint"):
            if chunk.get(key) is not None:
                out[key] = chunk[key]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            index = int(choice.get("index", 0))
            slot = choices.setdefault(
                index,
                {
                    "index": index,
                    "message": {"role": "assistant", "content": None},
                    "finish_reason": None,
                    "_calls": {},
                },
            )
            if choice.get("finish_reason") is not None:
                slot["finish_reason"] = choice["finish_reason"]
            delta = _obj(choice.get("delta"))
            message = slot["message"]
            for key in ("content", "reasoning_content", "reasoning", "refusal"):
                if isinstance(delta.get(key), str):
                    message[key] = (message.get(key) or "") + delta[key]
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                got = slot["_calls"].setdefault(
                    int(call.get("index", 0)),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                got["id"] = call.get("id") or got["id"]
                fn = _obj(call.get("function"))
                got["function"]["name"] += fn.get("name") or ""
                got["function"]["arguments"] += fn.get("arguments") or ""
    for index in sorted(choices):
        slot = choices[index]
        calls = slot.pop("_calls")
        if calls:
            slot["message"]["tool_calls"] = [calls[i] for i in sorted(calls)]
        out["choices"].append(slot)
    return out


def io_line(
    *,
    api: Api,
    path: str,
    started: float,
    status: int | None,
    streaming: bool | None,
    latency_s: float,
    complete: bool,
    error: str | None,
    request: bytes,
    answer: AnswerCapture,
    secrets: tuple[str | None, ...],
) -> dict[str, Any]:
    """One ``model_io.jsonl`` line, ``secrets`` masked in request and answer."""
    notes: list[str] = []
    response: Any = None
    if answer.cut:
        notes.append(f"the answer was over {answer.limit} bytes: not kept")
    else:
        response, notes = reassemble(api, answer.content_type, masked(answer.body(), secrets))
    return {
        "v": MODEL_IO_SCHEMA,
        "ts": datetime.fromtimestamp(started, UTC).isoformat(),
        "api": api,
        "path": path,
        "status": status,
        "streaming": streaming,
        "latency_s": round(latency_s, 4),
        "complete": complete,
        "request": _json_or_text(masked(request, secrets)),
        "response": response,
        "notes": notes,
        "error": error,
    }


def append_io_line(path: Path, line: dict[str, Any]) -> None:
    """One ``O_APPEND`` write, so parallel calls never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(line) + b"\n")
    finally:
        os.close(fd)
