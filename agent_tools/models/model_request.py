"""What a model call is, from its request alone: its API and what its body asks. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import orjson

__all__ = ["Api", "RequestFacts", "api_of", "count", "request_facts", "text"]

Api = Literal["anthropic-messages", "openai-responses", "openai-chat"]


def api_of(path: str) -> Api | None:
    """The API a request path (or URL) calls by its end, or None for one making no model call."""
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
class RequestFacts:
    """What a request body says about the call; None where it does not say.

    Anthropic's `reasoning_effort` is `output_config.effort`, else the `thinking` type.
    """

    model: str | None
    stream: bool | None
    reasoning_effort: str | None
    thinking_budget: int | None = None

    def to_json(self) -> dict[str, int | str | bool | None]:
        return asdict(self)


def request_facts(api: Api, body: bytes) -> RequestFacts:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return RequestFacts(None, None, None)
    if not isinstance(obj, dict):
        return RequestFacts(None, None, None)
    model = text(obj.get("model"))
    stream = obj.get("stream")
    effort: str | None = None
    budget: int | None = None
    if api == "anthropic-messages":
        config = obj.get("output_config")
        if isinstance(config, dict):
            effort = text(config.get("effort"))
        thinking = obj.get("thinking")
        if isinstance(thinking, dict):
            effort = effort or text(thinking.get("type"))
            budget = count(thinking.get("budget_tokens"))
    else:
        if api == "openai-chat":
            effort = text(obj.get("reasoning_effort"))
        reasoning = obj.get("reasoning")
        if effort is None and isinstance(reasoning, dict):
            effort = text(reasoning.get("effort"))
    return RequestFacts(model, stream if isinstance(stream, bool) else None, effort, budget)


def count(value: object) -> int | None:
    """A non-negative int (or integral float) as a token count; anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
