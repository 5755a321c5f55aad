"""`leanrig doctor --ray ADDRESS|auto`: every alive node of a Ray cluster checked, with a deadline.

Imports ray only once a cluster is asked for. Must not check a node itself (node_check.py does)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from lsp_bridge import first_line
from repl_pool import RESOURCE, RayOptions, joined_cluster

from ..runs import HarnessName
from .doctor import SMOKE_DEADLINE
from .node_check import Check, Expected, NodeReport, check_node, expected_here

NODE_BUDGET = SMOKE_DEADLINE + 60.0  # a node's whole check, on its own clock
ANSWER_MARGIN = 30.0  # waited beyond the budget: scheduling, worker start, imports
CANCEL_GRACE = 15.0  # a late check's unwinding, its reaper's sweep included
NO_LEAN_SLOTS = (
    f"no alive node offers {RESOURCE}: start the Lean nodes with `ray start ... --resources "
    f"'{{\"{RESOURCE}\": N}}'` (docs/scale-out.md)"
)


@dataclass(frozen=True, slots=True)
class NodeRow:
    node_id: str
    address: str
    lean_slots: float
    memory: int  # bytes (Ray's `memory` resource)


def alive_nodes(rows: Iterable[Mapping[str, Any]]) -> list[NodeRow]:
    found = [
        NodeRow(
            node_id=str(row["NodeID"]),
            address=str(row.get("NodeManagerAddress", "?")),
            lean_slots=float(row.get("Resources", {}).get(RESOURCE, 0)),
            memory=int(row.get("Resources", {}).get("memory", 0)),
        )
        for row in rows
        if row.get("Alive")
    ]
    return sorted(found, key=lambda n: (n.address, n.node_id))


def cluster_problems(nodes: list[NodeRow]) -> list[str]:
    """What fails the cluster as a whole, whatever each node says."""
    return [] if any(n.lean_slots > 0 for n in nodes) else [NO_LEAN_SLOTS]


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    row: NodeRow
    report: NodeReport | None  # None: the check did not come back
    checks: list[Check]  # the walk's own, then the node's
    seconds: float

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, object]:
        facts = self.report.to_json() if self.report is not None else {}
        facts.pop("checks", None)
        facts.pop("node_id", None)  # the row's
        return {
            **asdict(self.row),
            "ok": self.ok,
            "seconds": round(self.seconds, 1),
            **facts,
            "checks": [asdict(c) for c in self.checks],
        }


@dataclass(frozen=True, slots=True)
class ClusterReport:
    address: str
    expected: Expected
    nodes: list[NodeOutcome]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems and all(n.ok for n in self.nodes)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "address": self.address,
            "expected": asdict(self.expected),
            "problems": self.problems,
            "nodes": [n.to_json() for n in self.nodes],
        }

    def lines(self) -> list[str]:
        e = self.expected
        here = (
            f"leanrig {e.leanrig}, Python {e.python}, Ray {e.ray}; Lean {e.lean_version} at "
            f"{e.lean_path}"
        )
        if e.suite_path is not None:
            here += f"; suite {e.suite_path} (content {e.suite_hash}" + (
                ", prelude)" if e.suite_prelude else ", full toolchain)"
            )
        if e.harness is not None:
            here += f"; {e.harness} {e.harness_version}"
        out = [
            f"Ray cluster at {self.address}: {len(self.nodes)} alive node(s)",
            f"starting machine: {here}",
        ]
        for node in self.nodes:
            r = node.row
            host = f"{node.report.hostname}, " if node.report is not None else ""
            out += [
                "",
                f"node {r.node_id[:12]} ({host}{r.address}): {RESOURCE} "
                f"{r.lean_slots:g}, memory {r.memory / 2**30:.1f} GiB: "
                + ("ok" if node.ok else "FAIL"),
            ]
            out += [f"  {'ok' if c.ok else 'FAIL':<5} {c.name:<9} {c.detail}" for c in node.checks]
        failed = sum(not n.ok for n in self.nodes)
        out.append("")
        out += [f"FAIL: {problem}" for problem in self.problems]
        if failed:
            out.append(f"FAIL: {failed} of {len(self.nodes)} node(s) failed a check")
        elif self.ok:
            out.append(f"ok: every node ({len(self.nodes)}) passes")
        return out


async def check_cluster(
    address: str, expected: Expected, budget: float = NODE_BUDGET, margin: float = ANSWER_MARGIN
) -> ClusterReport:
    """Check every alive node at once; one silent past ``budget + margin`` s fails. asyncio only."""
    deadline = budget + margin
    async with joined_cluster(RayOptions(address=address)) as ray:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = alive_nodes(await anyio.to_thread.run_sync(ray.nodes))
        remote = ray.remote(check_node)
        outcomes: dict[str, NodeOutcome] = {}

        async def check(row: NodeRow) -> None:
            started = time.perf_counter()
            ref = remote.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(row.node_id, soft=False),
            ).remote(expected, budget)
            report: NodeReport | None = None
            try:
                with anyio.fail_after(deadline):
                    report = await ref
            except TimeoutError:
                await _cancelled(ray, ref)
                answer = Check("answered", False, f"no answer within {deadline:g} s")
            except Exception as exc:  # whatever the node or Ray raised
                answer = Check("answered", False, _failed_call(exc, expected))
            seconds = time.perf_counter() - started
            if report is not None:
                answer = _answered(row, report, seconds)
            checks = [answer, *(report.checks if report is not None else [])]
            outcomes[row.node_id] = NodeOutcome(row, report, checks, seconds)

        async with anyio.create_task_group() as tg:
            for row in nodes:
                tg.start_soon(check, row)
    return ClusterReport(
        address=address,
        expected=expected,
        nodes=[outcomes[n.node_id] for n in nodes],
        problems=cluster_problems(nodes),
    )


def _answered(row: NodeRow, report: NodeReport, seconds: float) -> Check:
    if report.node_id != row.node_id:
        return Check(
            "answered",
            False,
            f"ran on node {report.node_id[:12]}, not on the node it was pinned to",
        )
    return Check("answered", True, f"in {seconds:.1f} s, on this node")


async def _cancelled(ray: Any, ref: Any) -> None:
    """Cancel a late check, then give it `CANCEL_GRACE` so its reaper can sweep.

    Ray's cancel does not reach a worker blocked in a wait; leaving at once kills the reaper."""
    ray.cancel(ref)
    with anyio.move_on_after(CANCEL_GRACE):
        try:
            await ref
        except Exception:
            pass


def _failed_call(exc: Exception, expected: Expected) -> str:
    cause = getattr(exc, "cause", None) or exc
    return (
        f"the check failed on the node: {type(cause).__name__}: {first_line(cause)} (the node "
        f"needs leanrig {expected.leanrig} and Ray {expected.ray} installed; docs/scale-out.md)"
    )


def run_cluster_doctor(
    address: str, suite: Path | None, harness: HarnessName | None, harness_bin: Path | None
) -> ClusterReport:
    """`leanrig doctor --ray`; raises `LeanrigError` or `repl_pool.NoCluster`."""
    expected = expected_here(suite, harness, harness_bin)
    return anyio.run(check_cluster, address, expected, backend="asyncio")
