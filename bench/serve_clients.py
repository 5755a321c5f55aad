"""Clients for a `leanrig serve` subprocess: plain JSON-RPC over its stdio, and MCP over its
stdio through the official SDK — what the benchmarks and the tests drive a server with.

Every wait has a deadline; a client's server is stopped (EOF on stdin, bounded, then killed)
when its context ends.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from subprocess import PIPE
from typing import Any

import anyio
import orjson
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agent_tools.servers import serve_argv
from lsp_bridge import LeanrigError

MAX_REPLY = 64 * 2**20


class RpcError(LeanrigError):
    """An error reply: ``code`` (JSON-RPC), ``message``, ``data`` (``{code, hint}`` of a tool)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message")))  # (a tool's hint is in ``data``)
        self.code = error.get("code")
        self.message = str(error.get("message"))
        self.data: dict[str, Any] = error.get("data") or {}


class JsonRpcProcess:
    """Requests to a `leanrig serve --jsonrpc` process, replies matched by id; anything else
    the server writes (replies to raw lines without a known id) lands in ``unmatched``."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self.reader = BufferedByteReceiveStream(process.stdout)
        self.ids = itertools.count(1)
        self.pending: dict[int, anyio.Event] = {}
        self.replies: dict[Any, dict[str, Any]] = {}
        self.unmatched: list[dict[str, Any]] = []
        self._unmatched_arrived = anyio.Event()

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def read_loop(self) -> None:
        while True:
            try:
                line = await self.reader.receive_until(b"\n", MAX_REPLY)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                return
            msg = orjson.loads(line)
            rid = msg.get("id")
            if rid in self.pending:
                self.replies[rid] = msg
                self.pending.pop(rid).set()
            else:
                self.unmatched.append(msg)
                self._unmatched_arrived.set()

    async def call(self, method: str, timeout: float = 60, **params: Any) -> Any:
        rid = next(self.ids)
        event = anyio.Event()
        self.pending[rid] = event
        await self.send_raw(
            orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n"
        )
        try:
            with anyio.fail_after(timeout):
                await event.wait()
        finally:
            self.pending.pop(rid, None)
        reply = self.replies.pop(rid)
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    async def next_unmatched(self, timeout: float = 30) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while not self.unmatched:
                self._unmatched_arrived = anyio.Event()
                await self._unmatched_arrived.wait()
        return self.unmatched.pop(0)


@asynccontextmanager
async def jsonrpc_subprocess(
    suite: Path, run_dir: Path, *extra: str, cwd: Path | None = None
) -> AsyncIterator[JsonRpcProcess]:
    """A `leanrig serve --jsonrpc` subprocess on stdio (its stderr is inherited)."""
    argv = serve_argv(suite, run_dir, "--jsonrpc", *extra)
    process = await anyio.open_process(argv, stdin=PIPE, stdout=PIPE, stderr=None, cwd=cwd)
    rpc = JsonRpcProcess(process)
    async with anyio.create_task_group() as tg:
        tg.start_soon(rpc.read_loop)
        try:
            yield rpc
        finally:
            await stop_process(process, close_stdin=True)
            tg.cancel_scope.cancel()


async def stop_process(process: Process, *, close_stdin: bool, timeout: float = 15) -> None:
    """Ask a server subprocess to stop (EOF on stdin, or SIGTERM), bounded, then kill it."""
    with anyio.CancelScope(shield=True):
        if close_stdin and process.stdin is not None:
            await process.stdin.aclose()
        elif process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        with anyio.move_on_after(timeout):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


_MCP_ERROR = re.compile(r"\[(\w+)\] (.*?)(?:\. Next: (.*))?$", re.DOTALL)


class McpConnection:
    """The same ``call`` interface as `JsonRpcProcess`, over MCP with the official SDK client;
    tool errors (``[code] message. Next: hint``) become `RpcError` with the same ``data``."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def call(self, method: str, timeout: float = 60, **params: Any) -> Any:
        with anyio.fail_after(timeout):
            result = await self.client.call_tool(method, params)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            match = _MCP_ERROR.search(text)
            code, message, hint = match.groups() if match else ("error", text, None)
            raise RpcError(
                {"code": -32000, "message": message, "data": {"code": code, "hint": hint or ""}}
            )
        return result.structured_content


@asynccontextmanager
async def mcp_subprocess(
    suite: Path, run_dir: Path, *extra: str, cwd: Path | None = None
) -> AsyncIterator[McpConnection]:
    """A `leanrig serve` (MCP on stdio) subprocess, connected with the SDK's client."""
    argv: Sequence[str] = serve_argv(suite, run_dir, *extra)
    params = StdioServerParameters(
        command=argv[0], args=list(argv[1:]), cwd=str(cwd) if cwd else None
    )
    async with Client(params) as client:
        yield McpConnection(client)
