"""Model I/O, recorded: each model call's request and answer as one line of the attempt's
``model_io.jsonl`` (`leanrig run --record-model-io`; on by default with the replay model), for
transcripts (`leanrig export inspect`) and replays.

A line (schema ``v`` = 1): ``ts`` (the call's start, UTC), ``api`` (`model_request.Api`),
``path``, ``status``, ``streaming``, ``latency_s``, ``complete``, ``request`` (the request
body as JSON; its text when it is not JSON), ``response`` (the answer in the API's
whole-response shape: a streamed answer's events reassembled — an Anthropic ``Message``, an
OpenAI ``Response``, a ``chat.completion``; a JSON answer as it came; its text otherwise),
``notes`` (what could not be kept: an answer over `MAX_ANSWER_BYTES`, events that did not
parse) and ``error`` (the gateway's, as in ``model_calls.jsonl``).

Must not: write a header (keys and authentication travel there: no header is recorded, and any
occurrence of the gateway's key or placeholder in a body is masked), interpret a call beyond
reassembling its answer, hold more than `MAX_ANSWER_BYTES` of one answer.
"""

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
"""The most of one answer kept for its record (the agent gets all of it regardless)."""
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
    """``data`` with every occurrence of each of ``secrets`` (of 8 characters or more)
    replaced by `MASK`."""
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
    """The answer in its API's whole-response shape, and notes on what did not parse: a
    server-sent-event stream is reassembled, JSON is parsed, anything else kept as text."""
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
    """An Anthropic ``Message`` from its stream's events (text, thinking and tool-use blocks;
    a tool's streamed JSON input parsed at its block's end)."""
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
    """An OpenAI ``Response`` from its stream: the final event's (``response.completed``,
    ``…incomplete``, ``…failed``), its output filled from the items done when it has none."""
    final: dict[str, Any] = {"object": "response", "output": []}
    items: list[Any] = []
    for event in events:
        kind = str(event.get("type", ""))
        if kind == "response.output_item.done" and "item" in event:
            items.append(event["item"])
        elif kind in ("response.created", "response.in_progress", "response.completed",
                      "response.incomplete", "response.failed") and isinstance(
            event.get("response"), dict
        ):  # fmt: skip
            final = dict(event["response"])
        elif kind == "error":
            final["error"] = event
    if not final.get("output"):
        final["output"] = items
    return final


def _chat_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``chat.completion`` from its stream's chunks: each choice's content, reasoning and
    tool calls (their arguments joined) put together."""
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
                index, {"index": index, "message": {"role": "assistant", "content": None},
                        "finish_reason": None, "_calls": {}}
            )  # fmt: skip
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
    *, api: Api, path: str, started: float, status: int | None, streaming: bool | None,
    latency_s: float, complete: bool, error: str | None, request: bytes,
    answer: AnswerCapture, secrets: tuple[str | None, ...],
) -> dict[str, Any]:  # fmt: skip
    """One ``model_io.jsonl`` line: the request and the reassembled answer, ``secrets``
    masked in both."""
    notes: list[str] = []
    response: Any = None
    if answer.cut:
        notes.append(f"the answer was over {answer.limit} bytes: not kept")
    else:
        response, notes = reassemble(api, answer.content_type, masked(answer.body(), secrets))
    return {
        "v": MODEL_IO_SCHEMA, "ts": datetime.fromtimestamp(started, UTC).isoformat(),
        "api": api, "path": path, "status": status, "streaming": streaming,
        "latency_s": round(latency_s, 4), "complete": complete,
        "request": _json_or_text(masked(request, secrets)), "response": response,
        "notes": notes, "error": error,
    }  # fmt: skip


def append_io_line(path: Path, line: dict[str, Any]) -> None:
    """One ``O_APPEND`` write (parallel calls never interleave inside a line)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(line) + b"\n")
    finally:
        os.close(fd)
