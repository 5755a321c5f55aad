"""The test suite's servers: `bench.serve_clients` bound to the demo suite, the
repository as working directory, and a temp run dir (never the checkout)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bench.serve_clients import (
    JsonRpcProcess,
    McpConnection,
    RpcError,
    jsonrpc_subprocess,
    mcp_subprocess,
    stop_process,
)

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "lean_project" / "suites" / "demo"
_RUN_DIR: Path | None = None

# The names the tests were written with.
RpcProcess = JsonRpcProcess
McpConn = McpConnection
__all__ = ["DEMO", "ROOT", "McpConn", "RpcError", "RpcProcess", "mcp_server", "rpc_server",
           "scratch_run_dir", "stop_process"]  # fmt: skip


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


@asynccontextmanager
async def rpc_server(suite: Path = DEMO, *extra: str) -> AsyncIterator[JsonRpcProcess]:
    async with jsonrpc_subprocess(suite, scratch_run_dir(), *extra, cwd=ROOT) as rpc:
        yield rpc


@asynccontextmanager
async def mcp_server(suite: Path = DEMO) -> AsyncIterator[McpConnection]:
    async with mcp_subprocess(suite, scratch_run_dir(), cwd=ROOT) as conn:
        yield conn
