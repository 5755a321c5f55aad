"""Concurrency and memory through the real server path (`leanrig serve --jsonrpc` over stdio):

- 1 / 4 / 16 concurrent sessions, each alternating wrong and right proofs: step latency median
  and p95, and the pool's queue share (from the ledger's queue_ms);
- memory: RSS of every Lean process tree over 1,000 edits of one session.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil

from repl_pool import tree_rss

from .common import DEMO, print_table, summarize, write_result
from .serve_clients import JsonRpcProcess as RpcProcess
from .serve_clients import jsonrpc_subprocess

TASK = "and_swap"
WRONG = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"
RIGHT = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


async def sessions(rpc: RpcProcess, count: int, steps: int) -> tuple[list[float], list[float]]:
    latencies: list[float] = []
    queue: list[float] = []

    async def one() -> None:
        sid = (await rpc.call("open_task", task_id=TASK))["session_id"]
        for i in range(steps):
            t = time.perf_counter()
            await rpc.call("set_proof", session_id=sid, body=RIGHT if i % 2 else WRONG)
            latencies.append((time.perf_counter() - t) * 1000)
        timings = await rpc.call("get_timings", session_id=sid)
        queue.extend(e["queue_ms"] for e in timings["entries"] if e["tool"] == "set_proof")
        await rpc.call("close_session", session_id=sid)

    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(one)
    return latencies, queue


def lean_trees(server_pid: int) -> dict[int, int]:
    """pid -> RSS of every Lean process tree under the leanrig server process: each Lean
    server (its workers included), or each direct file worker (`lean --worker` that no Lean
    server started)."""
    out = {}
    for child in psutil.Process(server_pid).children(recursive=True):
        try:
            cmd = child.cmdline()
            # Only Lean itself (the sandbox's bwrap/prlimit carry the same argv).
            if not cmd or Path(cmd[0]).name != "lean":
                continue
            if "--server" in cmd or ("--worker" in cmd and not _under_lean_server(child)):
                out[child.pid] = tree_rss(child.pid)
        except psutil.Error:
            continue
    return out


def _under_lean_server(proc: psutil.Process) -> bool:
    return any("--server" in p.cmdline() for p in proc.parents())


async def memory(rpc: RpcProcess, edits: int) -> list[dict[str, float]]:
    sid = (await rpc.call("open_task", task_id=TASK))["session_id"]
    samples = []
    for i in range(edits):
        # Distinct bodies, so every edit is real work for Lean.
        body = (RIGHT if i % 2 else WRONG) + f" -- edit {i}"
        await rpc.call("set_proof", session_id=sid, body=body)
        if i % max(1, edits // 10) == 0 or i == edits - 1:
            trees = lean_trees(rpc.process.pid)
            samples.append({"edit": i, "rss_mb": round(sum(trees.values()) / 2**20, 1),
                            "processes": len(trees)})  # fmt: skip
    await rpc.call("close_session", session_id=sid)
    return samples


async def measure(quick: bool) -> dict[str, Any]:
    steps = 6 if quick else 20
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="leanrig-bench-sessions-") as tmp:
        async with jsonrpc_subprocess(DEMO, Path(tmp), "--max-processes", "2") as rpc:
            await sessions(rpc, 1, 2)  # warm
            rows = {}
            for count in (1, 4, 16):
                lat, queue = await sessions(rpc, count, steps)
                rows[f"{count} concurrent session(s), set_proof"] = summarize(lat)
                rows[f"{count} session(s): of which queue"] = summarize(queue)
            print_table("concurrency: step latency over 2 Lean processes", rows,
                        "1 concurrent session(s), set_proof")  # fmt: skip
            result["concurrency"] = rows
            edits = 100 if quick else 1000
            samples = await memory(rpc, edits)
            print(f"\n## memory: Lean RSS over {edits} edits (one session, all server trees)")
            for s in samples:
                line = f"{s['rss_mb']:>8.1f} MB in {s['processes']} tree(s)"
                print(f"  after edit {s['edit']:>5}: {line}")
            first, last = samples[0]["rss_mb"], samples[-1]["rss_mb"]
            growth = round(last - first, 1)
            print(f"  growth: {growth} MB ({statistics.mean([first, last]):.0f} MB mean)")
            result["memory"] = {"edits": edits, "samples": samples, "growth_mb": growth}
    return result


def run(quick: bool = False) -> dict[str, Any]:
    result = anyio.run(measure, quick)
    write_result("sessions", result)
    return result


if __name__ == "__main__":
    import sys

    from agent_tools.cli import configure_logging

    configure_logging()
    run(quick="--quick" in sys.argv)
