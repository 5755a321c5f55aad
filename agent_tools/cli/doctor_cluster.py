"""`leanrig doctor --ray ADDRESS|auto`: every alive node of a Ray cluster checked for
`leanrig run --ray` (docs/scale-out.md, "What each node needs").

Joins the cluster, lists its alive nodes (`ray.nodes()`), runs `node_check.check_node` on each
one as a small Ray task pinned to it (no CPU reserved, hard node affinity, not retried), each
awaited with a deadline: a node that does not answer in time is a failed node, not a hung
doctor. Then the report: per node, each check's ok/FAIL with its reason; the cluster fails as
a whole when no alive node offers ``lean_slots`` (no attempt could be placed).

Imports ray only once a cluster is asked for (`repl_pool.joined_cluster`). Must not check a
node itself (node_check.py does, on the node).
"""

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

# A node's whole check, on the node's clock: finding Lean, the smoke test, the harness.
NODE_BUDGET = SMOKE_DEADLINE + 60.0
# What the walk waits beyond it: scheduling, a worker started for the task, imports.
ANSWER_MARGIN = 30.0
CANCEL_GRACE = 15.0  # a late check's unwinding (its reaper waits up to 10 s)
NO_LEAN_SLOTS = (
    f"no alive node offers {RESOURCE}: start the Lean nodes with `ray start ... --resources "
    f"'{{\"{RESOURCE}\": N}}'` (docs/scale-out.md)"
)


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A node as the cluster lists it."""

    node_id: str
    address: str
    lean_slots: float
    memory: int  # bytes Ray schedules by (`memory` resource)


def alive_nodes(rows: Iterable[Mapping[str, Any]]) -> list[NodeRow]:
    """The alive nodes of ``ray.nodes()``'s rows, by address."""
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
    checks: list[Check]  # the walk's own (did it answer, on that node) then the node's
    seconds: float

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, object]:
        facts = self.report.to_json() if self.report is not None else {}
        facts.pop("checks", None)
        facts.pop("node_id", None)  # the row's (they are equal when the node answered)
        return {**asdict(self.row), "ok": self.ok, "seconds": round(self.seconds, 1), **facts,
                "checks": [asdict(c) for c in self.checks]}  # fmt: skip


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
        return {"ok": self.ok, "address": self.address, "expected": asdict(self.expected),
                "problems": self.problems, "nodes": [n.to_json() for n in self.nodes]}  # fmt: skip

    def lines(self) -> list[str]:
        """The report for a terminal: a header, each node and its checks, the summary."""
        e = self.expected
        here = f"leanrig {e.leanrig}, Python {e.python}, Ray {e.ray}; Lean {e.lean_version} at " \
            f"{e.lean_path}"  # fmt: skip
        if e.suite_path is not None:
            here += f"; suite {e.suite_path} (content {e.suite_hash}" + (
                ", prelude)" if e.suite_prelude else ", full toolchain)"
            )
        if e.harness is not None:
            here += f"; {e.harness} {e.harness_version}"
        out = [f"Ray cluster at {self.address}: {len(self.nodes)} alive node(s)",
               f"starting machine: {here}"]  # fmt: skip
        for node in self.nodes:
            r = node.row
            host = f"{node.report.hostname}, " if node.report is not None else ""
            out += ["", f"node {r.node_id[:12]} ({host}{r.address}): {RESOURCE} "
                    f"{r.lean_slots:g}, memory {r.memory / 2**30:.1f} GiB: "
                    + ("ok" if node.ok else "FAIL")]  # fmt: skip
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
    """Every alive node of the cluster at ``address`` checked at once, each within ``budget``
    seconds on the node; a node that has not answered ``budget + margin`` seconds after it was
    asked has failed (asyncio only: Ray's futures are asyncio futures)."""
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
                max_retries=0,  # a failed check is reported, not tried again elsewhere
                scheduling_strategy=NodeAffinitySchedulingStrategy(row.node_id, soft=False),
            ).remote(expected, budget)
            report: NodeReport | None = None
            try:
                with anyio.fail_after(deadline):
                    report = await ref
            except TimeoutError:
                await _cancelled(ray, ref)
                answer = Check("answered", False, f"no answer within {deadline:g} s")
            except Exception as exc:  # whatever the node or Ray raised: this node failed
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
        return Check("answered", False, f"ran on node {report.node_id[:12]}, not on the node "
                     "it was pinned to")  # fmt: skip
    return Check("answered", True, f"in {seconds:.1f} s, on this node")


async def _cancelled(ray: Any, ref: Any) -> None:
    """Cancel a late check, then give it `CANCEL_GRACE` to end on its own budget, its reaper's
    sweep included. Leaving at once ends its worker with the doctor, and Ray then kills the
    worker's children, the reaper among them, before it has swept (here a tagged grandchild
    outlived the check). Ray's cancel (a KeyboardInterrupt in the task) does not reach a
    worker blocked in a wait, so it only stops a check that has not started."""
    ray.cancel(ref)
    with anyio.move_on_after(CANCEL_GRACE):
        try:
            await ref
        except Exception:  # TaskCancelledError, or whatever the interrupted check raised
            pass


def _failed_call(exc: Exception, expected: Expected) -> str:
    """The reason a node's check raised, its first line: the node's own exception when Ray
    wrapped one (e.g. leanrig not importable there)."""
    cause = getattr(exc, "cause", None) or exc
    return (
        f"the check failed on the node: {type(cause).__name__}: {first_line(cause)} (the node "
        f"needs leanrig {expected.leanrig} and Ray {expected.ray} installed; docs/scale-out.md)"
    )


def run_cluster_doctor(
    address: str, suite: Path | None, harness: HarnessName | None, harness_bin: Path | None
) -> ClusterReport:
    """`leanrig doctor --ray`: the starting machine's facts, then every node compared with
    them. Raises `LeanrigError` when the starting machine itself cannot run the job, and
    `repl_pool.NoCluster` when the cluster cannot be joined."""
    expected = expected_here(suite, harness, harness_bin)
    return anyio.run(check_cluster, address, expected, backend="asyncio")
