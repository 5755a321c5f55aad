"""The replay model: a local model endpoint that plays a plan of leanrig tool calls, so an agent
harness (Claude Code, Codex, anything on Chat Completions) runs against leanrig without a real
model — a dry run that costs nothing, and the model side of the end-to-end tests.

Responsibility (and nothing else): answer ``POST /v1/messages`` (Anthropic Messages),
``POST /v1/responses`` (OpenAI Responses) and ``POST /v1/chat/completions`` (OpenAI Chat
Completions), streaming or not, with the plan's next step for the request's task, plus a
deterministic `usage`; ``GET /v1/models``; anything else a 404 JSON error. Stateless per
request: the request carries the whole conversation, so the position in the plan is the number
of tool calls it already holds (tool searches not counted), and many attempts can share one
server. The wire formats are `replay_wire.py`'s.

The plan (the shape of `leanrig agent scripted`'s)::

    {"calls": [{"tool": "open_task", "args": {"task_id": "{task}"}},
               {"tool": "set_proof", "args": {"session_id": "{session}", "body": "…"}},
               {"sleep": 2},
               {"say": "done"}],
     "tasks": {"and_swap": [ … ]}}

``tasks[ID]`` wins over ``calls`` for that task; a bare list is ``calls``. The task is the one
the conversation names (leanrig's prompts say ``(task `ID` of suite `NAME`)`` and ``task_id =
"ID"``), else the plan's only task. In string arguments ``{task}`` is the task id and
``{session}`` the ``session_id`` of the last tool result holding one. ``{"sleep": S}`` holds the
next answer S seconds (cut short when the client disconnects); ``{"say": TEXT}`` is the final
answer (when the plan runs out: ``done``). A planned tool the request does not offer yet is
first loaded through the harness's tool search (Claude Code's ``ToolSearch``, Codex's
``tool_search``) when the request offers one.

It must not: keep state between requests (beyond the optional log), call any tool itself, or
crash on a request it cannot read (the API's own error shape, 400/404).
"""

from __future__ import annotations

import gzip
import math
import os
import re
import socket
import zlib
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
import orjson

from lsp_bridge import LeanrigError

from .asgi import serve_asgi
from .replay_wire import (
    Conversation,
    OfferedTool,
    Output,
    Text,
    ToolCall,
    ToolSearch,
    Usage,
    WireError,
    error_body,
    output_bytes,
    parse_request,
    render_events,
    render_json,
)
from .usage import Api

__all__ = [
    "DEFAULT_FINAL",
    "ReplayApp",
    "ReplayPlan",
    "ReplayPlanInvalid",
    "ReplayPortUnavailable",
    "SayStep",
    "SleepStep",
    "Step",
    "ToolStep",
    "Turn",
    "load_plan",
    "next_turn",
    "replay_app",
    "serve_replay_model",
]

DEFAULT_FINAL: Final = "done"
PLAN_HINT: Final = (
    'a JSON plan: {"calls": [{"tool": NAME, "args": {…}}, {"sleep": SECONDS}, {"say": TEXT}], '
    '"tasks": {"TASK_ID": [ … ]}} (a bare list is "calls")'
)
# Tool searches in a row that may come back without the planned tool (a harness whose MCP
# server is still starting answers an empty search: Codex) before the model gives up; the wait
# before each repeated search doubles from the first to the cap.
MAX_SEARCHES: Final = 8
FIRST_SEARCH_WAIT: Final = 0.25
MAX_SEARCH_WAIT: Final = 2.0
# Codex's tool search returns its best `limit` matches (8 unless asked): ask for all of them.
SEARCH_LIMIT: Final = 64
MAX_BODY_BYTES: Final = 64 * 1024 * 1024
REASONING_TOKENS: Final = 8

TASK_IN_TITLE = re.compile(r"\(task `([^`]+)` of suite `[^`]*`\)")
TASK_IN_CALL = re.compile(r'task_id = "([^"]+)"')
SESSION_ID = re.compile(r'"session_id"\s*:\s*"([^"\\]*)"')
SESSION_ID_ESCAPED = re.compile(r'\\"session_id\\"\s*:\s*\\"([^"\\]*)\\"')


class ReplayPlanInvalid(LeanrigError):
    """The plan file cannot be read or is not a plan."""

    hint = PLAN_HINT


class ReplayPortUnavailable(LeanrigError):
    hint = "choose another port (0 lets the system pick a free one; the server says which)"


# --- the plan ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolStep:
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SleepStep:
    seconds: float


@dataclass(frozen=True, slots=True)
class SayStep:
    text: str


Step = ToolStep | SleepStep | SayStep


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """Steps per task (``tasks``), else ``calls``."""

    calls: tuple[Step, ...] = ()
    tasks: Mapping[str, tuple[Step, ...]] = field(default_factory=dict)

    def steps_for(self, task: str | None) -> tuple[Step, ...]:
        if task is not None and task in self.tasks:
            return self.tasks[task]
        return self.calls

    @classmethod
    def from_json(cls, value: Any, *, source: str = "the plan") -> ReplayPlan:
        """A plan from its parsed JSON; `ReplayPlanInvalid` says what is wrong."""
        if isinstance(value, list):
            value = {"calls": value}
        if not isinstance(value, dict):
            raise ReplayPlanInvalid(f"{source}: a plan is a list of steps or an object")
        # `usage` (and each step's `expect`) belong to `leanrig agent scripted`: accepted so
        # its plans replay here unchanged, not used.
        unknown = set(value) - {"calls", "tasks", "usage"}
        if unknown:
            raise ReplayPlanInvalid(f"{source}: unknown keys {sorted(unknown)}")
        tasks = value.get("tasks", {})
        if not isinstance(tasks, dict):
            raise ReplayPlanInvalid(f"{source}: `tasks` maps a task id to its list of steps")
        return cls(
            calls=_steps(value.get("calls", []), f"{source}: calls"),
            tasks={str(k): _steps(v, f"{source}: tasks.{k}") for k, v in tasks.items()},
        )


def _steps(value: Any, where: str) -> tuple[Step, ...]:
    if not isinstance(value, list):
        raise ReplayPlanInvalid(f"{where} must be a list of steps")
    steps: list[Step] = []
    for i, raw in enumerate(value):
        at = f"{where}[{i}]"
        if steps and isinstance(steps[-1], SayStep):
            raise ReplayPlanInvalid(f"{at}: `say` is the final answer; nothing can follow it")
        steps.append(_step(raw, at))
    return tuple(steps)


def _step(raw: Any, at: str) -> Step:
    if not isinstance(raw, dict):
        raise ReplayPlanInvalid(f"{at}: a step is an object, not {raw!r}")
    kinds = [k for k in ("tool", "sleep", "say") if k in raw]
    if len(kinds) != 1:
        raise ReplayPlanInvalid(f"{at}: a step has one of `tool`, `sleep` or `say`: {raw!r}")
    allowed = {"tool": {"tool", "args", "expect"}, "sleep": {"sleep"}, "say": {"say"}}[kinds[0]]
    if set(raw) - allowed:
        raise ReplayPlanInvalid(f"{at}: unknown keys {sorted(set(raw) - allowed)}")
    if "tool" in raw:
        tool, args = raw["tool"], raw.get("args", {})
        if not isinstance(tool, str) or not tool:
            raise ReplayPlanInvalid(f"{at}: `tool` is a tool name")
        if not isinstance(args, dict):
            raise ReplayPlanInvalid(f"{at}: `args` is an object of arguments")
        return ToolStep(tool, args)
    if "sleep" in raw:
        seconds = raw["sleep"]
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            raise ReplayPlanInvalid(f"{at}: `sleep` is a number of seconds ≥ 0")
        return SleepStep(float(seconds))
    if not isinstance(raw["say"], str):
        raise ReplayPlanInvalid(f"{at}: `say` is the final answer's text")
    return SayStep(raw["say"])


def load_plan(path: Path) -> ReplayPlan:
    """The plan in a JSON file; `ReplayPlanInvalid` (with a hint) when it is not one."""
    try:
        value = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ReplayPlanInvalid(f"cannot read the plan {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ReplayPlanInvalid(f"the plan {path} is not JSON: {exc}") from None
    return ReplayPlan.from_json(value, source=str(path))


# --- one turn ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """The model's answer to one request: ``output`` after ``pause`` seconds."""

    output: Output
    pause: float
    task: str | None
    step: int
    # The plan's tool this turn calls or loads (None: the final answer).
    tool: str | None


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


def _fill(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for key, text in names.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


def _offered(conv: Conversation, tool: str) -> OfferedTool | None:
    exact = [t for t in conv.tools if t.name == tool]
    found = exact or [t for t in conv.tools if t.matches(tool)]
    return found[0] if found else None


def _full_name(tool: str, texts: Sequence[str]) -> str:
    """How the request names a tool it has not loaded (Claude Code lists deferred tools by
    name in a message: ``mcp__leanrig__open_task``); the plan's name when it does not."""
    pattern = re.compile(r"(?<![\w-])([\w-]*__" + re.escape(tool) + r")(?![\w-])")
    for text in texts:
        if found := pattern.search(text):
            return found.group(1)
    return tool


def next_turn(plan: ReplayPlan, conv: Conversation) -> Turn:
    """What the model says to this conversation (no I/O, no clock)."""
    task = find_task(plan, conv.texts)
    steps = plan.steps_for(task)
    step = conv.calls_made
    pause, upcoming = _position(steps, step)
    if not isinstance(upcoming, ToolStep):
        text = upcoming.text if isinstance(upcoming, SayStep) else DEFAULT_FINAL
        return Turn(Text(text), pause, task, step, None)
    names = {"task": task or "", "session": last_session(conv.results)}
    arguments = _fill(dict(upcoming.args), names)
    offered = _offered(conv, upcoming.tool)
    if offered is not None:
        call = ToolCall(offered.name, arguments, offered.namespace)
        return Turn(call, pause, task, step, upcoming.tool)
    if conv.search_tool is None:
        # Nothing to load it with: call it by the name the request knows (the harness says
        # whether that works).
        call = ToolCall(_full_name(upcoming.tool, conv.texts), arguments)
        return Turn(call, pause, task, step, upcoming.tool)
    tried = conv.searches_since_call
    if tried >= MAX_SEARCHES:
        text = (
            f"replay model: the plan's tool `{upcoming.tool}` is not among the tools offered "
            f"after {tried} tool searches; stopping"
        )
        return Turn(Text(text), 0.0, task, step, None)
    # Every tool of the plan not loaded yet, loaded at once (Claude Code selects them by name).
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
        else:  # `say`: the final answer, also to a conversation past the plan's calls
            return (pause if seen == calls_made else 0.0), s
    return (pause if seen == calls_made else 0.0), None


def usage_of(conv: Conversation, output: Output) -> Usage:
    """Deterministic token counts: all input = body bytes // 4; the cached part = the
    conversation before the model's last turn (simulated prompt caching, 0 before the model
    has spoken); Anthropic cache writes = half the new part when the request marks cache
    breakpoints; output = output bytes // 4 (at least 1) plus 8 reasoning tokens when the
    request asks for reasoning (OpenAI APIs)."""
    total = max(1, conv.body_bytes // 4)
    cached = 0
    if conv.new_bytes is not None:
        cached = min(max(0, (conv.body_bytes - conv.new_bytes) // 4), total - 1)
    write = (total - cached) // 2 if conv.api == "anthropic-messages" and conv.cache_marked else 0
    reasoning = REASONING_TOKENS if conv.reasoning and conv.api != "anthropic-messages" else 0
    output_tokens = max(1, output_bytes(output) // 4) + reasoning
    return Usage(total, cached, write, output_tokens, reasoning)


# --- HTTP -------------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ROUTES: Final[dict[str, Api]] = {
    "/messages": "anthropic-messages",
    "/responses": "openai-responses",
    "/chat/completions": "openai-chat",
}


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class ReplayApp:
    """The ASGI app (`replay_app`). ``close()`` answers requests still pausing with 503 and
    new ones likewise (a server stopping)."""

    def __init__(self, plan: ReplayPlan, *, log: Path | None = None) -> None:
        self.plan = plan
        self.log = log
        self.closing = False
        # Requests pausing now (a plan's sleep, a wait before a repeated tool search).
        self.pausing: set[anyio.CancelScope] = set()

    def close(self) -> None:
        self.closing = True
        for scope in list(self.pausing):
            scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = str(scope["path"]).rstrip("/")
        path = path.removeprefix("/v1") if path.startswith("/v1/") else path
        method = scope["method"]
        api = ROUTES.get(path.removesuffix("/count_tokens"))
        if method == "GET" and (path == "/models" or path.startswith("/models/")):
            await _send_json(send, 200, _models(path))
        elif method != "POST" or api is None:
            message = f"no such endpoint: {method} {scope['path']}"
            await _send_json(send, 404, error_body(None, 404, message))
        else:
            try:
                body = await _read_body(scope, receive)
                conv = parse_request(api, body)
            except _Refused as exc:
                await _send_json(send, exc.status, error_body(api, exc.status, exc.message))
            except WireError as exc:
                await _send_json(send, 400, error_body(api, 400, str(exc)))
            else:
                if path.endswith("/count_tokens"):
                    await _send_json(send, 200, {"input_tokens": max(1, conv.body_bytes // 4)})
                else:
                    await self._answer(conv, receive, send)

    async def _answer(self, conv: Conversation, receive: Receive, send: Send) -> None:
        turn = next_turn(self.plan, conv)
        if turn.pause > 0 or self.closing:
            outcome = await self._pause(turn.pause, receive)
            if outcome == "gone":
                return
            if outcome == "closing":
                body = error_body(conv.api, 503, "the replay model is shutting down")
                await _send_json(send, 503, body)
                return
        usage = usage_of(conv, turn.output)
        if conv.stream:
            headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            for event in render_events(conv, turn.output, usage):
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        else:
            await _send_json(send, 200, render_json(conv, turn.output, usage))
        self._log(conv, turn, usage)

    async def _pause(self, seconds: float, receive: Receive) -> str:
        """Wait ``seconds``: "done", or "gone" when the client disconnected first, or
        "closing" when the server is stopping."""
        gone = False
        with anyio.CancelScope() as scope:
            self.pausing.add(scope)
            try:
                if self.closing:
                    scope.cancel()
                async with anyio.create_task_group() as tg:

                    async def watch() -> None:
                        nonlocal gone
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        gone = True
                        tg.cancel_scope.cancel()

                    tg.start_soon(watch)
                    await anyio.sleep(seconds)
                    tg.cancel_scope.cancel()
            finally:
                self.pausing.discard(scope)
        if gone:
            return "gone"
        return "closing" if scope.cancelled_caught else "done"

    def _log(self, conv: Conversation, turn: Turn, usage: Usage) -> None:
        if self.log is None:
            return
        output = turn.output
        tool = (
            output.name
            if isinstance(output, ToolCall)
            else output.tool
            if isinstance(output, ToolSearch)
            else None
        )
        line = {
            "api": conv.api,
            "task": turn.task,
            "step": turn.step,
            "streaming": conv.stream,
            "model": conv.model,
            "input_tokens": usage.input_tokens,
            "cached_input_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "tool": tool,
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
        }
        # One write of one line to a file opened for appending: whole lines, in the order
        # served, from any number of concurrent requests (a few microseconds on the loop).
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, orjson.dumps(line) + b"\n")
        finally:
            os.close(fd)


def replay_app(plan: ReplayPlan, *, log: Path | None = None) -> ReplayApp:
    """The replay model as an ASGI app; ``log``: one JSON line per served model call."""
    return ReplayApp(plan, log=log)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _read_body(scope: Scope, receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Refused(400, "the client disconnected before its request ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _Refused(413, f"the request body is over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    encoding = dict(scope.get("headers", [])).get(b"content-encoding", b"identity").lower()
    try:
        if encoding == b"gzip":
            return gzip.decompress(body)
        if encoding == b"deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error, EOFError) as exc:
        raise _Refused(400, f"the request body is not valid {encoding.decode()}: {exc}") from None
    if encoding != b"identity":
        raise _Refused(415, f"unsupported content-encoding {encoding.decode(errors='replace')}")
    return body


def _models(path: str) -> dict[str, Any]:
    model = {
        "id": "replay",
        "object": "model",
        "type": "model",
        "created": 0,
        "created_at": "1970-01-01T00:00:00Z",
        "owned_by": "leanrig",
        "display_name": "leanrig replay model",
    }
    if path.startswith("/models/"):
        return {**model, "id": path.removeprefix("/models/")}
    listing = {"object": "list", "data": [model], "has_more": False}
    return {**listing, "first_id": "replay", "last_id": "replay"}


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


# --- serving ----------------------------------------------------------------------------------


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.create_server((host, port), family=family)
    except OverflowError as exc:
        raise ReplayPortUnavailable(f"cannot listen on {host}:{port}: {exc}") from exc
    except OSError as exc:
        reason = exc.strerror or exc
        raise ReplayPortUnavailable(f"cannot listen on {host}:{port}: {reason}") from exc
    listener.setblocking(False)
    return listener


async def serve_replay_model(
    plan: ReplayPlan,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    log: Path | None = None,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the replay model on ``host:port`` (0: a free port) until cancelled;
    ``task_status.started(url)`` (``http://HOST:PORT``) once it listens. On the way out,
    requests still pausing are answered 503 and the server stops within about a second."""
    listener = _listen(host, port)
    bound = listener.getsockname()[1]
    url = f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"
    app = ReplayApp(plan, log=log)
    stop, settled = anyio.Event(), anyio.Event()
    listening = False

    def ready() -> None:
        nonlocal listening
        listening = True
        settled.set()

    async def run() -> None:
        try:
            # Shielded: the server stops when `stop` is set (gracefully), not by cancellation.
            with anyio.CancelScope(shield=True):
                await serve_asgi(app, listener, stop, ready)
        finally:
            listener.close()
            settled.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await settled.wait()
            if not listening:
                raise ReplayPortUnavailable(f"the replay model did not start on {url}")
            task_status.started(url)
            await anyio.sleep_forever()
        finally:
            app.close()
            stop.set()
