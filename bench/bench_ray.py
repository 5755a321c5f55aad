"""The Ray hop's cost: set_proof through `RayPool` (one Ray node on this machine, 1 lean_slots)
versus the local `WarmPool`, same run, same service path (in-process `ProofService`):

- per-step latency median / p95 and steps per second, 1 and 2 concurrent sessions;
- router CPU per step: this process's CPU time (service + router; Lean runs elsewhere) per
  step, local vs Ray — the difference is what the router costs, and 1 s divided by it is
  roughly how many steps per second one router core can feed across nodes.

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


def measure(quick: bool) -> dict[str, Any]:
    try:
        import ray  # noqa: F401
        from ray.cluster_utils import Cluster
    except ImportError:
        return {"skipped": "the `ray` extra is not installed"}
    per_session = 20 if quick else 100
    with tempfile.TemporaryDirectory(prefix="leanrig-bench-ray-") as tmp:
        local = anyio.run(variant, None, per_session, Path(tmp))
        cluster: Any = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "resources": {"lean_slots": 1},
                            "include_dashboard": False},
        )  # fmt: skip
        try:
            remote = anyio.run(variant, cluster.address, per_session, Path(tmp))
        finally:
            cluster.shutdown()
    result: dict[str, Any] = {}
    for name in local:
        rows = {"local pool": local[name], "Ray (1 node, same machine)": remote[name]}
        print_table(f"set_proof, {name}", rows, reference="local pool")
        result[name] = rows
        hop = remote[name]["median_ms"] - local[name]["median_ms"]
        cpu = remote[name]["cpu_ms_per_step"] - local[name]["cpu_ms_per_step"]
        print(f"  hop: +{hop:.2f} ms median; router CPU +{cpu:.2f} ms/step "
              f"(~{1000 / max(remote[name]['cpu_ms_per_step'], 1e-3):.0f} steps/s per router core)")  # fmt: skip
    return result


def run(quick: bool = False) -> dict[str, Any]:
    result = measure(quick)
    write_result("ray", result)
    return result


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
