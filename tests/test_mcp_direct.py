"""Tool calls answered without the SDK's request pipeline (mcp_direct.py) answer exactly as the
SDK does: the same requests, in both protocol eras, sent to a server with direct calls and to
one where the SDK answers everything, against the real service and Lean; cancellation, the
input's end and a crash against stand-in services (named as such)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from agent_tools.servers import ServeOptions, open_service
from agent_tools.servers.fdstreams import FdReceive, FdSend
from agent_tools.servers.mcp_direct import DirectToolCalls
from agent_tools.servers.mcp_server import LeanrigMCP
from agent_tools.servers.textlines import TextLines, TextWriter
from agent_tools.sessions import ToolError

from .rpc_client import DEMO

pytestmark = pytest.mark.anyio

RIGHT = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"
WRONG = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {},
              "clientInfo": {"name": "t", "version": "1"}}  # fmt: skip


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def line(rid: Any, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return orjson.dumps(message) + b"\n"


def call(rid: Any, name: str, arguments: Any, meta: Any = None) -> bytes:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return line(rid, "tools/call", params)


class Wire:
    """`serve_lines` of ``server`` on a pair of pipes: lines in, reply lines out."""

    def __init__(self, to_server: int, from_server: int) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self.buffer = b""

    def send(self, data: bytes) -> None:
        os.write(self.to_server, data)

    def close_input(self) -> None:
        os.close(self.to_server)
        self.to_server = -1

    async def reply(self, seconds: float = 60) -> dict[str, Any] | None:
        """The next reply line, None once the server's output ended."""
        with anyio.fail_after(seconds):
            while b"\n" not in self.buffer:
                await anyio.wait_readable(self.from_server)
                chunk = os.read(self.from_server, 2**20)
                if not chunk:
                    return None
                self.buffer += chunk
        first, self.buffer = self.buffer.split(b"\n", 1)
        reply: dict[str, Any] = orjson.loads(first)
        return reply

    async def answer(self, data: bytes) -> dict[str, Any]:
        self.send(data)
        reply = await self.reply()
        assert reply is not None
        return reply


@asynccontextmanager
async def serving(server: LeanrigMCP) -> AsyncIterator[Wire]:
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(in_r, False)
    os.set_blocking(out_w, False)
    os.set_blocking(out_r, False)
    wire = Wire(in_w, out_r)

    async def serve() -> None:
        try:
            await server.serve_lines(TextLines(FdReceive(in_r)), TextWriter(FdSend(out_w)))
        finally:
            os.close(out_w)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            yield wire
            tg.cancel_scope.cancel()
    finally:
        for fd in (in_r, wire.to_server, out_r):
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.contextmanager
def counting_direct_calls() -> Iterator[list[Any]]:
    """The requests answered directly (a spy on `DirectToolCalls.take`)."""
    taken: list[Any] = []
    original = DirectToolCalls.take

    def take(self: DirectToolCalls, text: str) -> bool:
        answered = original(self, text)
        if answered:
            taken.append(orjson.loads(text)["id"])
        return answered

    DirectToolCalls.take = take  # type: ignore[method-assign, assignment]
    try:
        yield taken
    finally:
        DirectToolCalls.take = original  # type: ignore[method-assign]


SESSION = re.compile(rb"[0-9a-f]{32}")


def normalized(reply: dict[str, Any]) -> Any:
    """A reply without what differs between two servers: session ids, measured times (also
    inside the text content, which is the structured result as JSON)."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: _timeless(k, v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(n) for n in node]
        if isinstance(node, str) and node.startswith("{"):
            with contextlib.suppress(orjson.JSONDecodeError):
                return {"json": walk(orjson.loads(node))}
        return node

    def _timeless(key: str, value: Any) -> Any:
        if key == "elapsed_ms":
            return 0
        if key == "stages_ms" and isinstance(value, dict):
            return sorted(value)
        return walk(value)

    text = SESSION.sub(b"SID", orjson.dumps(reply))
    return walk(orjson.loads(text))


async def script(wire: Wire, modern: bool) -> dict[Any, Any]:
    """One client's requests, in the era ``modern`` says; every reply by id."""
    meta = ENVELOPE if modern else None
    replies: dict[Any, Any] = {}

    async def ask(data: bytes) -> dict[str, Any]:
        reply = await wire.answer(data)
        replies[reply.get("id")] = normalized(reply)
        return reply

    if modern:
        await ask(line(1, "server/discover", {"_meta": ENVELOPE}))
    else:
        await ask(line(1, "initialize", INITIALIZE))
        wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    opened = await ask(call(2, "open_task", {"task_id": "and_swap"}, meta))
    sid = opened["result"]["structuredContent"]["session_id"]
    await ask(call(3, "set_proof", {"session_id": sid, "body": WRONG}, meta))
    await ask(call("four", "set_proof", {"session_id": sid, "body": RIGHT}, meta))
    await ask(call(5, "get_goals", {"session_id": sid, "line": 8, "column": 3}, meta))
    await ask(call(6, "set_proof", {"session_id": "nope", "body": RIGHT}, meta))
    await ask(call(7, "set_proof", {"session_id": sid, "body": 3}, meta))
    await ask(call(8, "set_proof", {"session_id": sid, "body": RIGHT, "x": 1}, meta))
    await ask(call(9, "no_such_tool", {}, meta))
    await ask(call(10, "list_tasks", {}, meta))
    await ask(call(11, "get_proof_state", {"session_id": sid}, meta))
    # Not taken directly: a progress token; the other era's shape; an unsupported version.
    await ask(call(12, "list_tasks", {}, {**(meta or {}), "progressToken": "p"}))
    await ask(call(13, "list_tasks", {}, None if modern else ENVELOPE))
    if modern:
        old = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
        await ask(call(14, "list_tasks", {}, old))
    await ask(call(15, "check_proof", {"session_id": sid}, meta))
    return replies


@pytest.mark.parametrize("modern", [False, True], ids=["handshake era", "2026 era"])
async def test_direct_calls_answer_as_the_sdk_does(tmp_path: Path, modern: bool) -> None:
    answers: dict[bool, dict[Any, Any]] = {}
    taken: list[Any] = []
    for direct in (False, True):
        options = ServeOptions(suite=DEMO, run_dir=tmp_path / f"run-{direct}", sandbox=False)
        async with open_service(options) as service:
            server = LeanrigMCP(service, "t", direct_calls=direct)
            with counting_direct_calls() as taken:
                async with serving(server) as wire:
                    answers[direct] = await script(wire, modern)
    assert answers[True] == answers[False]
    # The plain calls were answered directly (else this compared the SDK with itself).
    assert taken == [2, 3, "four", 5, 6, 7, 8, 10, 11, 15]
    sdk = answers[False]
    assert sdk[3]["result"]["structuredContent"]["complete"] is False
    assert sdk["four"]["result"]["structuredContent"]["complete"] is True
    assert sdk[15]["result"]["structuredContent"]["accepted"] is True
    assert sdk[6]["result"]["isError"] is True
    assert "error" in sdk[9]


class _Result:
    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        return {"tasks": []}


class _StandIn:
    """Stands in for ProofService: ``list_tasks`` as the test says (hangs, or crashes)."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.sessions: dict[str, Any] = {}
        self.library = None
        self.finished: list[str] = []

    async def list_tasks(self) -> _Result:
        try:
            if self.behaviour == "crash":
                raise RuntimeError("boom")
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.finished.append("cancelled")
            raise
        raise AssertionError

    async def open_task(self, task_id: str, client: str) -> _Result:
        return _Result()

    def record_invalid(self, tool: str, arguments: Any, client: str, error: Exception) -> None:
        pass


async def _handshake(wire: Wire) -> None:
    assert "result" in await wire.answer(line(1, "initialize", INITIALIZE))
    wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


@pytest.mark.parametrize("direct", [False, True], ids=["sdk", "direct"])
async def test_a_call_the_peer_cancels_is_cancelled_and_never_answered(direct: bool) -> None:
    stand_in = _StandIn("hang")
    server = LeanrigMCP(stand_in, "t", direct_calls=direct)  # type: ignore[arg-type]
    with counting_direct_calls() as taken:
        async with serving(server) as wire:
            await _handshake(wire)
            wire.send(call(5, "list_tasks", {}))
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": "5", "reason": "enough"}}  # fmt: skip
            wire.send(orjson.dumps(cancel) + b"\n")
            after = await wire.answer(call(6, "open_task", {"task_id": "x"}))
            assert after["id"] == 6 and "result" in after
            with anyio.fail_after(5):
                while not stand_in.finished:  # the call was cancelled, the session goes on
                    await anyio.sleep(0.01)
            with anyio.move_on_after(0.5):
                assert await wire.reply() is None  # (nothing for 5, ever)
    assert stand_in.finished == ["cancelled"]
    assert taken == ([5, 6] if direct else [])


@pytest.mark.parametrize("direct", [False, True], ids=["sdk", "direct"])
async def test_a_call_in_flight_when_the_input_ends_is_answered_connection_closed(
    direct: bool,
) -> None:
    stand_in = _StandIn("hang")
    server = LeanrigMCP(stand_in, "t", direct_calls=direct)  # type: ignore[arg-type]
    async with serving(server) as wire:
        await _handshake(wire)
        wire.send(call(5, "list_tasks", {}))
        await anyio.sleep(0.2)
        wire.close_input()
        reply = await wire.reply()
        assert await wire.reply() is None  # the session ended
    assert reply == {"jsonrpc": "2.0", "id": 5,
                     "error": {"code": -32000, "message": "Connection closed"}}  # fmt: skip
    assert stand_in.finished == ["cancelled"]


@pytest.mark.parametrize("modern", [False, True], ids=["handshake era", "2026 era"])
async def test_a_crashing_tool_is_answered_as_the_sdk_answers_it(modern: bool) -> None:
    replies = []
    for direct in (False, True):
        server = LeanrigMCP(_StandIn("crash"), "t", direct_calls=direct)  # type: ignore[arg-type]
        async with serving(server) as wire:
            if modern:
                await wire.answer(line(1, "server/discover", {"_meta": ENVELOPE}))
            else:
                await _handshake(wire)
            replies.append(
                await wire.answer(call(7, "list_tasks", {}, ENVELOPE if modern else None))
            )
    assert replies[0] == replies[1]
    assert replies[0]["error"]["code"] == -32603, replies[0]


async def test_calls_before_the_handshake_or_opening_the_connection_are_the_sdks() -> None:
    """The first request decides the era (the SDK's), and on a handshake-era connection a call
    before ``initialize`` is answered gets the SDK's refusal."""
    server = LeanrigMCP(_StandIn("hang"), "t")  # type: ignore[arg-type]
    with counting_direct_calls() as taken:
        async with serving(server) as wire:
            first = await wire.answer(call(1, "open_task", {"task_id": "x"}))
            assert first["error"]["code"] == -32602, first  # not initialized
            await _handshake(wire)
            assert "result" in await wire.answer(call(2, "open_task", {"task_id": "x"}))
    assert taken == [2]


class _Ordered(_StandIn):
    """Stands in for ProofService: records the order calls reach it; ``open_task`` takes a
    while, ``list_tasks`` answers (or hangs, or returns what cannot be written)."""

    def __init__(self, behaviour: str = "answer") -> None:
        super().__init__(behaviour)
        self.reached: list[str] = []

    async def open_task(self, task_id: str, client: str) -> _Result:
        self.reached.append(task_id)
        await anyio.sleep(0.3)
        return _Result()

    async def list_tasks(self) -> Any:
        self.reached.append("list_tasks")
        if self.behaviour == "answer":
            return _Result()
        if self.behaviour == "unwritable":
            return _Unwritable()
        if self.behaviour == "unwritable error":
            raise ToolError("bad \ud800 text", code="busy")  # (a lone surrogate)
        return await super().list_tasks()


class _Unwritable:
    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        return {"tasks": [], "n": 2**70}


class _SlowPipeline:
    """A middleware (the SDK's documented extension point) holding every `tools/call` the SDK
    answers for a while: a call it takes then reaches the tool later than one taken directly."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/call":
            await anyio.sleep(0.2)
        return await call_next(ctx)


async def both_ways(
    stand_in: Callable[[], _Ordered],
    talk: Callable[[Wire], Awaitable[list[Any]]],
    *,
    slow_sdk: bool = False,
) -> tuple[list[Any], list[Any], list[list[str]], list[Any]]:
    """``talk`` to a server answering every request through the SDK, then to one with direct
    calls: each's replies, the calls each stand-in saw, and the requests taken directly."""
    replies, reached = [], []
    with counting_direct_calls() as taken:
        for direct in (False, True):
            service = stand_in()
            server = LeanrigMCP(service, "t", direct_calls=direct)  # type: ignore[arg-type]
            if slow_sdk:
                server.middleware.append(_SlowPipeline())
            async with serving(server) as wire:
                replies.append(await talk(wire))
            reached.append(service.reached)
    return replies[0], replies[1], reached, taken


async def test_a_2026_call_whose_envelope_the_sdk_refuses_is_the_sdks() -> None:
    """Found in review: the envelope's keys were checked, not their shapes — a clientInfo
    without its version was answered (and its tool run) where the SDK refuses it."""
    bad_infos = [{"name": "t"}, 5, None]  # (the last one is fine)
    bad_capabilities = [5, [], {"roots": True}]

    async def talk(wire: Wire) -> list[Any]:
        out = [await wire.answer(line(1, "server/discover", {"_meta": ENVELOPE}))]
        envelopes = [{**ENVELOPE, "io.modelcontextprotocol/clientInfo": i} for i in bad_infos]
        envelopes += [
            {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": c} for c in bad_capabilities
        ]
        for rid, meta in enumerate([*envelopes, ENVELOPE], start=2):
            out.append(await wire.answer(call(rid, "list_tasks", {}, meta)))
        return out

    sdk, direct, reached, taken = await both_ways(_Ordered, talk)
    assert direct == sdk
    codes = [r.get("error", {}).get("code") for r in sdk[1:]]
    assert codes == [-32602, -32602, None, -32602, -32602, -32602, None], sdk
    assert taken == [4, 8]  # (a null clientInfo reads as none: the SDK takes it)
    assert reached == [["list_tasks"] * 2] * 2


async def test_calls_sent_one_after_the_other_reach_the_service_in_that_order() -> None:
    """Found in review: a call the SDK answers (a progress token) then a plain one, in one
    write: the plain one, taken directly, could reach the service first (it skips the SDK's
    pipeline, here made slow) — two set_proof calls on one session could end in the other
    body."""

    async def talk(wire: Wire) -> list[Any]:
        await _handshake(wire)
        first = call(2, "open_task", {"task_id": "first"}, {"progressToken": "p"})
        wire.send(first + call(3, "open_task", {"task_id": "second"}))
        got = [await wire.reply(), await wire.reply()]
        got.append(await wire.answer(call(4, "open_task", {"task_id": "third"})))
        return sorted(got, key=lambda r: str(r and r["id"]))

    sdk, direct, reached, taken = await both_ways(_Ordered, talk, slow_sdk=True)
    assert direct == sdk
    assert reached == [["first", "second", "third"]] * 2
    assert taken == [4]  # the second went the SDK's way, after the first; the third directly


async def test_only_a_result_to_initialize_opens_a_handshake_connection() -> None:
    """Found in review: any result under the initialize request's id opened the gate — a
    failed initialize, then a ping reusing its id — and a call the SDK refuses was answered."""

    async def talk(wire: Wire) -> list[Any]:
        refused = await wire.answer(line(1, "initialize", {"capabilities": {}}))
        ping = await wire.answer(line(1, "ping"))
        called = await wire.answer(call(2, "list_tasks", {}))
        return [refused, ping, called]

    sdk, direct, reached, taken = await both_ways(_Ordered, talk)
    assert direct == sdk
    assert sdk[2]["error"]["code"] == -32602, sdk
    assert taken == [] and reached == [[], []]


async def test_a_result_that_cannot_be_written_is_answered_alike() -> None:
    """Found in review: the SDK answered a result orjson cannot write (an integer beyond 64
    bits) with the exception's text as the tool's error, direct calls with -32603."""

    async def talk(wire: Wire) -> list[Any]:
        await _handshake(wire)
        return [await wire.answer(call(2, "list_tasks", {}))]

    sdk, direct, _reached, taken = await both_ways(lambda: _Ordered("unwritable"), talk)
    assert direct == sdk
    assert sdk[0]["error"] == {"code": -32603, "message": "internal error; see server log"}
    assert taken == [2]


async def test_a_tool_error_that_cannot_be_written_does_not_end_the_session() -> None:
    """Found in review: writing it raised out of the call's task and ended the session (every
    call in flight lost)."""
    server = LeanrigMCP(_Ordered("unwritable error"), "t")  # type: ignore[arg-type]
    async with serving(server) as wire:
        await _handshake(wire)
        failed = await wire.answer(call(2, "list_tasks", {}))
        assert failed["id"] == 2 and failed["error"]["code"] == -32603, failed
        after = await wire.answer(call(3, "open_task", {"task_id": "x"}))
        assert after["id"] == 3 and "result" in after


async def test_an_id_reused_while_its_call_runs_belongs_to_the_newest_request() -> None:
    """A client breaking the protocol (an id in flight sent again), then cancelling it: the
    SDK's table holds the newest request, which the cancel ends; the first is answered."""

    async def talk(wire: Wire) -> list[Any]:
        await _handshake(wire)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 5}}  # fmt: skip
        wire.send(
            call(5, "open_task", {"task_id": "A"})
            + call(5, "list_tasks", {})
            + orjson.dumps(cancel)
            + b"\n"
        )
        return [await wire.reply()]

    sdk, direct, reached, _taken = await both_ways(lambda: _Ordered("hang"), talk)
    assert direct == sdk
    assert sdk[0]["id"] == 5 and "result" in sdk[0], sdk
    assert [r[0] for r in reached] == ["A", "A"]
