"""One-shot Lean processes (compile a file, run a query) with a wall-clock deadline.

The process runs in its own session, marked with a kill token (lsp_bridge.proctree), under the
caller's sandbox wrapper; on timeout or cancellation its whole tree is killed. Output is
collected concurrently so a chatty process cannot block on a full pipe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil

from lsp_bridge.proctree import kill_tree, spawn_marked

MAX_OUTPUT = 32 * 2**20


@dataclass(frozen=True, slots=True)
class Completed:
    returncode: int | None  # None: killed (deadline or memory cap)
    stdout: str
    stderr: str
    elapsed_ms: float
    over_memory: bool = False

    @property
    def timed_out(self) -> bool:
        return self.returncode is None and not self.over_memory


def tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


async def run_once(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    rss_limit_mb: int | None = None,
) -> Completed:
    started = time.perf_counter()
    process, token = await spawn_marked(argv, cwd=cwd, env=env, stdin=None)
    out: list[bytes] = []
    err: list[bytes] = []

    async def drain(stream: anyio.abc.ByteReceiveStream | None, into: list[bytes]) -> None:
        if stream is None:
            return
        size = 0
        async for chunk in stream:
            if size < MAX_OUTPUT:
                into.append(chunk)
                size += len(chunk)

    returncode: int | None = None
    over_memory = False

    async def watch_memory(scope: anyio.CancelScope) -> None:
        nonlocal over_memory
        assert rss_limit_mb is not None
        while True:
            await anyio.sleep(0.1)
            if tree_rss(process.pid) > rss_limit_mb * 2**20:
                over_memory = True
                kill_tree(token, process.pid)
                scope.cancel()
                return

    try:
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as tg:
                if rss_limit_mb is not None:
                    tg.start_soon(watch_memory, scope)
                tg.start_soon(drain, process.stdout, out)
                tg.start_soon(drain, process.stderr, err)
                returncode = await process.wait()
                tg.cancel_scope.cancel()
    finally:
        if returncode is None:
            kill_tree(token, process.pid)
        else:
            kill_tree(token)  # anything it left running
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await process.aclose()
    return Completed(
        returncode,
        b"".join(out).decode("utf-8", "replace"),
        b"".join(err).decode("utf-8", "replace"),
        (time.perf_counter() - started) * 1000,
        over_memory,
    )


def base_env(lean_path: Sequence[Path] = ()) -> dict[str, str]:
    env = dict(os.environ)
    if lean_path:
        env["LEAN_PATH"] = os.pathsep.join(str(p) for p in lean_path)
    return env
