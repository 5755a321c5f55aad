"""Hostile and broken clients against `leanrig serve` as a subprocess: the server keeps serving
others, stays bounded in memory, and exits promptly when its stdio client goes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any

import anyio
import orjson
import psutil
import pytest
from anyio.abc import ByteReceiveStream, Process, SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from agent_tools.servers import handle_message
from agent_tools.servers.jsonrpc_server import MAX_LINE, request_id, serve_stream
from agent_tools.servers.textlines import LineTooLong, receive_line

from .conftest import LONG_LIVED, has_lean_worker, lean_descendants, running
from .rpc_client import DEMO, ROOT, RpcError, rpc_server, scratch_run_dir, stop_process

pytestmark = pytest.mark.anyio
RSS_BOUND_MB = 150
AND_SWAP = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def request(rid: Any, method: str, **params: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n"


def rss_mb(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 2**20


class _Result:
    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        return {"tasks": []}


class _RecordingService:
    """Stands in for ProofService: records tool calls, so a test can see what ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.sessions: dict[str, Any] = {}
        self.library = None  # a baseline service: no library tools

    async def open_task(self, task_id: str, client: str) -> _Result:
        self.calls.append(f"open_task {task_id}")
        return _Result()

    async def list_tasks(self) -> _Result:
        self.calls.append("list_tasks")
        return _Result()

    def record_invalid(self, tool: str, arguments: Any, client: str, error: Exception) -> None:
        self.calls.append(f"refused {tool}")


async def _handle(service: _RecordingService, raw: bytes) -> dict[str, Any] | None:
    return await handle_message(service, raw, "c")  # type: ignore[arg-type]


async def test_notifications_run_nothing_and_get_no_reply() -> None:
    service = _RecordingService()
    note = b'{"jsonrpc": "2.0", "method": "open_task", "params": {"task_id": "and_swap"}}'
    assert await _handle(service, note) is None
    assert await _handle(service, b'{"jsonrpc": "2.0", "method": "list_tasks"}') is None
    assert await _handle(service, b'{"jsonrpc": "2.0", "method": "nope"}') is None
    assert service.calls == []
    reply = await _handle(service, b'{"jsonrpc": "2.0", "id": null, "method": "list_tasks"}')
    assert reply == {"jsonrpc": "2.0", "id": None, "result": {"tasks": []}}  # null id: a request


@pytest.mark.parametrize(
    ("raw", "code", "rid"),
    [
        (b'{"jsonrpc": "2.0", "id": 4, "method": 5}', -32600, 4),
        (b'{"jsonrpc": "2.0", "id": "a", "method": null}', -32600, "a"),
        (b'{"jsonrpc": "2.0", "id": 6}', -32600, 6),
        (b'{"jsonrpc": "1.0", "id": 7, "method": "list_tasks"}', -32600, 7),
        (b'{"id": 8, "method": "list_tasks"}', -32600, 8),
        (b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "list_tasks"}', -32600, None),
        (b'{"jsonrpc": "2.0", "id": true, "method": "list_tasks"}', -32600, None),
        (b'{"jsonrpc": "2.0", "id": 2.5}', -32600, None),  # a fraction: as MCP answers it
        (b'[{"jsonrpc": "2.0", "id": 9, "method": "list_tasks"}]', -32600, None),
        (b'"just a string"', -32600, None),
        (b'{"jsonrpc": "2.0", "id": 77, "method": "list_tasks", "x": "\xff"}', -32700, 77),
        (b'{"jsonrpc": "2.0", "id": 78, "method": "list_tasks"', -32700, None),
        # An escaped lone surrogate: valid JSON syntax, but not Unicode text.
        (b'{"jsonrpc": "2.0", "id": 79, "method": "list_tasks", "x": "\\ud800"}', -32700, 79),
        (b"\x00\x01garbage", -32700, None),
        (b'{"jsonrpc": "2.0", "id": 10, "method": "no_such_method"}', -32601, 10),
        (b'{"jsonrpc": "2.0", "id": 11, "method": "list_tasks", "params": 3}', -32602, 11),
    ],
)
async def test_invalid_messages_get_the_right_code_and_keep_a_recoverable_id(
    raw: bytes, code: int, rid: Any
) -> None:
    service = _RecordingService()
    reply = await _handle(service, raw)
    assert reply is not None and reply["error"]["code"] == code, reply
    assert reply["id"] == rid and "id" in reply
    # No tool ran; a call refused for its arguments is only recorded (its ledger line).
    assert [c for c in service.calls if not c.startswith("refused ")] == []


@pytest.mark.parametrize(
    ("message", "rid"),
    [
        ({"id": "a"}, "a"),
        ({"id": 7}, 7),
        ({"id": 2**64}, 2**64),
        ({"id": -1}, -1),
        ({"id": 2.5}, None),
        ({"id": True}, None),
        ({"id": None}, None),
        ({"id": [1]}, None),
        ({"id": {"a": 1}}, None),
        ({}, None),
        ([{"id": 1}], None),
        ("x", None),
        (None, None),
    ],
)
def test_an_unservable_message_is_answered_with_its_id_when_both_wires_allow_it(
    message: Any, rid: Any
) -> None:
    assert request_id(message) == rid


async def test_line_reader_skips_an_oversized_line_without_buffering_it() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](100)

    class _Bytes(anyio.abc.ByteReceiveStream):
        async def receive(self, max_bytes: int = 65536) -> bytes:
            return await receive.receive()

        async def aclose(self) -> None:
            await receive.aclose()

    reader = BufferedByteReceiveStream(_Bytes())
    chunks = (b"short\n", b"x" * 8, b"x" * 8, b"x" * 8, b"\nok\n", b"0123456789", b"\ntail")
    for chunk in chunks:
        send.send_nowait(chunk)
    send.close()
    assert await receive_line(reader, limit=10) == b"short"
    with pytest.raises(LineTooLong):
        await receive_line(reader, limit=10)
    assert await receive_line(reader, limit=10) == b"ok"
    assert await receive_line(reader, limit=10) == b"0123456789"  # the limit itself is fine
    assert await receive_line(reader, limit=10) == b"tail"  # the last line may lack its newline
    assert await receive_line(reader, limit=10) is None
    receive.close()


@dataclass
class TcpServer:
    process: Process
    port: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def spawn_serve(*args: str, stdin: int | None = PIPE) -> AsyncIterator[Process]:
    argv = [
        sys.executable,
        "-m",
        "agent_tools.cli",
        "serve",
        "--suite",
        str(DEMO),
        "--run-dir",
        str(scratch_run_dir()),
        *args,
    ]
    process = await anyio.open_process(argv, stdin=stdin, stdout=PIPE, stderr=DEVNULL, cwd=ROOT)
    LONG_LIVED.add(process.pid)
    try:
        yield process
    finally:
        await stop_process(process, close_stdin=False)
        LONG_LIVED.discard(process.pid)


@pytest.fixture(scope="module")
async def tcp() -> AsyncIterator[TcpServer]:
    port = free_port()
    async with spawn_serve("--jsonrpc", "--port", str(port)) as process:
        await (await connect(port)).aclose()
        yield TcpServer(process, port)


async def connect(port: int) -> SocketStream:
    with anyio.fail_after(30):
        while True:
            try:
                return await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)


class Line:
    """A well-behaved TCP client: one request at a time."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.reader = BufferedByteReceiveStream(stream)
        self.ids = 0

    async def call(self, method: str, **params: Any) -> Any:
        self.ids += 1
        await self.stream.send(request(self.ids, method, **params))
        with anyio.fail_after(60):
            reply: dict[str, Any] = orjson.loads(await self.reader.receive_until(b"\n", 2**24))
        assert reply["id"] == self.ids, reply
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    async def raw(self, data: bytes) -> dict[str, Any]:
        await self.stream.send(data)
        with anyio.fail_after(60):
            reply: dict[str, Any] = orjson.loads(await self.reader.receive_until(b"\n", 2**24))
        return reply


def reset_on_close(stream: SocketStream) -> None:
    """Make aclose send RST instead of FIN (a client killed or a connection reset)."""
    raw = stream.extra(SocketAttribute.raw_socket)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def open_and_swap(client: Line) -> str:
    sid: str = (await client.call("open_task", task_id="and_swap"))["session_id"]
    return sid


async def test_tcp_clients_that_close_or_reset_before_reading_do_not_stop_the_server(
    tcp: TcpServer,
) -> None:
    async with await connect(tcp.port) as other:
        bystander = Line(other)
        sid = await open_and_swap(bystander)
        for reset in (False, True, False, True):
            vandal = await connect(tcp.port)
            await vandal.send(
                b"".join(request(i, "open_task", task_id="and_swap") for i in range(1, 6))
            )
            if reset:
                reset_on_close(vandal)
            await vandal.aclose()
        # a client vanishing in the middle of a Lean call
        vandal = await connect(tcp.port)
        vandal_line = Line(vandal)
        vsid = await open_and_swap(vandal_line)
        await vandal.send(request(99, "set_proof", session_id=vsid, body=AND_SWAP))
        reset_on_close(vandal)
        await vandal.aclose()
        done = await bystander.call("set_proof", session_id=sid, body=AND_SWAP)
        assert done["complete"] is True
        assert tcp.process.returncode is None
        # the vandals' sessions are closed once they are gone: only the bystander's remains
        with anyio.fail_after(30):
            while (await bystander.call("server_status"))["sessions"] != 1:
                await anyio.sleep(0.05)


async def test_tcp_garbage_and_an_oversized_line_get_errors_and_the_connection_goes_on(
    tcp: TcpServer,
) -> None:
    async with await connect(tcp.port) as stream:
        client = Line(stream)
        assert (await client.raw(b"\x00\xff garbage {{{\n"))["error"]["code"] == -32700
        huge = await client.raw(
            b'{"jsonrpc": "2.0", "id": 1, "x": "' + b"a" * (MAX_LINE + 10) + b'"}\n'
        )
        assert huge["error"]["code"] == -32600 and "too long" in huge["error"]["message"]
        assert (await client.call("list_tasks"))["tasks"]


async def test_tcp_flood_without_reading_is_bounded_and_freed(tcp: TcpServer) -> None:
    """A client pipelining up to 60,000 requests without reading: a bystander is still served."""
    pid = tcp.process.pid
    async with await connect(tcp.port) as other:
        bystander = Line(other)
        sid = await open_and_swap(bystander)
        await bystander.call("list_tasks")
        before = rss_mb(pid)
        flooder = await connect(tcp.port)
        pad = "x" * 10_000
        sent, stalled = 0, False
        while sent < 60_000 and not stalled:
            batch = b"".join(request(f"{pad}{sent + i}", "list_tasks") for i in range(100))
            with anyio.move_on_after(2) as scope:
                await flooder.send(batch)
            stalled = scope.cancelled_caught  # the server stopped reading: backpressure
            sent += 100
        during = rss_mb(pid)
        step = await bystander.call("set_proof", session_id=sid, body=AND_SWAP)
        assert step["complete"] is True
        reset_on_close(flooder)
        await flooder.aclose()
        with anyio.fail_after(30):
            while (await bystander.call("server_status"))["sessions"] != 1:
                await anyio.sleep(0.05)
        after = rss_mb(pid)
    print(
        f"\nTCP flood: {sent} requests ({sent * 10 // 1000} MB) sent before stalling="
        f"{stalled}; server RSS {before:.0f} MB before, {during:.0f} MB during, "
        f"{after:.0f} MB after"
    )
    assert stalled, "the server read every request of a client that never reads"
    assert during - before < RSS_BOUND_MB
    assert after - before < RSS_BOUND_MB


async def _exchange(
    process: Process, reader: BufferedByteReceiveStream, data: bytes
) -> dict[str, Any]:
    """Send ``data`` to a server on stdio; its next reply line."""
    assert process.stdin is not None
    await process.stdin.send(data)
    with anyio.fail_after(60):
        reply: dict[str, Any] = orjson.loads(await reader.receive_until(b"\n", 2**24))
    return reply


async def test_mcp_stdio_answers_a_line_the_sdk_cannot_read() -> None:
    """A line the MCP SDK cannot read gets -32700: with the request's id (a lone surrogate), with
    id null (a broken line), no reply for a notification; the session goes on."""
    async with spawn_serve("--no-sandbox") as process:
        assert process.stdin is not None and process.stdout is not None
        reader = BufferedByteReceiveStream(process.stdout)
        exchange = partial(_exchange, process, reader)

        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        assert "result" in await exchange(request(1, "initialize", **init))
        await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_tasks",'
        surrogate = await exchange(call % 2 + b'"arguments":{"x":"\\ud800"}}}\n')
        assert surrogate["id"] == 2 and surrogate["error"]["code"] == -32700, surrogate
        broken = await exchange(call % 3 + b'"arguments":{}\n')
        assert broken["id"] is None and broken["error"]["code"] == -32700, broken
        await process.stdin.send(b'{"jsonrpc":"2.0","method":"n/x","params":{"a":"\\ud800"}}\n')
        listed = await exchange(call % 4 + b'"arguments":{}}}\n')
        assert listed["id"] == 4 and "result" in listed, listed  # no reply to the notification


async def test_mcp_stdio_replies_to_concurrent_calls_stay_whole_lines() -> None:
    """Fifty replies, each over a pipe write, to a client that reads late: each line is whole."""
    async with spawn_serve("--no-sandbox") as process:
        reader = await _mcp_handshake(process)
        assert process.stdin is not None
        ids = range(10, 60)
        await process.stdin.send(b"".join(request(i, "tools/list") for i in ids))
        await anyio.sleep(1.0)  # the replies fill the pipe (64 KB) and wait for room
        with anyio.fail_after(60):
            replies = [orjson.loads(await reader.receive_until(b"\n", 2**24)) for _ in ids]
    assert sorted(r["id"] for r in replies) == list(ids)
    assert all(len(r["result"]["tools"]) > 5 for r in replies)


class _HangingService(_RecordingService):
    async def list_tasks(self) -> _Result:
        await anyio.sleep_forever()
        raise AssertionError


@asynccontextmanager
async def _mcp_on_pipes() -> AsyncIterator[tuple[int, int, anyio.Event]]:
    """`serve_lines` of a service whose list_tasks never returns, on pipes, after the handshake:
    (client's write fd, client's read fd, an event set when the session ended and closed output)."""
    from agent_tools.servers import FdReceive, FdSend, build_mcp
    from agent_tools.servers.textlines import TextLines, TextWriter

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(in_r, False)
    os.set_blocking(out_w, False)
    ended = anyio.Event()
    server = build_mcp(_HangingService(), "t")  # type: ignore[arg-type]

    async def serve() -> None:
        try:
            await server.serve_lines(TextLines(FdReceive(in_r)), TextWriter(FdSend(out_w)))
        finally:
            os.close(out_w)
            ended.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            init = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            os.write(in_w, request(1, "initialize", **init))
            with anyio.fail_after(30):
                await anyio.wait_readable(out_r)
            assert b'"id":1' in os.read(out_r, 2**20)
            os.write(in_w, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            yield in_w, out_r, ended
            tg.cancel_scope.cancel()
    finally:
        for fd in (in_r, in_w, out_r):
            with contextlib.suppress(OSError):
                os.close(fd)


async def test_mcp_replies_cut_off_by_the_end_of_the_input_stay_whole_lines() -> None:
    """The input ending while a reply waits mid-line: that reply is finished before the SDK's
    cancellation replies, so every line read is whole and call 5 gets an error."""
    async with _mcp_on_pipes() as (to_server, from_server, ended):
        os.write(to_server, request(5, "tools/call", name="list_tasks", arguments={}))
        os.write(to_server, b"".join(request(i, "tools/list") for i in range(10, 30)))
        await anyio.sleep(0.5)  # the replies fill the pipe; one waits mid-line for room
        os.close(to_server)
        received = bytearray()

        def read_all() -> None:
            while chunk := os.read(from_server, 2**16):
                received.extend(chunk)

        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(read_all)
            await ended.wait()
    assert received.endswith(b"\n"), bytes(received[-200:])
    replies = [orjson.loads(line) for line in bytes(received).splitlines()]
    assert {r["id"] for r in replies} >= {5, 10}, [r["id"] for r in replies]
    [cancelled] = [r for r in replies if r["id"] == 5]
    assert "error" in cancelled, cancelled


async def test_mcp_session_closing_on_a_peer_that_does_not_read_ends_within_a_second() -> None:
    """Replies waiting on a pipe nobody reads do not hold the session for REPLY_WRITE_SECONDS."""
    async with _mcp_on_pipes() as (to_server, _from_server, ended):
        os.write(to_server, b"".join(request(i, "tools/list") for i in range(10, 60)))
        await anyio.sleep(0.5)  # the replies fill the pipe
        os.close(to_server)
        with anyio.fail_after(5):
            await ended.wait()


async def test_serve_stopped_by_sigterm_while_a_reply_waits_exits_promptly_and_cleanly() -> None:
    """`leanrig serve` on stdio, its client not reading, stopped by SIGTERM: it exits 0 through
    its own shutdown, not the SIGTERM handler's forced exit (143)."""
    async with spawn_serve("--no-sandbox") as process:
        await _mcp_handshake(process)
        assert process.stdin is not None
        await process.stdin.send(b"".join(request(i, "tools/list") for i in range(10, 60)))
        await anyio.sleep(1.0)  # the replies fill the pipe
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            returncode = await process.wait()
        elapsed = time.monotonic() - started
    print(f"\nSIGTERM with a reply waiting: exit {returncode} after {elapsed:.2f} s")
    assert returncode == 0, (returncode, elapsed)


async def test_serve_stopped_by_sigterm_while_it_starts_exits_promptly(tmp_path: Path) -> None:
    """SIGTERM during startup, with a Lean that never comes up: no Lean process is left behind."""
    from lsp_bridge import find_lean

    slow = tmp_path / "lean"
    slow.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" --server "*|*" --worker "*) sleep 120 ;; esac\n'
        f'exec {find_lean().lean} "$@"\n'
    )
    slow.chmod(0o755)
    # --lad with a fresh cache: startup indexes the library with the (sleeping) Lean server.
    argv = [
        sys.executable,
        "-m",
        "agent_tools.cli",
        "serve",
        "--suite",
        str(DEMO),
        "--lad",
        "--run-dir",
        str(tmp_path / "runs"),
        "--no-sandbox",
    ]
    env = {**os.environ, "LEANRIG_LEAN": str(slow), "LEANRIG_CACHE": str(tmp_path / "cache")}
    process = await anyio.open_process(
        argv, stdin=PIPE, stdout=PIPE, stderr=DEVNULL, cwd=ROOT, env=env, start_new_session=True
    )
    try:

        def starting() -> list[psutil.Process]:
            found = []
            for p in psutil.Process(process.pid).children(recursive=True):
                try:  # (a short-lived child — a probe — may be gone or a zombie by now)
                    if {"--server", "--worker"} & set(p.cmdline()):
                        found.append(p)
                except psutil.Error:
                    continue
            return found

        with anyio.fail_after(60):
            while not starting():
                await anyio.sleep(0.05)
        await anyio.sleep(0.5)
        children = psutil.Process(process.pid).children(recursive=True)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            await process.wait()
        print(f"\nSIGTERM while starting: exit after {time.monotonic() - started:.2f} s")
        _, alive = psutil.wait_procs(children, timeout=5)
        assert not alive, alive
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        await process.aclose()


async def test_mcp_session_ends_when_its_peer_is_gone_from_the_output() -> None:
    """The client closed the server's output, not its input: the first unwritable reply ends it."""
    async with _mcp_on_pipes() as (to_server, from_server, ended):
        os.close(from_server)
        os.write(to_server, request(7, "tools/list"))
        with anyio.fail_after(10):
            await ended.wait()


async def test_a_line_nested_too_deep_for_the_parser_gets_a_parse_error() -> None:
    """JSON nested 100,000 deep gets a parse error on both wires, and the MCP session goes on."""
    deep = b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"a":' + b"[" * 100_000
    line = deep + b"]" * 100_000 + b"}}\n"
    service = _RecordingService()
    reply = await _handle(service, line)
    assert reply is not None and reply["error"]["code"] == -32700, reply
    async with _mcp_on_pipes() as (to_server, from_server, _ended):
        await anyio.to_thread.run_sync(os.write, to_server, line + request(10, "tools/list"))
        received = bytearray()
        with anyio.fail_after(30):
            while received.count(b"\n") < 2:
                await anyio.wait_readable(from_server)
                received += os.read(from_server, 2**20)
    first, second = (orjson.loads(x) for x in bytes(received).splitlines()[:2])
    assert first["error"]["code"] == -32700 and second["id"] == 10, (first, second)


async def test_stdio_oversized_line_and_garbage_get_errors_and_the_server_goes_on() -> None:
    async with rpc_server() as rpc:
        LONG_LIVED.add(rpc.process.pid)
        try:
            await rpc.send_raw(b"\x00\xff garbage {{{\n")
            assert (await rpc.next_unmatched())["error"]["code"] == -32700
            await rpc.send_raw(b'{"jsonrpc": "2.0", "id": 1, "x": "' + b"a" * (MAX_LINE + 10))
            await rpc.send_raw(b'"}\n')
            huge = await rpc.next_unmatched()
            assert huge["error"]["code"] == -32600 and "too long" in huge["error"]["message"]
            sid = (await rpc.call("open_task", task_id="and_swap"))["session_id"]
            assert (await rpc.call("set_proof", session_id=sid, body=AND_SWAP))["complete"]
            # a notification creates nothing; method 5 is an invalid request; ids are kept
            await rpc.send_raw(
                b'{"jsonrpc":"2.0","method":"open_task","params":{"task_id":"and_swap"}}\n'
            )
            await rpc.send_raw(b'{"jsonrpc":"2.0","id":"m5","method":5}\n')
            bad = await rpc.next_unmatched()
            assert bad["id"] == "m5" and bad["error"]["code"] == -32600
            assert (await rpc.call("server_status"))["sessions"] == 1
            assert rpc.unmatched == []
        finally:
            LONG_LIVED.discard(rpc.process.pid)


async def test_stdio_client_that_does_not_read_is_backpressure_not_an_exit() -> None:
    """Our writes stall while stdout is unread, RSS stays bounded, and then every reply comes."""
    async with spawn_serve("--jsonrpc") as process:
        assert process.stdin is not None and process.stdout is not None
        reader = BufferedByteReceiveStream(process.stdout)
        await process.stdin.send(request(0, "list_tasks"))
        with anyio.fail_after(60):
            orjson.loads(await reader.receive_until(b"\n", 2**24))
        before = rss_mb(process.pid)
        batch = b"".join(request(i, "list_tasks") for i in range(1, 1001))
        sent, stalled = 0, False
        for _ in range(60):
            with anyio.move_on_after(2) as scope:
                await process.stdin.send(batch)
            if scope.cancelled_caught:
                stalled = True
                break
            sent += 1000
        during = rss_mb(process.pid)
        got = 0
        with anyio.fail_after(60):
            while got < sent:
                orjson.loads(await reader.receive_until(b"\n", 2**24))
                got += 1
        assert process.returncode is None
    print(
        f"\nstdio flood: {sent} requests accepted before stalling={stalled}; server RSS "
        f"{before:.0f} MB before, {during:.0f} MB during"
    )
    assert stalled
    assert during - before < RSS_BOUND_MB


async def _warm(process: Process) -> list[psutil.Process]:
    with anyio.fail_after(60):
        while True:  # the warm Lean (min_processes=1): its file worker runs
            leans = lean_descendants(process.pid)
            if has_lean_worker(leans):
                return leans
            await anyio.sleep(0.05)


async def _exit_after_stdin_close(process: Process, leans: list[psutil.Process]) -> float:
    assert process.stdin is not None
    start = time.perf_counter()
    await process.stdin.aclose()
    with anyio.fail_after(15):
        await process.wait()
    elapsed = time.perf_counter() - start
    with anyio.fail_after(10):
        while any(running(p) for p in leans):
            await anyio.sleep(0.02)
    return elapsed


@pytest.mark.parametrize("wire", ["jsonrpc", "mcp"])
async def test_stdio_server_exits_promptly_when_stdin_closes(wire: str) -> None:
    args = ("--jsonrpc",) if wire == "jsonrpc" else ()
    async with spawn_serve(*args) as process:
        leans = await _warm(process)
        if wire == "mcp":
            await _mcp_handshake(process)
        elapsed = await _exit_after_stdin_close(process, leans)
    print(f"\n{wire} stdio: exit {elapsed * 1000:.0f} ms after stdin closed")
    assert process.returncode == 0


async def test_mcp_stdio_line_over_the_bound_ends_the_session_without_growing() -> None:
    """One endless line over MCP stdio: past `MAX_MCP_LINE` the session ends, the server exits 0
    and grows by less than 1.5 times the bound."""
    from agent_tools.servers.textlines import MAX_MCP_LINE

    async with spawn_serve() as process:
        assert process.stdin is not None
        await _warm(process)
        await _mcp_handshake(process)
        before = rss_mb(process.pid)
        chunk = b"a" * 2**20
        sent = 0
        peak = before
        with anyio.fail_after(120):
            try:
                while sent <= 3 * MAX_MCP_LINE:
                    await process.stdin.send(chunk)
                    sent += len(chunk)
                    if sent % (16 * 2**20) == 0 and process.returncode is None:
                        peak = max(peak, rss_mb(process.pid))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the server stopped reading: it ended the session
            assert await process.wait() == 0
    grown = peak - before
    print(f"\nmcp stdio endless line: sent {sent / 2**20:.0f} MB, server grew {grown:.0f} MB")
    assert grown < 1.5 * MAX_MCP_LINE / 2**20


async def test_stdio_client_killed_mid_request_stops_the_server() -> None:
    """Both pipes closed while a Lean call runs: the server exits and its Lean processes end."""
    async with spawn_serve("--jsonrpc") as process:
        assert process.stdin is not None and process.stdout is not None
        leans = await _warm(process)
        await process.stdin.send(
            b"".join(request(i, "open_task", task_id="and_swap") for i in range(5))
        )
        await process.stdout.aclose()
        elapsed = await _exit_after_stdin_close(process, leans)
    print(f"\njsonrpc stdio, client gone mid-request: exit after {elapsed * 1000:.0f} ms")
    assert process.returncode is not None


async def _mcp_handshake(process: Process) -> BufferedByteReceiveStream:
    """MCP's initialize and initialized, a garbage line and a tool call (the session goes
    on); the reader of the server's replies."""
    assert process.stdin is not None and process.stdout is not None
    reader = BufferedByteReceiveStream(process.stdout)
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    await process.stdin.send(request(1, "initialize", **init))
    with anyio.fail_after(60):
        assert "result" in orjson.loads(await reader.receive_until(b"\n", 2**24))
    await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    await process.stdin.send(b"\x00\xff garbage {{{\n")  # the SDK must shrug this off
    await process.stdin.send(request(2, "tools/call", name="list_tasks", arguments={}))
    with anyio.fail_after(60):
        while True:
            reply = orjson.loads(await reader.receive_until(b"\n", 2**24))
            if reply.get("id") == 2:
                break
    assert "result" in reply and not reply["result"].get("isError"), reply
    return reader


class _OneChunk(ByteReceiveStream):
    def __init__(self, data: bytes) -> None:
        self._data = [data]

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._data:
            raise anyio.EndOfStream
        return self._data.pop()

    async def aclose(self) -> None:
        self._data = []


@pytest.mark.parametrize("rid", [b"18446744073709551616", b"-9223372036854775809", b"2.5"])
async def test_a_reply_carries_the_request_s_id_exactly(rid: bytes) -> None:
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    line = b'{"jsonrpc": "2.0", "id": %s, "method": "list_tasks"}\n' % rid
    with anyio.fail_after(10):
        await serve_stream(_RecordingService(), _OneChunk(line), send)  # type: ignore[arg-type]
    assert len(sent) == 1
    assert b'"id":' + rid + b"," in sent[0].replace(b": ", b":"), sent


@pytest.mark.parametrize(
    ("line", "code", "rid"),
    [
        # invalid UTF-8, with an id beyond 64 bits
        (
            b'{"jsonrpc": "2.0", "id": 18446744073709551616, "method": "x", "p": "\xff"}\n',
            -32700,
            b"18446744073709551616",
        ),
        # an id holding a lone surrogate: escaped in the parse error
        (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "list_tasks"}\n', -32700, b'"\\ud800"'),
    ],
)
async def test_an_error_reply_carries_the_request_s_id_exactly(
    line: bytes, code: int, rid: bytes
) -> None:
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    with anyio.fail_after(10):
        await serve_stream(_RecordingService(), _OneChunk(line), send)  # type: ignore[arg-type]
    assert len(sent) == 1
    assert b'"id":' + rid + b"," in sent[0].replace(b": ", b":"), sent
    assert json.loads(sent[0])["error"]["code"] == code, sent


async def test_mcp_stdio_answers_requests_it_cannot_take_with_their_id() -> None:
    """-32600 for an id MCP forbids (id null), for jsonrpc 1.0 or array params (their id kept);
    -32700 for invalid UTF-8 in a body, which makes no new proof version."""
    async with spawn_serve("--no-sandbox") as process:
        exchange = partial(_exchange, process, await _mcp_handshake(process))

        tail = b'"method":"tools/call","params":{"name":"list_tasks","arguments":{}}}\n'
        for rid in (b'{"a":1}', b"true", b"[1]", b"1.5"):
            reply = await exchange(b'{"jsonrpc":"2.0","id":' + rid + b"," + tail)
            assert reply["id"] is None and reply["error"]["code"] == -32600, (rid, reply)
        old = await exchange(b'{"jsonrpc":"1.0","id":7,' + tail)
        assert old["id"] == 7 and old["error"]["code"] == -32600, old
        listed = b'{"jsonrpc":"2.0","id":8,"method":"tools/list","params":[]}\n'
        array = await exchange(listed)
        assert array["id"] == 8 and array["error"]["code"] == -32600, array
        opened = await exchange(
            b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"open_task",'
            b'"arguments":{"task_id":"and_swap"}}}\n'
        )
        sid = opened["result"]["structuredContent"]["session_id"].encode()
        before = await exchange(
            b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"get_proof_state",'
            b'"arguments":{"session_id":"' + sid + b'"}}}\n'
        )
        bad = await exchange(
            b'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"set_proof",'
            b'"arguments":{"session_id":"' + sid + b'","body":"\\n  h\xff\xfe"}}}\n'
        )
        assert bad["id"] == 10 and bad["error"]["code"] == -32700, bad
        state = await exchange(
            b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"get_proof_state",'
            b'"arguments":{"session_id":"' + sid + b'"}}}\n'
        )
        version = before["result"]["structuredContent"]["version"]
        assert state["result"]["structuredContent"]["version"] == version, state  # no new one


async def test_mcp_tool_call_with_params_the_sdk_cannot_read_says_what_to_send(
    tmp_path: Path,
) -> None:
    """`tools/call` whose arguments are not an object, or whose name is not a string: -32602
    saying what to send, a ledger line per refused call, and the session goes on."""
    ledger = tmp_path / "ledger.jsonl"
    async with spawn_serve("--no-sandbox", "--ledger", str(ledger)) as process:
        exchange = partial(_exchange, process, await _mcp_handshake(process))
        for rid, arguments in ((20, b"[1,2]"), (21, b'"and_swap"'), (22, b"5")):
            reply = await exchange(
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"open_task",'
                b'"arguments":%s}}\n' % (rid, arguments)
            )
            assert reply["id"] == rid and reply["error"]["code"] == -32602, reply
            message = reply["error"]["message"]
            assert "arguments must be a JSON object" in message and "inputSchema" in message
        nameless = await exchange(
            b'{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":5}}\n'
        )
        assert nameless["error"]["code"] == -32602, nameless
        assert "`name`" in nameless["error"]["message"], nameless
        opened = await exchange(
            b'{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"open_task",'
            b'"arguments":{"task_id":"and_swap"}}}\n'
        )
        assert not opened["result"].get("isError"), opened
    lines = [orjson.loads(line) for line in ledger.read_bytes().splitlines()]
    refused = [e for e in lines if e["tool"] == "open_task" and e["outcome"] != "ok"]
    assert [e["outcome"] for e in refused] == ["error:invalid_argument"] * 3, lines
