"""The replay model: a local endpoint playing a plan of leanrig tool calls over Anthropic
Messages, OpenAI Responses and Chat Completions, served by uvicorn and driven over HTTP with
requests captured from the harnesses (tests/fixtures/harness_requests/)."""

from __future__ import annotations

import gzip
import socket
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import orjson
import pytest

from agent_tools.models.replay import (
    ReplayApp,
    ReplayPlan,
    ReplayPlanInvalid,
    ReplayPortUnavailable,
    Turn,
    load_plan,
    next_turn,
    replay_app,
    serve_replay_model,
)
from agent_tools.models.replay_plan import DEFAULT_FINAL
from agent_tools.models.replay_requests import Conversation, Text, ToolSearch
from agent_tools.models.replay_turns import MAX_SEARCHES, last_session

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures" / "harness_requests"
RIGHT = "@And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"
PLAN = {
    "calls": [
        {"tool": "open_task", "args": {"task_id": "{task}"}},
        {"tool": "set_proof", "args": {"session_id": "{session}", "body": "h"}},
        {"tool": "set_proof", "args": {"session_id": "{session}", "body": RIGHT}},
        {"tool": "check_proof", "args": {"session_id": "{session}"}},
        {"say": "proved"},
    ]
}
PROMPT = 'Prove `main` (task `and_swap` of suite `demo`). Call open_task with task_id = "and_swap".'
LEANRIG_TOOLS = ("open_task", "set_proof", "check_proof")
SESSION_RESULT = '{"version":1,"complete":false,"session_id":"s-42","text":"…"}'


@dataclass
class Served:
    url: str
    log: Path
    client: httpx.AsyncClient

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.client.post(self.url + path, content=orjson.dumps(body))

    async def events(self, path: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
        """A streamed answer's server-sent events: (event name or "", parsed data)."""
        async with self.client.stream("POST", self.url + path, content=orjson.dumps(body)) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            text = (await r.aread()).decode()
        return parse_sse(text)

    def log_lines(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.log.read_bytes().splitlines()]


def parse_sse(text: str) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
        payload = "\n".join(data)
        events.append((name, payload if payload == "[DONE]" else orjson.loads(payload)))
    return events


async def serve(plan: Any, tmp_path: Path) -> AsyncIterator[Served]:
    log = tmp_path / "model.jsonl"
    async with anyio.create_task_group() as tg:
        url = await tg.start(
            lambda task_status: serve_replay_model(
                ReplayPlan.from_json(plan), log=log, task_status=task_status
            )
        )
        async with httpx.AsyncClient(timeout=30) as client:
            yield Served(url, log, client)
        tg.cancel_scope.cancel()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async for s in serve(PLAN, tmp_path):
        yield s


def fixture(name: str) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads((FIXTURES / f"{name}.json").read_bytes())["body"]
    return body


# --- conversations in each API's shape ----------------------------------------------------------


def anthropic_request(messages: list[dict[str, Any]], *, stream: bool) -> dict[str, Any]:
    tools = [
        {"name": f"mcp__leanrig__{t}", "input_schema": {"type": "object"}} for t in LEANRIG_TOOLS
    ]
    return {
        "model": "replay",
        "max_tokens": 1000,
        "stream": stream,
        "messages": messages,
        "tools": tools,
    }


def anthropic_tool_use(content: list[dict[str, Any]]) -> dict[str, Any]:
    (block,) = [b for b in content if b["type"] == "tool_use"]
    return block


# --- Anthropic Messages -------------------------------------------------------------------------


async def test_anthropic_streaming_plays_the_plan_with_task_and_session_filled_in(
    served: Served,
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    calls: list[tuple[str, dict[str, Any]]] = []
    for turn in range(5):
        events = await served.events(
            "/v1/messages?beta=true", anthropic_request(messages, stream=True)
        )
        names = [name for name, _ in events]
        assert names == [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
        start, delta = events[1][1]["content_block"], events[2][1]["delta"]
        stop_reason = events[4][1]["delta"]["stop_reason"]
        if start["type"] == "text":
            assert (turn, delta["text"], stop_reason) == (4, "proved", "end_turn")
            break
        assert stop_reason == "tool_use"
        arguments = orjson.loads(delta["partial_json"])
        calls.append((start["name"], arguments))
        block = {**start, "input": arguments}
        messages.append({"role": "assistant", "content": [block]})
        result = SESSION_RESULT if start["name"].endswith("open_task") else '{"complete":false}'
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": result}],
            }
        )
    assert calls == [
        ("mcp__leanrig__open_task", {"task_id": "and_swap"}),
        ("mcp__leanrig__set_proof", {"session_id": "s-42", "body": "h"}),
        ("mcp__leanrig__set_proof", {"session_id": "s-42", "body": RIGHT}),
        ("mcp__leanrig__check_proof", {"session_id": "s-42"}),
    ]


async def test_anthropic_usage_counts_the_uncached_part_as_input(served: Served) -> None:
    first = anthropic_request([{"role": "user", "content": PROMPT}], stream=False)
    answer = (await served.post("/v1/messages", first)).json()
    assert answer["type"] == "message" and answer["stop_reason"] == "tool_use"
    usage = answer["usage"]
    body_tokens = len(orjson.dumps(first)) // 4
    # The first turn: nothing cached yet, no cache breakpoints marked: all input uncached.
    assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
    assert usage["input_tokens"] == body_tokens
    assert usage["output_tokens"] >= 1

    block = anthropic_tool_use(answer["content"])
    second = anthropic_request(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": PROMPT, "cache_control": {"type": "ephemeral"}}
                ],
            },
            {"role": "assistant", "content": [block]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": block["id"], "content": SESSION_RESULT}
                ],
            },
        ],
        stream=True,
    )
    events = await served.events("/v1/messages", second)
    start_usage = events[0][1]["message"]["usage"]
    final_output = events[4][1]["usage"]["output_tokens"]
    total = len(orjson.dumps(second)) // 4
    read, write = start_usage["cache_read_input_tokens"], start_usage["cache_creation_input_tokens"]
    assert read > 0 and write > 0 and start_usage["input_tokens"] > 0
    assert start_usage["input_tokens"] + read + write == total
    assert final_output >= 1

    lines = served.log_lines()
    assert [line["streaming"] for line in lines] == [False, True]
    assert lines[1]["input_tokens"] == total  # leanrig's convention: all input
    assert (lines[1]["cached_input_tokens"], lines[1]["cache_write_tokens"]) == (read, write)
    assert lines[1]["output_tokens"] == final_output
    assert lines[1]["reasoning_tokens"] == 0


async def test_claude_code_first_request_loads_the_planned_tools_with_tool_search(
    served: Served,
) -> None:
    events = await served.events("/v1/messages?beta=true", fixture("claude_first"))
    start, delta = events[1][1]["content_block"], events[2][1]["delta"]
    assert start["name"] == "ToolSearch"
    assert orjson.loads(delta["partial_json"]) == {
        "query": "select:mcp__leanrig__open_task,mcp__leanrig__set_proof,mcp__leanrig__check_proof",
        "max_results": 3,
    }
    assert served.log_lines()[0]["tool"] == "ToolSearch"
    assert served.log_lines()[0]["step"] == 0


async def test_claude_code_calls_a_tool_once_tool_search_loaded_it(served: Served) -> None:
    events = await served.events("/v1/messages?beta=true", fixture("claude_after_search"))
    start, delta = events[1][1]["content_block"], events[2][1]["delta"]
    assert start["name"] == "mcp__leanrig__open_task"
    assert orjson.loads(delta["partial_json"]) == {"task_id": "and_swap"}


async def test_claude_code_next_call_uses_the_session_its_last_result_returned(
    served: Served,
) -> None:
    body = fixture("claude_after_open")
    session = last_session([str(m["content"]) for m in body["messages"]])
    assert session
    events = await served.events("/v1/messages?beta=true", body)
    start, delta = events[1][1]["content_block"], events[2][1]["delta"]
    assert start["name"] == "mcp__leanrig__set_proof"
    assert orjson.loads(delta["partial_json"]) == {"session_id": session, "body": "h"}
    # The tool search before open_task is not a plan call: this is step 1.
    assert served.log_lines()[0]["step"] == 1


async def test_claude_code_with_tools_in_full_calls_them_directly(served: Served) -> None:
    events = await served.events("/v1/messages?beta=true", fixture("claude_full_tools"))
    assert events[1][1]["content_block"]["name"] == "mcp__leanrig__open_task"


# --- OpenAI Responses ---------------------------------------------------------------------------


def responses_item(events: list[tuple[str, Any]]) -> dict[str, Any]:
    (done,) = [data for name, data in events if name == "response.output_item.done"]
    item: dict[str, Any] = done["item"]
    return item


async def test_responses_stream_has_the_event_sequence_codex_reads(served: Served) -> None:
    body = {
        "model": "gpt-x",
        "stream": True,
        "input": PROMPT,
        "tools": [{"type": "function", "name": "open_task", "parameters": {}}],
    }
    events = await served.events("/v1/responses", body)
    names = [name for name, _ in events]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["type"] for _, data in events] == names
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    item = responses_item(events)
    assert item["type"] == "function_call" and item["name"] == "open_task"
    assert (
        item["call_id"]
        and item["id"]
        and orjson.loads(item["arguments"]) == {"task_id": "and_swap"}
    )
    completed = events[-1][1]["response"]
    assert completed["id"] == events[0][1]["response"]["id"]
    assert completed["status"] == "completed" and completed["output"] == [item]
    usage = completed["usage"]
    assert usage["input_tokens"] == len(orjson.dumps(body)) // 4
    assert usage["input_tokens_details"]["cached_tokens"] == 0
    assert usage["output_tokens_details"]["reasoning_tokens"] == 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


async def test_responses_usage_includes_the_cached_part_and_reasoning(served: Served) -> None:
    first = {
        "model": "gpt-x",
        "input": PROMPT,
        "reasoning": {"effort": "low"},
        "tools": [{"type": "function", "name": "open_task"}],
    }
    answer = (await served.post("/v1/responses", first)).json()
    (call,) = answer["output"]
    second = {
        **first,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": PROMPT}],
            },
            call,
            {"type": "function_call_output", "call_id": call["call_id"], "output": SESSION_RESULT},
        ],
    }
    answer = (await served.post("/v1/responses", second)).json()
    usage = answer["usage"]
    assert answer["object"] == "response" and answer["status"] == "completed"
    assert usage["input_tokens"] == len(orjson.dumps(second)) // 4  # cached part included
    assert 0 < usage["input_tokens_details"]["cached_tokens"] < usage["input_tokens"]
    assert usage["output_tokens_details"]["reasoning_tokens"] == 8
    assert usage["output_tokens"] > 8
    # The plan moved on to set_proof, called by name though the request does not offer it.
    (item,) = answer["output"]
    assert orjson.loads(item["arguments"]) == {"session_id": "s-42", "body": "h"}
    line = served.log_lines()[1]
    assert (line["api"], line["step"], line["tool"]) == ("openai-responses", 1, "set_proof")
    assert line["input_tokens"] == usage["input_tokens"]
    assert line["cached_input_tokens"] == usage["input_tokens_details"]["cached_tokens"]
    assert (line["reasoning_tokens"], line["cache_write_tokens"]) == (8, 0)


async def test_codex_first_request_searches_for_the_planned_tools(served: Served) -> None:
    item = responses_item(await served.events("/v1/responses", fixture("codex_first")))
    assert item["type"] == "tool_search_call" and item["execution"] == "client"
    assert item["call_id"] and item["id"]
    assert item["arguments"]["query"] == "open_task set_proof check_proof"
    assert item["arguments"]["limit"] >= 8


async def test_codex_searches_again_after_an_empty_tool_search(served: Served) -> None:
    item = responses_item(await served.events("/v1/responses", fixture("codex_empty_search")))
    assert item["type"] == "tool_search_call"


async def test_codex_calls_the_namespaced_tool_a_search_loaded(served: Served) -> None:
    item = responses_item(await served.events("/v1/responses", fixture("codex_after_search")))
    assert (item["type"], item["namespace"], item["name"]) == (
        "function_call",
        "mcp__leanrig",
        "open_task",
    )
    assert orjson.loads(item["arguments"]) == {"task_id": "and_swap"}


async def test_codex_reads_the_session_after_its_wall_time_prefix(served: Served) -> None:
    body = fixture("codex_after_open")
    (output,) = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    assert output.startswith("Wall time:")
    item = responses_item(await served.events("/v1/responses", body))
    assert (item["namespace"], item["name"]) == ("mcp__leanrig", "set_proof")
    assert orjson.loads(item["arguments"]) == {"session_id": last_session([output]), "body": "h"}
    assert served.log_lines()[0]["step"] == 1  # three tool searches before: not plan calls


async def test_codex_with_the_namespace_in_full_calls_it_directly(served: Served) -> None:
    item = responses_item(await served.events("/v1/responses", fixture("codex_full_tools")))
    assert (item["type"], item["namespace"], item["name"]) == (
        "function_call",
        "mcp__leanrig",
        "open_task",
    )


# --- OpenAI Chat Completions -------------------------------------------------------------------


def chat_request(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": t, "parameters": {}}} for t in LEANRIG_TOOLS]
    return {"model": "m", "messages": messages, "tools": tools, **extra}


async def test_chat_completions_plays_the_plan_without_streaming(served: Served) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "x"},
        {"role": "user", "content": PROMPT},
    ]
    for expected in LEANRIG_TOOLS[:2]:
        answer = (await served.post("/v1/chat/completions", chat_request(messages))).json()
        (choice,) = answer["choices"]
        assert answer["object"] == "chat.completion" and choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["function"]["name"] == expected
        messages += [
            choice["message"],
            {"role": "tool", "tool_call_id": call["id"], "content": SESSION_RESULT},
        ]
        usage = answer["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert orjson.loads(call["function"]["arguments"]) == {"session_id": "s-42", "body": "h"}
    assert 0 < usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]


async def test_chat_completions_stream_ends_with_a_usage_chunk_and_done(served: Served) -> None:
    body = chat_request(
        [{"role": "user", "content": PROMPT}],
        stream=True,
        stream_options={"include_usage": True},
        reasoning_effort="low",
    )
    events = await served.events("/v1/chat/completions", body)
    assert events[-1] == ("", "[DONE]")
    chunks = [data for _, data in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    opening = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert opening["function"]["name"] == "open_task" and opening["id"]
    arguments = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in chunks[1:3]
    )
    assert orjson.loads(arguments) == {"task_id": "and_swap"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    last = chunks[-1]
    assert last["choices"] == []
    assert last["usage"]["prompt_tokens"] == len(orjson.dumps(body)) // 4
    assert last["usage"]["completion_tokens_details"]["reasoning_tokens"] == 8


async def test_chat_completions_final_answer_is_text(tmp_path: Path) -> None:
    async for s in serve([{"say": "nothing to do"}], tmp_path):
        answer = (
            await s.post("/v1/chat/completions", chat_request([{"role": "user", "content": "hi"}]))
        ).json()
        (choice,) = answer["choices"]
        assert choice["finish_reason"] == "stop"
        assert choice["message"]["content"] == "nothing to do"
        assert s.log_lines()[0]["tool"] is None


# --- the plan -----------------------------------------------------------------------------------


async def test_a_task_of_its_own_wins_over_calls_and_the_default_answer_ends_it(
    tmp_path: Path,
) -> None:
    plan = {"calls": [{"say": "generic"}], "tasks": {"and_swap": [{"tool": "list_tasks"}]}}
    async for s in serve(plan, tmp_path):
        other = chat_request([{"role": "user", "content": "(task `or_swap` of suite `demo`)"}])
        said = (await s.post("/v1/chat/completions", other)).json()["choices"][0]["message"]
        assert said["content"] == "generic"
        mine = [{"role": "user", "content": PROMPT}]
        said = (await s.post("/v1/chat/completions", chat_request(mine))).json()["choices"][0][
            "message"
        ]
        assert said["tool_calls"][0]["function"]["name"] == "list_tasks"
        mine += [
            said,
            {"role": "tool", "tool_call_id": said["tool_calls"][0]["id"], "content": "{}"},
        ]
        said = (await s.post("/v1/chat/completions", chat_request(mine))).json()["choices"][0][
            "message"
        ]
        assert said["content"] == DEFAULT_FINAL
        assert [line["task"] for line in s.log_lines()] == ["or_swap", "and_swap", "and_swap"]


async def test_the_only_task_is_played_when_the_conversation_names_none(tmp_path: Path) -> None:
    plan = {"tasks": {"eq_symm": [{"tool": "open_task", "args": {"task_id": "{task}"}}]}}
    async for s in serve(plan, tmp_path):
        said = (
            await s.post("/v1/chat/completions", chat_request([{"role": "user", "content": "go"}]))
        ).json()
        call = said["choices"][0]["message"]["tool_calls"][0]["function"]
        assert orjson.loads(call["arguments"]) == {"task_id": "eq_symm"}


async def test_many_conversations_share_one_server(served: Served) -> None:
    """Conversations at different points of the plan, at once."""
    answers: dict[int, str] = {}

    async def ask(done: int) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
        for i in range(done):
            call = {"id": f"c{i}", "type": "function", "function": {"name": "x", "arguments": "{}"}}
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": SESSION_RESULT},
            ]
        answer = (await served.post("/v1/chat/completions", chat_request(messages))).json()
        message = answer["choices"][0]["message"]
        answers[done] = message["content"] or message["tool_calls"][0]["function"]["name"]

    async with anyio.create_task_group() as tg:
        for done in range(6):
            tg.start_soon(ask, done)
    assert answers == {
        0: "open_task",
        1: "set_proof",
        2: "set_proof",
        3: "check_proof",
        4: "proved",
        5: "proved",
    }


def test_a_bad_plan_file_is_refused_with_a_hint(tmp_path: Path) -> None:
    cases = {
        "missing.json": None,
        "not_json.json": b"{calls: [",
        "wrong_step.json": b'[{"tool": "open_task", "sleep": 1}]',
        "bad_sleep.json": b'[{"sleep": -1}]',
        "say_not_last.json": b'[{"say": "done"}, {"tool": "open_task"}]',
        "unknown_key.json": b'{"calls": [], "model": "x"}',
        "tasks_not_map.json": b'{"tasks": []}',
    }
    for name, content in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(ReplayPlanInvalid) as caught:
            load_plan(path)
        assert caught.value.hint and caught.value.hint in str(caught.value), name
    scripted = tmp_path / "scripted.json"  # `leanrig agent scripted`'s plans load unchanged
    scripted.write_bytes(orjson.dumps({**PLAN, "usage": {"input_tokens": 0}}))
    assert len(load_plan(scripted).calls) == 5


# --- sleeping, errors, serving ------------------------------------------------------------------


class FakeClient:
    """One ASGI request whose client can disconnect on cue (`gone`)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = orjson.dumps(body)
        self.read = False
        self.waiting = anyio.Event()
        self.gone = anyio.Event()
        self.sent: list[MutableMapping[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if not self.read:
            self.read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        self.waiting.set()
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)

    async def call(self, app: ReplayApp, path: str) -> None:
        scope = {"type": "http", "method": "POST", "path": path, "headers": [], "query_string": b""}
        await app(scope, self.receive, self.send)


async def test_a_planned_sleep_ends_when_the_client_disconnects(tmp_path: Path) -> None:
    app = replay_app(ReplayPlan.from_json([{"sleep": 3600}, {"say": "late"}]), log=tmp_path / "l")
    client = FakeClient(chat_request([{"role": "user", "content": PROMPT}]))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call, app, "/v1/chat/completions")
            await client.waiting.wait()  # the model is pausing, watching the connection
            assert len(app.pausing) == 1
            client.gone.set()
    assert client.sent == [] and app.pausing == set()
    assert not (tmp_path / "l").exists()


async def test_a_sleeping_request_gets_503_when_the_server_stops(tmp_path: Path) -> None:
    app = replay_app(ReplayPlan.from_json([{"sleep": 3600}, {"say": "late"}]))
    client = FakeClient({"model": "m", "input": PROMPT})
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call, app, "/v1/responses")
            await client.waiting.wait()
            app.close()
    assert client.sent[0]["status"] == 503
    assert orjson.loads(client.sent[1]["body"])["error"]["type"] == "server_error"


async def test_a_sleep_holds_the_answer_then_it_comes(tmp_path: Path) -> None:
    async for s in serve([{"sleep": 0.05}, {"say": "after a while"}], tmp_path):
        answer = (
            await s.post(
                "/v1/messages", anthropic_request([{"role": "user", "content": "x"}], stream=False)
            )
        ).json()
        assert answer["content"] == [{"type": "text", "text": "after a while"}]


async def test_requests_it_cannot_answer_get_the_apis_error_shape(served: Served) -> None:
    bad = await served.client.post(served.url + "/v1/messages", content=b"{not json")
    assert bad.status_code == 400
    assert bad.json()["type"] == "error"
    assert bad.json()["error"]["type"] == "invalid_request_error"
    bad = await served.client.post(served.url + "/v1/responses", content=b"[1]")
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    bad = await served.post("/v1/chat/completions", {"messages": []})
    assert bad.status_code == 400 and "model" in bad.json()["error"]["message"]
    missing = await served.client.get(served.url + "/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["message"]
    wrong_method = await served.client.get(served.url + "/v1/messages")
    assert wrong_method.status_code == 404
    models = (await served.client.get(served.url + "/v1/models")).json()
    assert models["object"] == "list" and models["data"][0]["id"]
    assert not served.log.exists()


async def test_serving_reports_its_url_and_refuses_a_busy_port(tmp_path: Path) -> None:
    async for s in serve([], tmp_path):
        assert s.url.startswith("http://127.0.0.1:")
        port = int(s.url.rsplit(":", 1)[1])
        with pytest.raises(ReplayPortUnavailable):
            await serve_replay_model(ReplayPlan(), port=port)
    with socket.create_server(("127.0.0.1", port)):  # released on the way out
        pass


def test_tool_search_is_retried_with_a_wait_then_given_up() -> None:
    plan = ReplayPlan.from_json(PLAN)

    def turn(searches: int) -> Turn:
        conv = Conversation(api="openai-responses", model="m", stream=True, body_bytes=100)
        conv.texts.append(PROMPT)
        conv.search_tool = "tool_search"
        conv.searches_since_call = searches
        return next_turn(plan, conv)

    first, again, last = turn(0), turn(1), turn(MAX_SEARCHES)
    assert isinstance(first.output, ToolSearch) and first.pause == 0
    assert isinstance(again.output, ToolSearch) and again.pause > 0
    assert isinstance(last.output, Text) and "open_task" in last.output.text


async def test_a_gzipped_request_is_read(served: Served) -> None:
    body = gzip.compress(orjson.dumps(chat_request([{"role": "user", "content": PROMPT}])))
    answer = await served.client.post(
        served.url + "/v1/chat/completions", content=body, headers={"content-encoding": "gzip"}
    )
    assert (
        answer.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "open_task"
    )
