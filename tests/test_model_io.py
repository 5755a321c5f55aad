"""Model I/O recorded by the gateway (`--record-model-io`): each call's request and whole answer
(streams reassembled) for the three APIs, no key or header in the file; when a run records, and
the export's hint without Inspect."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import orjson
import pytest

from agent_tools.models import MODEL_IO_FILE, ModelGateway, gateway_client, load_plan, replay_app
from agent_tools.models.model_io import AnswerCapture, io_line, reassemble
from agent_tools.runs import InspectMissing, RunOptions, export_inspect
from agent_tools.runs.options import records_model_io
from agent_tools.servers import listen_local, serve_asgi

pytestmark = pytest.mark.anyio

KEY = "sk-real-secret-0123456789abcdef"
PLACEHOLDER = "leanrig-gateway-key"
ARGS = {"session_id": "s1", "body": "@Eq.refl N N.z"}
PLAN = {"calls": [{"tool": "set_proof", "args": ARGS}, {"say": "done"}]}
PROMPT = f"Prove it (task `refl_z` of suite `demo`); my key is {KEY}"

REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "anthropic-messages": (
        "/v1/messages",
        {
            "model": "replay",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": PROMPT}],
            "tools": [{"name": "mcp__leanrig__set_proof", "input_schema": {"type": "object"}}],
        },
    ),
    "openai-chat": (
        "/v1/chat/completions",
        {
            "model": "replay",
            "messages": [{"role": "user", "content": PROMPT}],
            "tools": [{"type": "function", "function": {"name": "set_proof", "parameters": {}}}],
        },
    ),
    "openai-responses": (
        "/v1/responses",
        {
            "model": "replay",
            "input": [{"role": "user", "content": PROMPT}],
            "tools": [{"type": "function", "name": "set_proof", "parameters": {}}],
        },
    ),
}


def unix_listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(16)
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def serving(app: Any, listener: socket.socket) -> AsyncIterator[None]:
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        ready = anyio.Event()
        tg.start_soon(serve_asgi, app, listener, stop, ready.set)
        with anyio.fail_after(10):
            await ready.wait()
        yield
        stop.set()


@asynccontextmanager
async def agent_through_gateway(
    tmp: Path, *, record: bool = True
) -> AsyncIterator[tuple[ModelGateway, httpx.AsyncClient]]:
    """An agent's client → a gateway recording model I/O → the replay model playing PLAN."""
    (tmp / "plan.json").write_bytes(orjson.dumps(PLAN))
    up = listen_local(0)
    url = f"http://127.0.0.1:{up.getsockname()[1]}"
    async with gateway_client() as client, serving(replay_app(load_plan(tmp / "plan.json")), up):
        gateway = ModelGateway(
            upstream=url,
            client=client,
            calls_path=tmp / "model_calls.jsonl",
            placeholder=PLACEHOLDER,
            key=KEY,
            io_path=tmp / MODEL_IO_FILE if record else None,
        )
        async with serving(gateway, unix_listener(tmp / "model.sock")):
            transport = httpx.AsyncHTTPTransport(uds=str(tmp / "model.sock"))
            async with httpx.AsyncClient(transport=transport, base_url="http://agent") as agent:
                yield gateway, agent


def the_call(api: str, response: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tool call (name, arguments) in a whole answer of ``api``."""
    if api == "anthropic-messages":
        (block,) = response["content"]
        assert block["type"] == "tool_use"
        return block["name"], block["input"]
    if api == "openai-chat":
        (call,) = response["choices"][0]["message"]["tool_calls"]
        return call["function"]["name"], orjson.loads(call["function"]["arguments"])
    (item,) = [i for i in response["output"] if i["type"] == "function_call"]
    return item["name"], orjson.loads(item["arguments"])


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("api", sorted(REQUESTS))
async def test_each_model_call_is_recorded_with_its_answer_reassembled(
    tmp_path: Path, api: str, stream: bool
) -> None:
    path, body = REQUESTS[api]
    headers = {"x-api-key": PLACEHOLDER, "authorization": f"Bearer {PLACEHOLDER}"}
    async with agent_through_gateway(tmp_path) as (gateway, agent):
        with anyio.fail_after(20):
            answer = await agent.post(path, json={**body, "stream": stream}, headers=headers)
    assert answer.status_code == 200
    (line,) = (tmp_path / MODEL_IO_FILE).read_bytes().splitlines()
    record = orjson.loads(line)
    assert record["api"] == api and record["status"] == 200 and record["complete"] is True
    assert record["streaming"] is stream and record["notes"] == []
    # The request as sent (the key in it masked); the answer whole, as a non-streamed one is.
    assert record["request"]["messages" if api != "openai-responses" else "input"][0][
        "content"
    ] == PROMPT.replace(KEY, "[masked]")
    name, args = the_call(api, record["response"])
    assert name.endswith("set_proof") and args == ARGS
    if not stream:
        assert record["response"] == answer.json()
    assert len(gateway.calls) == 1


async def test_no_key_and_no_header_is_written(tmp_path: Path) -> None:
    async with agent_through_gateway(tmp_path) as (_, agent):
        for api, (path, body) in REQUESTS.items():
            headers = (
                {"x-api-key": PLACEHOLDER}
                if api.startswith("anthropic")
                else {"authorization": f"Bearer {PLACEHOLDER}"}
            )
            with anyio.fail_after(20):
                await agent.post(path, json={**body, "stream": True}, headers=headers)
    written = (tmp_path / MODEL_IO_FILE).read_bytes()
    assert len(written.splitlines()) == 3
    for secret in (KEY, PLACEHOLDER, "x-api-key", "authorization", "Bearer"):
        assert secret.encode() not in written.lower() and secret.encode() not in written


async def test_without_io_path_nothing_is_recorded(tmp_path: Path) -> None:
    path, body = REQUESTS["openai-chat"]
    async with agent_through_gateway(tmp_path, record=False) as (gateway, agent):
        with anyio.fail_after(20):
            assert (await agent.post(path, json=body)).status_code == 200
    assert len(gateway.calls) == 1 and not (tmp_path / MODEL_IO_FILE).exists()


def test_an_answer_over_the_cap_is_noted_not_kept() -> None:
    capture = AnswerCapture(limit=10, content_type="application/json")
    capture.feed(b'{"a": "0123456789"}')
    line = io_line(
        api="openai-chat",
        path="/v1/chat/completions",
        started=0.0,
        status=200,
        streaming=False,
        latency_s=0.1,
        complete=True,
        error=None,
        request=b"{}",
        answer=capture,
        secrets=(),
    )
    assert line["response"] is None and "over 10 bytes" in line["notes"][0]


def test_a_stream_that_breaks_off_keeps_what_came_with_a_note() -> None:
    stream = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n'
        b'data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use",'
        b'"id":"t","name":"x"}}\n\n'
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta",'
        b'"partial_json":"{\\"a\\": 1"}}\n\n'
    )
    message, notes = reassemble("anthropic-messages", "text/event-stream", stream)
    assert message["id"] == "m" and message["content"][0]["name"] == "x"
    assert message["content"][0]["input"] == {"_unparsed": '{"a": 1'}
    assert notes == ["content block 0: its streamed input is not JSON"]


def test_the_replay_model_records_by_default_and_a_flag_decides_otherwise() -> None:
    suite = Path("suite")
    assert records_model_io(RunOptions(suite=suite, agent="a", model="replay"))
    assert not records_model_io(RunOptions(suite=suite, agent="a", model="gpt-5.5"))
    assert records_model_io(RunOptions(suite=suite, agent="a", record_model_io=True))
    assert not records_model_io(
        RunOptions(suite=suite, agent="a", model="replay", record_model_io=False)
    )


def test_the_export_without_inspect_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *rest: Any) -> Any:
        return None if name == "inspect_ai" else real(name, *rest)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(InspectMissing) as caught:
        export_inspect([tmp_path], tmp_path / "out.eval")
    assert "leanrig[inspect]" in caught.value.hint or ".[inspect]" in caught.value.hint
