"""MCP on line transports (`LeanrigMCP.serve_lines` on pipes): a proof in both protocol eras
against the real service, and cancellation, end of input, crashes and unwritable results
against stand-in services."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from agent_tools.servers import FdReceive, FdSend, ServeOptions, open_service
from agent_tools.servers.mcp_server import LeanrigMCP, build_mcp
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
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}
CRASHED = {"code": -32603, "message": "internal error; see server log"}


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
    def __init__(self, to_server: int, from_server: int) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self.buffer = b""

    def send(self, data: bytes) -> None:
        os.write(self.to_server, data)

    def close_input(self) -> None:
        os.close(self.to_server)
        self.to_server = -1

    async def reply(self) -> dict[str, Any] | None:
        """The next reply line, None once the server's output ended."""
        with anyio.fail_after(60):
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
    """``server.serve_lines`` on pipes, its output closed when its session ends."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    for fd in (in_r, out_w, out_r):
        os.set_blocking(fd, False)
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


async def handshake(wire: Wire, modern: bool = False) -> None:
    """The era's opening: ``server/discover`` with the envelope (2026-07-28), or
    ``initialize`` and ``notifications/initialized``."""
    if modern:
        assert "result" in await wire.answer(line(0, "server/discover", {"_meta": ENVELOPE}))
        return
    assert "result" in await wire.answer(line(0, "initialize", INITIALIZE))
    wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


@pytest.mark.parametrize("modern", [False, True], ids=["handshake era", "2026 era"])
async def test_a_proof_over_lines_in_either_protocol_era(tmp_path: Path, modern: bool) -> None:
    meta = ENVELOPE if modern else None
    options = ServeOptions(suite=DEMO, run_dir=tmp_path, sandbox=False)
    async with open_service(options) as service, serving(build_mcp(service, "t")) as wire:
        await handshake(wire, modern)
        opened = await wire.answer(call(1, "open_task", {"task_id": "and_swap"}, meta))
        sid = opened["result"]["structuredContent"]["session_id"]
        wrong = await wire.answer(call(2, "set_proof", {"session_id": sid, "body": WRONG}, meta))
        right = await wire.answer(call(3, "set_proof", {"session_id": sid, "body": RIGHT}, meta))
        unknown = await wire.answer(call(4, "set_proof", {"session_id": "x", "body": RIGHT}, meta))
        no_tool = await wire.answer(call(5, "no_such_tool", {}, meta))
        verdict = await wire.answer(call(6, "check_proof", {"session_id": sid}, meta))
    assert wrong["result"]["structuredContent"]["complete"] is False
    assert right["result"]["structuredContent"]["complete"] is True
    # the text content is the structured result, as JSON
    assert (
        orjson.loads(right["result"]["content"][0]["text"]) == right["result"]["structuredContent"]
    )
    assert unknown["result"]["isError"] is True
    assert unknown["result"]["content"][0]["text"].startswith("[unknown_session]")
    assert no_tool["error"]["code"] == -32602 and "set_proof" in no_tool["error"]["data"]["tools"]
    assert verdict["result"]["structuredContent"]["accepted"] is True


class _Result:
    def __init__(self, dumped: dict[str, Any] | None = None) -> None:
        self.dumped = dumped if dumped is not None else {"tasks": []}

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        return self.dumped


class _StandIn:
    """``list_tasks`` hangs, crashes, or returns or raises something unwritable."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.sessions: dict[str, Any] = {}
        self.library = None
        self.started = anyio.Event()
        self.finished = anyio.Event()
        self.outcome = ""

    async def list_tasks(self) -> _Result:
        self.started.set()
        if self.behaviour == "crash":
            raise RuntimeError("boom")
        if self.behaviour == "unwritable":
            return _Result({"tasks": [], "n": 2**70})  # beyond what JSON writers take
        if self.behaviour == "unwritable error":
            raise ToolError("bad \ud800 text", code="busy")  # a lone surrogate
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.outcome = "cancelled"
            self.finished.set()
            raise
        raise AssertionError

    async def open_task(self, task_id: str, client: str) -> _Result:
        return _Result()

    def record_invalid(self, tool: str, arguments: Any, client: str, error: Exception) -> None:
        pass


def stand_in_server(stand_in: _StandIn) -> LeanrigMCP:
    return build_mcp(stand_in, "t")  # type: ignore[arg-type]


async def test_a_call_the_peer_cancels_is_never_answered_and_the_session_goes_on() -> None:
    stand_in = _StandIn("hang")
    async with serving(stand_in_server(stand_in)) as wire:
        await handshake(wire)
        wire.send(call(5, "list_tasks", {}))
        with anyio.fail_after(30):
            await stand_in.started.wait()
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 5, "reason": "enough"},
        }
        wire.send(orjson.dumps(cancel) + b"\n")
        with anyio.fail_after(30):
            await stand_in.finished.wait()
        after = await wire.answer(call(6, "open_task", {"task_id": "x"}))
        ping = await wire.answer(line(7, "ping"))
    assert stand_in.outcome == "cancelled"
    # Answered in order, and nothing for 5 (its handler had ended already).
    assert after["id"] == 6 and "result" in after
    assert ping["id"] == 7 and "result" in ping


# Left unformatted: the name alone nearly fills a line, and the formatter's split overflows it.
async def test_a_call_in_flight_when_the_input_ends_is_cancelled_and_answered_connection_closed(
) -> None:  # fmt: skip
    stand_in = _StandIn("hang")
    async with serving(stand_in_server(stand_in)) as wire:
        await handshake(wire)
        wire.send(call(5, "list_tasks", {}))
        with anyio.fail_after(30):
            await stand_in.started.wait()
        wire.close_input()
        reply = await wire.reply()
        assert await wire.reply() is None
    assert reply == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32000, "message": "Connection closed"},
    }
    assert stand_in.outcome == "cancelled"


@pytest.mark.parametrize("modern", [False, True], ids=["handshake era", "2026 era"])
@pytest.mark.parametrize("behaviour", ["crash", "unwritable", "unwritable error"])
async def test_a_crash_or_an_unwritable_result_is_an_internal_error_and_the_session_goes_on(
    behaviour: str, modern: bool
) -> None:
    """The agent reads "internal error; see server log", never the exception's text."""
    meta = ENVELOPE if modern else None
    async with serving(stand_in_server(_StandIn(behaviour))) as wire:
        await handshake(wire, modern)
        failed = await wire.answer(call(2, "list_tasks", {}, meta))
        after = await wire.answer(call(3, "open_task", {"task_id": "x"}, meta))
    assert failed["id"] == 2 and failed["error"] == CRASHED, failed
    assert after["id"] == 3 and "result" in after, after
