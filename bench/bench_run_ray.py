"""`leanrig run --ray`: attempts per minute on 1 vs 2 nodes of a local Ray cluster, and what
placing an attempt on Ray costs beside a local attempt — in one run, on the same suite.

Every variant runs the demo suite's tasks with the same agent: the model-free search agent
after a fixed think time (``DELAY`` s of sleep: a stand-in for the model's turns, which is
where a real attempt spends its time; the search itself takes ~1 s of Lean here). Variants:

- local, ``--parallel 1`` and ``--parallel 2`` (this machine alone);
- Ray, 1 node with one ``lean_slots`` unit, ``--parallel 2`` (Ray holds the second attempt
  until the first is done);
- Ray, 2 nodes with one unit each, ``--parallel 2``.

Per attempt: leanrig's overhead (all but the agent's run and the verdict; local and placed
alike) and, on Ray, the wait for a host (an idle one, or a new actor placed and answering from
its node: a worker process and leanrig's imports there, ~1.6 s, once per host). Both nodes run on this 2-core machine, so
the 2-node row shows what the cluster's capacity allows when attempts wait on their model,
not a second machine's CPU.

Needs the `ray` extra; without it the result says so.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from agent_tools.runs import RunOptions, run_benchmark

from .common import DEMO, ROOT, print_table, summarize, write_result

DELAY = 4.0  # the agent's think time before it searches (s)
LEANRIG = ROOT / ".venv" / "bin" / "leanrig"


def agent(delay: float) -> str:
    search = f"{LEANRIG} agent search --mcp-config"
    if not delay:
        return f"{search} {{mcp_config}}"
    return f"sh -c 'sleep {delay}; exec {search} \"$0\"' {{mcp_config}}"


async def measure(
    suite: Path, out: Path, *, tasks: list[str], parallel: int, delay: float,
    ray: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One `leanrig run` of ``tasks``: attempts per minute, overheads (ms), verdicts."""
    options = RunOptions(
        suite=suite, agent=agent(delay), out=out, time_limit=120, parallel=parallel,
        tasks=tuple(tasks), model="none", quiet=True, ray=ray,
    )  # fmt: skip
    t = time.perf_counter()
    summary = await run_benchmark(options)
    wall = time.perf_counter() - t
    return {
        "attempts": len(summary.results),
        "accepted": summary.accepted,
        "wall_s": round(wall, 2),
        "attempts_per_min": round(len(summary.results) * 60 / wall, 2),
        "overhead": summarize([s * 1000 for s in summary.overhead_s]),
        "placement": summarize([s * 1000 for s in summary.placement_s])
        if summary.placement_s
        else None,
        "nodes": sorted({r.node for r in summary.results if r.node}),
        "verdicts": {r.task: r.accepted for r in summary.results},
    }


def run(quick: bool = False) -> dict[str, Any]:
    try:
        from ray.cluster_utils import Cluster
    except ImportError:
        return {"skipped": "the `ray` extra is not installed (pip install 'leanrig[ray]')"}
    tasks = ["refl_z", "and_swap", "add_zero", "true_intro"]
    if not quick:
        tasks += ["length_one", "and_left_unicode", "eq_symm", "or_swap"]
    delay = 1.0 if quick else DELAY
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-run-ray-") as tmp:
        suite = Path(shutil.copytree(DEMO, Path(tmp) / "demo"))

        def variant(name: str, parallel: int, ray: str | None = None) -> None:
            out = Path(tmp) / name.replace(" ", "-").replace(",", "")
            rows[name] = anyio.run(
                lambda: measure(suite, out, tasks=tasks, parallel=parallel, delay=delay, ray=ray),
                backend="asyncio",
            )

        variant("local, parallel 1", 1)
        variant("local, parallel 2", 2)
        cluster: Any = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "resources": {"lean_slots": 1},
                            "include_dashboard": False},
        )  # fmt: skip
        try:
            variant("Ray, 1 node, parallel 2", 2, cluster.address)
            cluster.add_node(num_cpus=1, resources={"lean_slots": 1})
            cluster.wait_for_nodes()
            variant("Ray, 2 nodes, parallel 2", 2, cluster.address)
        finally:
            cluster.shutdown()
    same = len({orjson_key(r["verdicts"]) for r in rows.values()}) == 1
    print(f"\n## leanrig run --ray: {len(tasks)} tasks, agent think time {delay:g} s")
    print(f"{'variant':<28}{'attempts/min':>14}{'wall s':>9}{'nodes':>7}")
    for name, r in rows.items():
        print(f"{name:<28}{r['attempts_per_min']:>14.2f}{r['wall_s']:>9.1f}{len(r['nodes']):>7}")
    print_table("per-attempt overhead (leanrig's own time)",
                {name: r["overhead"] for name, r in rows.items()},
                reference="local, parallel 1")  # fmt: skip
    print_table("waiting for a host on Ray (an idle one, or a new one placed)",
                {name: r["placement"] for name, r in rows.items() if r["placement"]})  # fmt: skip
    one, two = rows["Ray, 1 node, parallel 2"], rows["Ray, 2 nodes, parallel 2"]
    result = {
        "tasks": tasks,
        "think_time_s": delay,
        "variants": rows,
        "overhead": {name: r["overhead"] for name, r in rows.items()},
        "placement": {name: r["placement"] for name, r in rows.items() if r["placement"]},
        "ratios": {
            "attempts_per_min": {name: r["attempts_per_min"] for name, r in rows.items()},
            "two_nodes_vs_one_throughput": round(
                two["attempts_per_min"] / one["attempts_per_min"], 2
            ),
            "same_verdicts_everywhere": same,
        },
        "notes": [
            "both nodes share this machine's 2 cores: the 2-node row measures the cluster's "
            "capacity for attempts waiting on their model (the think time), not more CPU",
            "placement is the wait for a host: an idle one is reused (~0 ms); a new one (a "
            "worker process and leanrig's imports, ~1.6 s) is started only while fewer than "
            "--parallel live; on 1 node it also holds the wait for the node's one unit",
        ],
    }
    write_result("run_ray", result)
    return result


def orjson_key(verdicts: dict[str, bool]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(verdicts.items()))


if __name__ == "__main__":
    run()
