"""The Ray hop's cost: set_proof through `RayPool` (one Ray node on this machine, 1 lean_slots)
versus the local `WarmPool`, same run, same service path (in-process `ProofService`), in
interleaved rounds (the machine is shared: medians of interleaved rounds, not of runs):

- local pool;
- Ray, the step shipped to the node as one operation (one round trip);

per-step latency median / p95, steps per second, 1 and 2 concurrent sessions; and router CPU
per step: this process's CPU time (service + router; Lean runs elsewhere) per step — the
difference to local is what the router costs, and 1 s divided by it is roughly how many steps
per second one router core can feed across nodes.

Needs the `ray` extra; without it the result says so.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from agent_tools.servers import ServeOptions, open_service
from agent_tools.sessions import ProofService

from .common import DEMO, print_table, summarize, write_result

TASK = "and_swap"
WRONG = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"
RIGHT = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


async def steps(service: ProofService, count: int, per_session: int) -> dict[str, Any]:
    latencies: list[float] = []

    async def one() -> None:
        sid = (await service.open_task(TASK)).session_id
        await service.set_proof(sid, WRONG)  # warm: the session's document exists
        for i in range(per_session):
            t = time.perf_counter()
            await service.set_proof(sid, RIGHT if i % 2 else WRONG)
            latencies.append((time.perf_counter() - t) * 1000)
        await service.close_session(sid)

    cpu, wall = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(one)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    n = count * (per_session + 2)  # open + warm + measured steps, all through the pool
    return {
        **summarize(latencies),
        "steps_per_s": round(len(latencies) / wall, 1),
        "cpu_ms_per_step": round(cpu * 1000 / n, 3),
    }


async def variant(address: str | None, per_session: int, run_dir: Path) -> dict[str, Any]:
    options = ServeOptions(suite=DEMO, run_dir=run_dir, max_processes=1, ray=address)
    out: dict[str, Any] = {}
    async with open_service(options) as service:
        for count in (1, 2):
            out[f"{count} session(s)"] = await steps(service, count, per_session)
    return out


async def _steps(service: ProofService, sid: str, count: int, out: list[float]) -> None:
    for i in range(count):
        t = time.perf_counter()
        await service.set_proof(sid, RIGHT if i % 2 else WRONG)
        out.append((time.perf_counter() - t) * 1000)


LOCAL = "local pool"
RAY = "Ray, one round trip per step (1 node, same machine)"


async def interleaved(address: str, rounds: int, per_round: int, run_dir: Path) -> dict[str, Any]:
    """Local and Ray services open side by side; rounds alternate the variants' order."""
    local_options = ServeOptions(suite=DEMO, run_dir=run_dir, max_processes=1)
    ray_options = ServeOptions(suite=DEMO, run_dir=run_dir, max_processes=1, ray=address)
    result: dict[str, Any] = {}
    async with open_service(local_options) as local, open_service(ray_options) as remote:
        variants = [(LOCAL, local), (RAY, remote)]
        for count in (1, 2):
            sids: dict[str, list[str]] = {name: [] for name, _ in variants}
            for name, service in variants:
                for _ in range(count):
                    sid = (await service.open_task(TASK)).session_id
                    await service.set_proof(sid, WRONG)  # warm: the session's document exists
                    sids[name].append(sid)
            latencies: dict[str, list[float]] = {name: [] for name, _ in variants}
            cpu = dict.fromkeys(latencies, 0.0)
            wall = dict.fromkeys(latencies, 0.0)
            for r in range(rounds):
                for name, service in variants if r % 2 == 0 else variants[::-1]:
                    c, w = time.process_time(), time.perf_counter()
                    async with anyio.create_task_group() as tg:
                        for sid in sids[name]:
                            tg.start_soon(_steps, service, sid, per_round, latencies[name])
                    cpu[name] += time.process_time() - c
                    wall[name] += time.perf_counter() - w
            for name, service in variants:
                for sid in sids[name]:
                    await service.close_session(sid)
            result[f"{count} session(s)"] = {
                name: {
                    **summarize(latencies[name]),
                    "steps_per_s": round(len(latencies[name]) / wall[name], 1),
                    "cpu_ms_per_step": round(cpu[name] * 1000 / len(latencies[name]), 3),
                }
                for name in latencies
            }
    return result


def measure(quick: bool) -> dict[str, Any]:
    try:
        import ray  # noqa: F401
        from ray.cluster_utils import Cluster
    except ImportError:
        return {"skipped": "the `ray` extra is not installed"}
    rounds, per_round = (4, 6) if quick else (10, 20)
    with tempfile.TemporaryDirectory(prefix="leanrig-bench-ray-") as tmp:
        cluster: Any = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "resources": {"lean_slots": 1},
                            "include_dashboard": False},
        )  # fmt: skip
        try:
            measured = anyio.run(interleaved, cluster.address, rounds, per_round, Path(tmp))
        finally:
            cluster.shutdown()
    result: dict[str, Any] = {"rounds": rounds, "steps_per_round": per_round}
    for name, rows in measured.items():
        print_table(f"set_proof, {name}", rows, reference=LOCAL)
        result[name] = rows
        for variant in (RAY,):
            hop = rows[variant]["median_ms"] - rows[LOCAL]["median_ms"]
            cpu = rows[variant]["cpu_ms_per_step"] - rows[LOCAL]["cpu_ms_per_step"]
            print(f"  {variant}: hop +{hop:.2f} ms median; router CPU +{cpu:.2f} ms/step "
                  f"(~{1000 / max(rows[variant]['cpu_ms_per_step'], 1e-3):.0f} steps/s per "
                  "router core)")  # fmt: skip
    return result


def run(quick: bool = False) -> dict[str, Any]:
    result = measure(quick)
    write_result("ray", result)
    return result


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
