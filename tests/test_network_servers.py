"""The network variants of `leanrig serve`: MCP over streamable HTTP and JSON-RPC over TCP."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from subprocess import PIPE
from typing import Any

import anyio
import httpx2 as httpx
import orjson
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from .rpc_client import DEMO, ROOT, scratch_run_dir, stop_process

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def serve(*args: str) -> AsyncIterator[Process]:
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
    process = await anyio.open_process(argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, cwd=ROOT)
    try:
        yield process
    finally:
        await stop_process(process, close_stdin=False)


async def connect(port: int) -> anyio.abc.SocketStream:
    with anyio.fail_after(30):
        while True:
            try:
                return await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.1)


async def test_jsonrpc_over_tcp_serves_two_isolated_clients() -> None:
    port = free_port()
    async with serve("--jsonrpc", "--port", str(port)):
        a, b = await connect(port), await connect(port)
        async with a, b:
            ra, rb = BufferedByteReceiveStream(a), BufferedByteReceiveStream(b)

            async def call(
                stream: anyio.abc.SocketStream,
                reader: BufferedByteReceiveStream,
                method: str,
                **params: object,
            ) -> dict[str, object]:
                await stream.send(
                    orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                    + b"\n"
                )
                with anyio.fail_after(60):
                    reply: dict[str, object] = orjson.loads(
                        await reader.receive_until(b"\n", 2**24)
                    )
                return reply

            opened = await call(a, ra, "open_task", task_id="true_intro")
            result = opened["result"]
            assert isinstance(result, dict)
            sid = result["session_id"]
            done = await call(a, ra, "set_proof", session_id=sid, body="\n  True.intro")
            assert isinstance(done["result"], dict) and done["result"]["complete"] is True
            other = await call(b, rb, "get_proof_state", session_id=sid)
            assert isinstance(other["error"], dict)
            assert "unknown_session" in str(other["error"])


async def test_mcp_over_streamable_http() -> None:
    from mcp import Client

    port = free_port()
    async with serve("--http", str(port)):
        await (await connect(port)).aclose()
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            tools = await client.list_tools()
            assert "set_proof" in {t.name for t in tools.tools}
            opened = await client.call_tool("open_task", {"task_id": "true_intro"})
            assert isinstance(opened.structured_content, dict)
            sid = opened.structured_content["session_id"]
            result = await client.call_tool(
                "set_proof", {"session_id": sid, "body": "\n  True.intro"}
            )
            assert isinstance(result.structured_content, dict)
            assert result.structured_content["complete"] is True


async def http_post(
    port: int, message: object, headers: dict[str, str]
) -> tuple[dict[str, str], bytes]:
    """One POST to /mcp on its own connection: the reply's headers (lower-case) and body."""
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(
            f"http://127.0.0.1:{port}/mcp",
            content=orjson.dumps(message),
            headers={"content-type": "application/json", **headers},
        )
    return {k.lower(): v for k, v in response.headers.items()}, response.content


def mcp_reply(headers: dict[str, str], body: bytes) -> Any:
    """The JSON-RPC reply to a POST: its JSON body, or its event stream's last message."""
    if headers.get("content-type", "").startswith("text/event-stream"):
        events = [ln[5:].strip() for ln in body.decode().splitlines() if ln.startswith("data:")]
        return orjson.loads([e for e in events if e][-1])
    return orjson.loads(body)


def test_mcp_over_http_is_parsed_by_uvicorn_s_c_parser() -> None:
    """httptools installed: without it only speed suffers, which no other test would see."""
    import uvicorn

    async def app(scope: object, receive: object, send: object) -> None:
        pass

    config = uvicorn.Config(app)
    config.load()
    assert config.http_protocol_class.__module__ == "uvicorn.protocols.http.httptools_impl"


async def test_mcp_over_http_answers_raw_clients_of_both_protocol_eras() -> None:
    """A handshake-era call gets an event stream, a 2026-07-28 request one JSON body."""
    port = free_port()
    headers = {"Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    opening = {"name": "open_task", "arguments": {"task_id": "true_intro"}}
    async with serve("--http", str(port)):
        await (await connect(port)).aclose()
        opened, _ = await http_post(port, init, headers)
        session = headers | {
            "Mcp-Session-Id": opened["mcp-session-id"],
            "Mcp-Protocol-Version": "2025-06-18",
        }
        await http_post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": opening}
        in_session = await http_post(port, call, session)
        modern = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": opening | {"_meta": modern},
        }
        stateless = await http_post(
            port,
            call,
            headers
            | {
                "Mcp-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "open_task",
            },
        )
    for (got, body), kind, rid in (
        (in_session, "text/event-stream", 2),
        (stateless, "application/json", 3),
    ):
        assert got["content-type"].startswith(kind), got
        reply = mcp_reply(got, body)
        assert reply["id"] == rid and reply["result"]["structuredContent"]["body"], reply


@pytest.mark.parametrize(
    "transport",
    [("--jsonrpc",), (), ("--jsonrpc", "--no-sandbox")],
    ids=["jsonrpc", "mcp", "jsonrpc-unsandboxed"],
)
async def test_sigterm_stops_the_server_and_every_lean_process(transport: tuple[str, ...]) -> None:
    import os
    import signal

    import psutil

    from .conftest import LONG_LIVED, has_lean_worker, lean_descendants

    port = free_port()
    args = (*transport, "--port", str(port)) if "--jsonrpc" in transport else ("--http", str(port))
    async with serve(*args) as process:
        LONG_LIVED.add(process.pid)
        try:
            with anyio.fail_after(60):
                while True:  # the warm Lean process (min_processes=1)
                    leans = lean_descendants(process.pid)
                    if has_lean_worker(leans):
                        break
                    await anyio.sleep(0.1)
            os.kill(process.pid, signal.SIGTERM)
            with anyio.fail_after(15):
                await process.wait()
            with anyio.fail_after(10):
                while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in leans):
                    await anyio.sleep(0.05)
        finally:
            LONG_LIVED.discard(process.pid)
