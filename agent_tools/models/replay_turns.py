"""What the replay model says next, decided from the conversation alone, and the turn's usage.

Pure: no I/O, no time. Must not read or write a wire format."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .replay_answers import output_bytes
from .replay_plan import (
    DEFAULT_FINAL,
    ReplayPlan,
    SayStep,
    SleepStep,
    Step,
    ToolStep,
    fill_placeholders,
)
from .replay_requests import (
    Conversation,
    OfferedTool,
    Output,
    ServedUsage,
    Text,
    ToolCall,
    ToolSearch,
)

# Searches may come back empty while a harness's MCP server starts; the wait doubles to a cap.
MAX_SEARCHES: Final = 8


FIRST_SEARCH_WAIT: Final = 0.25


MAX_SEARCH_WAIT: Final = 2.0


SEARCH_LIMIT: Final = 64  # Codex returns only its best `limit` matches


REASONING_TOKENS: Final = 8


TASK_IN_TITLE = re.compile(r"\(task `([^`]+)` of suite `[^`]*`\)")


TASK_IN_CALL = re.compile(r'task_id = "([^"]+)"')


SESSION_ID = re.compile(r'"session_id"\s*:\s*"([^"\\]*)"')


SESSION_ID_ESCAPED = re.compile(r'\\"session_id\\"\s*:\s*\\"([^"\\]*)\\"')


@dataclass(frozen=True, slots=True)
class Turn:
    """The model's answer to one request: ``output`` after ``pause`` seconds."""

    output: Output
    pause: float
    task: str | None
    step: int
    tool: str | None  # the plan's tool this turn calls or loads (None: the final answer)


def find_task(plan: ReplayPlan, texts: Sequence[str]) -> str | None:
    """The task the conversation names, else the plan's only task."""
    for pattern in (TASK_IN_TITLE, TASK_IN_CALL):
        for text in texts:
            if found := pattern.search(text):
                return found.group(1)
    if len(plan.tasks) == 1:
        return next(iter(plan.tasks))
    return None


def last_session(results: Sequence[str]) -> str:
    """The ``session_id`` of the last tool result holding one ("" before any)."""
    for text in reversed(results):
        for pattern in (SESSION_ID, SESSION_ID_ESCAPED):
            if found := pattern.search(text):
                return found.group(1)
    return ""


def _offered(conv: Conversation, tool: str) -> OfferedTool | None:
    exact = [t for t in conv.tools if t.name == tool]
    found = exact or [t for t in conv.tools if t.matches(tool)]
    return found[0] if found else None


def _full_name(tool: str, texts: Sequence[str]) -> str:
    """How the request's texts name a tool it has not loaded; else the plan's name."""
    pattern = re.compile(r"(?<![\w-])([\w-]*__" + re.escape(tool) + r")(?![\w-])")
    for text in texts:
        if found := pattern.search(text):
            return found.group(1)
    return tool


def next_turn(plan: ReplayPlan, conv: Conversation) -> Turn:
    task = find_task(plan, conv.texts)
    steps = plan.steps_for(task)
    step = conv.calls_made
    pause, upcoming = _position(steps, step)
    if not isinstance(upcoming, ToolStep):
        text = upcoming.text if isinstance(upcoming, SayStep) else DEFAULT_FINAL
        return Turn(Text(text), pause, task, step, None)
    names = {"task": task or "", "session": last_session(conv.results)}
    arguments = fill_placeholders(dict(upcoming.args), names)
    offered = _offered(conv, upcoming.tool)
    if offered is not None:
        call = ToolCall(offered.name, arguments, offered.namespace)
        return Turn(call, pause, task, step, upcoming.tool)
    if conv.search_tool is None:
        call = ToolCall(_full_name(upcoming.tool, conv.texts), arguments)
        return Turn(call, pause, task, step, upcoming.tool)
    tried = conv.searches_since_call
    if tried >= MAX_SEARCHES:
        text = (
            f"replay model: the plan's tool `{upcoming.tool}` is not among the tools offered "
            f"after {tried} tool searches; stopping"
        )
        return Turn(Text(text), 0.0, task, step, None)
    # Load every planned tool not loaded yet at once.
    planned = [s.tool for s in steps if isinstance(s, ToolStep) and _offered(conv, s.tool) is None]
    missing = list(dict.fromkeys([upcoming.tool, *planned]))
    search = ToolSearch(
        conv.search_tool,
        tuple(_full_name(t, conv.texts) for t in missing),
        " ".join(missing),
        SEARCH_LIMIT,
    )
    wait = 0.0 if tried == 0 else min(FIRST_SEARCH_WAIT * 2 ** (tried - 1), MAX_SEARCH_WAIT)
    return Turn(search, wait, task, step, upcoming.tool)


def _position(steps: Sequence[Step], calls_made: int) -> tuple[float, Step | None]:
    """The pause and the step after ``calls_made`` tool steps (None: the plan ran out)."""
    seen, pause = 0, 0.0
    for s in steps:
        if isinstance(s, ToolStep):
            if seen == calls_made:
                return pause, s
            seen += 1
            pause = 0.0
        elif isinstance(s, SleepStep):
            pause += s.seconds
        else:  # `say`
            return (pause if seen == calls_made else 0.0), s
    return (pause if seen == calls_made else 0.0), None


def usage_of(conv: Conversation, output: Output) -> ServedUsage:
    """Deterministic token counts: bytes // 4, the part before the model's last turn cached."""
    total = max(1, conv.body_bytes // 4)
    cached = 0
    if conv.new_bytes is not None:
        cached = min(max(0, (conv.body_bytes - conv.new_bytes) // 4), total - 1)
    write = (total - cached) // 2 if conv.api == "anthropic-messages" and conv.cache_marked else 0
    reasoning = REASONING_TOKENS if conv.reasoning and conv.api != "anthropic-messages" else 0
    output_tokens = max(1, output_bytes(output) // 4) + reasoning
    return ServedUsage(total, cached, write, output_tokens, reasoning)
