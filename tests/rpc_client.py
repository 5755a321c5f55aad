"""A plain JSON-RPC client for `leanrig serve --jsonrpc` run as a subprocess (stdio)."""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from subprocess import PIPE
from typing import Any

import anyio
import orjson
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

ROOT = Path(__file__).resolve().parent.parent
_RUN_DIR: Path | None = None


def scratch_run_dir() -> Path:
    """Where servers started by tests write run data: one temp dir per test process, removed at
    exit — never the repository (tests used to leave `runs/tests/` in the checkout)."""
    global _RUN_DIR
    if _RUN_DIR is None:
        import atexit
        import shutil
        import tempfile

        _RUN_DIR = Path(tempfile.mkdtemp(prefix="leanrig-test-runs-"))
        atexit.register(shutil.rmtree, _RUN_DIR, True)
    return _RUN_DIR


DEMO = ROOT / "lean_project" / "suites" / "demo"


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")
        self.message = str(error.get("message"))
        self.data: dict[str, Any] = error.get("data") or {}


class RpcProcess:
    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        self.reader = BufferedByteReceiveStream(process.stdout)
        self.ids = itertools.count(1)
        self.pending: dict[int, anyio.Event] = {}
        self.replies: dict[Any, dict[str, Any]] = {}
        self.unmatched: list[dict[str, Any]] = []

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def read_loop(self) -> None:
        while True:
            try:
                line = await self.reader.receive_until(b"\n", 64 * 2**20)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                return
            msg = orjson.loads(line)
            rid = msg.get("id")
            if rid in self.pending:
                self.replies[rid] = msg
                self.pending.pop(rid).set()
            else:
                self.unmatched.append(msg)

    async def call(self, method: str, timeout: float = 60, **params: Any) -> Any:
        rid = next(self.ids)
        event = anyio.Event()
        self.pending[rid] = event
        await self.send_raw(
            orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n"
        )
        with anyio.fail_after(timeout):
            await event.wait()
        reply = self.replies.pop(rid)
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    async def next_unmatched(self, timeout: float = 30) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while not self.unmatched:
                await anyio.sleep(0.01)
        return self.unmatched.pop(0)


@asynccontextmanager
async def rpc_server(suite: Path = DEMO, *extra: str) -> AsyncIterator[RpcProcess]:
    argv = [
        sys.executable,
        "-m",
        "agent_tools.cli",
        "serve",
        "--suite",
        str(suite),
        "--jsonrpc",
        "--run-dir",
        str(scratch_run_dir()),
        *extra,
    ]
    process = await anyio.open_process(argv, stdin=PIPE, stdout=PIPE, stderr=None, cwd=ROOT)
    rpc = RpcProcess(process)
    async with anyio.create_task_group() as tg:
        tg.start_soon(rpc.read_loop)
        try:
            yield rpc
        finally:
            await stop_process(process, close_stdin=True)
            tg.cancel_scope.cancel()


async def stop_process(process: Process, *, close_stdin: bool) -> None:
    """Ask a server subprocess to stop (EOF on stdin, or SIGTERM), bounded, then kill it."""
    with anyio.CancelScope(shield=True):
        if close_stdin and process.stdin is not None:
            await process.stdin.aclose()
        elif process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        with anyio.move_on_after(15):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


class McpConn:
    """The same `call` interface as RpcProcess, over MCP stdio with the official SDK client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def call(self, method: str, timeout: float = 60, **params: Any) -> Any:
        import re

        with anyio.fail_after(timeout):
            result = await self.client.call_tool(method, params)
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            match = re.search(r"\[(\w+)\] (.*?)(?:\. Next: (.*))?$", text, re.DOTALL)
            code, message, hint = match.groups() if match else ("error", text, None)
            raise RpcError(
                {"code": -32000, "message": message, "data": {"code": code, "hint": hint or ""}}
            )
        return result.structured_content


@asynccontextmanager
async def mcp_server(suite: Path = DEMO) -> AsyncIterator[McpConn]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "agent_tools.cli",
            "serve",
            "--suite",
            str(suite),
            "--run-dir",
            str(scratch_run_dir()),
        ],
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        yield McpConn(client)
