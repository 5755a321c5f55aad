"""repl_pool: acquire warm vs cold, and proof-check throughput through the pool vs spawning
`lean file.lean` per check (the REPL-less baseline), in the same run."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import anyio

from lsp_bridge import Timeouts, find_lean
from repl_pool import LeanEnvironment, PoolConfig, WarmPool

from .bench_lsp import BAD, GOOD, HEADER
from .common import print_table, summarize, write_result


def check_texts(n: int) -> list[str]:
    return [HEADER + f"def pad{i} : N := N.z\n" + (GOOD if i % 2 else BAD) for i in range(n)]


def _config(processes: int, **kw: Any) -> PoolConfig:
    return PoolConfig(
        max_processes=processes,
        default_header="prelude",
        timeouts=Timeouts(spawn=60, barrier=60),
        **kw,
    )


async def acquire_latencies(env: LeanEnvironment, warm_n: int, cold_n: int) -> dict[str, Any]:
    cold: list[float] = []
    for _ in range(cold_n):
        async with WarmPool.open(env, _config(1)) as pool:
            key = pool.key_for(HEADER)
            t = time.perf_counter()
            async with pool.acquire(key):
                cold.append((time.perf_counter() - t) * 1000)
    warm: list[float] = []
    async with WarmPool.open(env, _config(1)) as pool:
        key = pool.key_for(HEADER)
        async with pool.acquire(key):
            pass
        for _ in range(warm_n):
            t = time.perf_counter()
            async with pool.acquire(key):
                warm.append((time.perf_counter() - t) * 1000)
    return {
        "cold (spawn + initialize + header)": summarize(cold),
        "warm (idle slot)": summarize(warm),
    }


async def pool_throughput(env: LeanEnvironment, texts: list[str], processes: int) -> float:
    async with WarmPool.open(env, _config(processes, min_processes=processes)) as pool:
        # Measure steady state: wait for the prewarmed processes.
        await pool.wait_idle(processes, timeout=60)
        t = time.perf_counter()
        errors = 0
        limiter = anyio.CapacityLimiter(processes * 2)

        async def one(text: str) -> None:
            nonlocal errors
            async with limiter:
                report = await pool.check(text)
                errors += bool(report.errors)

        async with anyio.create_task_group() as tg:
            for text in texts:
                tg.start_soon(one, text)
        elapsed = time.perf_counter() - t
        assert errors == len(texts) // 2, errors
        return len(texts) / elapsed


def spawn_throughput(project: Path, texts: list[str], parallel: int) -> float:
    lean = str(find_lean().lean)
    files = []
    for i, text in enumerate(texts):
        path = project / f"Spawn{i}.lean"
        path.write_text(text)
        files.append(path)
    t = time.perf_counter()
    running: list[subprocess.Popen[bytes]] = []
    for path in files:
        if len(running) >= parallel:
            running.pop(0).wait()
        running.append(subprocess.Popen([lean, str(path)], stdout=subprocess.DEVNULL, cwd=project))
    for proc in running:
        proc.wait()
    return len(texts) / (time.perf_counter() - t)


def run(quick: bool = False) -> dict[str, Any]:
    n = 32 if quick else 200
    with TemporaryDirectory(prefix="leanrig-bench-pool-") as tmp:
        project = Path(tmp)
        env = LeanEnvironment(find_lean(), project)
        acquire = anyio.run(acquire_latencies, env, 50 if quick else 500, 3 if quick else 10)
        print_table("pool acquire latency", acquire, "cold (spawn + initialize + header)")
        texts = check_texts(n)
        rows: dict[str, Any] = {}
        spawn = spawn_throughput(project, texts, 2)
        rows["spawn `lean file.lean` per check, 2 parallel"] = round(spawn, 1)
        for processes in (1, 2, 4):
            rate = anyio.run(pool_throughput, env, texts, processes)
            rows[f"WarmPool, {processes} process(es)"] = round(rate, 1)
        print(f"\n## proof-check throughput ({n} checks, checks/s, higher is better)")
        for name, rate in rows.items():
            print(f"{name:<52}{rate:>10.1f}/s{rate / spawn:>8.1f}x")
    result = {"acquire": acquire, "throughput_checks_per_s": rows, "checks": n}
    write_result("pool", result)
    return result


if __name__ == "__main__":
    from agent_tools.cli import configure_logging

    configure_logging()
    run()
