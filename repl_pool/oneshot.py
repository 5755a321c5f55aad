"""One-shot Lean processes (compile a file, run a query) with a wall-clock deadline.

Each runs in its own marked session; on timeout or cancellation its whole tree is killed."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import DEVNULL

import anyio
import psutil

from lsp_bridge import descendants, kill_tree_async, spawn_marked

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
    """Resident bytes of ``pid`` and its descendants (a tree walk, cheap enough to poll)."""
    total = 0
    for member in (pid, *descendants(pid)):
        try:
            total += psutil.Process(member).memory_info().rss
        except psutil.Error:
            pass
    return total


async def one_shot(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    rss_limit_mb: int | None = None,
) -> Completed:
    """Run ``argv`` to its exit and output EOF; past ``timeout`` or the RSS cap, kill the tree.

    A killed run has ``returncode`` None."""
    started = time.perf_counter()
    # Never our stdin: it may be a client's wire, and a child (libuv) may make it blocking.
    process, token = await spawn_marked(argv, cwd=cwd, env=env, stdin=DEVNULL)
    out: list[bytes] = []
    err: list[bytes] = []

    async def drain(stream: anyio.abc.ByteReceiveStream | None, into: list[bytes]) -> None:
        if stream is None:
            return
        size = 0
        async for chunk in stream:
            if size < MAX_OUTPUT:  # keep reading past the cap: a full pipe would block Lean
                into.append(chunk)
                size += len(chunk)

    exit_code: int | None = None
    finished = False
    over_memory = False

    async def watch_memory(deadline: anyio.CancelScope) -> None:
        nonlocal over_memory
        assert rss_limit_mb is not None
        while True:
            await anyio.sleep(0.1)
            if tree_rss(process.pid) > rss_limit_mb * 2**20:
                over_memory = True
                deadline.cancel()
                return

    async def run_to_exit(watcher: anyio.CancelScope) -> None:
        nonlocal exit_code
        exit_code = await process.wait()
        watcher.cancel()  # exited: its memory no longer counts

    try:
        with anyio.move_on_after(timeout) as deadline:
            async with anyio.create_task_group() as tg:
                watcher = anyio.CancelScope()
                if rss_limit_mb is not None:

                    async def watch() -> None:
                        with watcher:
                            await watch_memory(deadline)

                    tg.start_soon(watch)
                tg.start_soon(drain, process.stdout, out)
                tg.start_soon(drain, process.stderr, err)
                tg.start_soon(run_to_exit, watcher)
            finished = True
    finally:
        await kill_tree_async(token, process.pid)
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await process.aclose()
    return Completed(
        exit_code if finished else None,
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
