"""The starting machine's side of `leanrig run --ray ADDRESS|auto`: each attempt placed on a
cluster node, its files and results brought home.

Placement is Ray's: an attempt is one `AttemptOnNode` actor (cluster_attempt.py) reserving
one ``lean_slots`` unit and the attempt's memory (``--attempt-memory``, else the suite's
``[limits] attempt_memory_mb``, else its ``memory_mb``); ``--parallel`` caps the attempts in
flight across the cluster (the runner's limiter), and Ray queues what the nodes cannot take
yet. Nothing here picks a node.

An attempt comes home as a value: its results line (named after its node), its directory
(ledger, model calls, transcript, final body, ``usage.json``) unpacked into
``RUN_DIR/attempts/...``, its ledger appended to the run's. Only this process writes the run
directory, once per attempt, after the attempt's end: nothing of an attempt whose node died
can reach ``results.jsonl``.

Faults: a node lost while it holds an attempt (its actor dies or stops answering) is an
infrastructure failure — the runner's `with_infra_retry` starts the attempt again from a fresh
invocation, which Ray places on a live node, and the retry's line names the failure.
Cancelled (Ctrl-C, SIGTERM), every attempt in flight is cancelled on its node (its agent and
Lean killed there), then its actor is killed; each actor's reaper kills whatever is left.
A node that cannot run attempts at all (another Lean, no harness, no suite) stops the run with
its reason: every attempt it took would fail the same way.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import tarfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import structlog
from anyio.abc import TaskGroup

from repl_pool import RESOURCE, RayOptions, Shipped, joined_cluster, land

from ..tasks import Task
from .attempt_records import append_run_ledger
from .cluster_attempt import AttemptOnNode, NodeOutcome, NodePlan, suite_files
from .options import RunError, RunOptions
from .progress import RunProgress
from .results import AttemptResult, ClusterInfo
from .runner import AttemptOutcome, Runner, with_infra_retry

log = structlog.get_logger("leanrig.run")

# How long an attempt may wait for a node to take it (Ray queues it while every lean_slots
# unit is held; the nodes' attempts end within their own deadlines).
PLACEMENT_DEADLINE: Final = 6 * 3600.0
# Beyond the time limit: the attempt's setup on its node (a first library build), its service's
# close, the agent's kill and the verdict's checks.
SETUP_ALLOWANCE: Final = 600.0
HOST_RECHECK: Final = 2.0  # waiting for an idle host: how often a lost one is made up for
CANCEL_GRACE: Final = 20.0  # a cancelled attempt's cleanup on its node, before its actor is killed


def memory_mb(options: RunOptions, runner: Runner) -> int:
    limits = runner.suite.spec.limits
    return options.attempt_memory_mb or limits.attempt_memory_mb or limits.memory_mb


def lean_nodes(nodes: list[dict[str, Any]], memory_mb: int) -> list[str]:
    """The alive nodes that can take an attempt (a ``lean_slots`` unit and its memory), each as
    "address (node id)"."""
    out = []
    for node in nodes:
        resources = node.get("Resources", {})
        if not node.get("Alive") or resources.get(RESOURCE, 0) < 1:
            continue
        if resources.get("memory", 0) < memory_mb * 2**20:
            continue
        out.append(f"{node.get('NodeManagerAddress', '?')} ({str(node.get('NodeID', ''))[:12]})")
    return out


def unpack_attempt(files: bytes, root: Path) -> list[str]:
    """An attempt's packed directory into ``root`` (replacing what was there): Python's
    ``data`` filter applies, a member it refuses (a link out of the directory, an absolute
    path) is left out and named."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    refused: list[str] = []

    def keep(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, dest)
        except tarfile.FilterError as exc:
            refused.append(f"{member.name} ({type(exc).__name__})")
            return None

    with tarfile.open(fileobj=io.BytesIO(files), mode="r:") as tar:
        tar.extractall(root, filter=keep)
    return refused


@dataclass(frozen=True, slots=True)
class _Host:
    """An `AttemptOnNode` actor, placed: it holds a unit, and takes one attempt at a time."""

    actor: Any
    node: str


class ClusterAttempts:
    """The run's attempts on a Ray cluster; create with `ClusterAttempts.joined`.

    Attempts run on *hosts*: `AttemptOnNode` actors, each holding one ``lean_slots`` unit and
    an attempt's memory, given attempt after attempt (each attempt's processes, files and
    reaper are its own). Hosts are started as attempts need them, at most ``--parallel``
    alive; one lost with its node is replaced (Ray places the replacement on a live node, or
    on one that joins). At the end every host is killed."""

    def __init__(self, ray: Any, runner: Runner, plan: Any, memory_mb: int, tg: TaskGroup) -> None:
        self._ray = ray
        self._runner = runner
        self._plan = plan  # an ObjectRef of the NodePlan: put once, read by every node
        self._memory_mb = memory_mb
        self._actor_class = ray.remote(AttemptOnNode)
        options = runner.options
        self._deadline = (
            options.time_limit + SETUP_ALLOWANCE + 2 * runner.suite.spec.limits.wall_seconds
        )
        self._tg = tg
        self._actors: set[Any] = set()  # every host started and not yet killed
        self._idle_in, self._idle = anyio.create_memory_object_stream[_Host](1000)
        self._limit = options.parallel

    async def _placed_host(self, actor: Any) -> None:
        """A new host among the idle ones once placed and answering (killed on failure)."""
        try:
            with anyio.fail_after(PLACEMENT_DEADLINE):
                node = await actor.where.remote()
        except (TimeoutError, self._ray.exceptions.RayError) as exc:
            log.warning("run.host_not_started", error=repr(exc))
            self._kill(actor)
            return
        await self._idle_in.send(_Host(actor, node))

    async def _host(self) -> _Host:
        """An idle host; a new one is started while fewer than ``--parallel`` live (those
        being placed count: one that fails to start is started again here)."""
        with anyio.fail_after(PLACEMENT_DEADLINE):
            while True:
                try:
                    return self._idle.receive_nowait()
                except anyio.WouldBlock:
                    pass
                if len(self._actors) < self._limit:
                    actor = self._actor_class.options(
                        num_cpus=0, resources={RESOURCE: 1}, memory=self._memory_mb * 2**20,
                        max_restarts=0, max_concurrency=4,
                    ).remote(self._plan)  # fmt: skip
                    self._actors.add(actor)
                    self._tg.start_soon(self._placed_host, actor)
                with anyio.move_on_after(HOST_RECHECK):
                    return await self._idle.receive()

    def close(self) -> None:
        """Every host killed (its attempt's reaper, if any, sweeps on the node)."""
        for actor in list(self._actors):
            self._kill(actor)
        self._idle_in.close()
        self._idle.close()

    @classmethod
    @asynccontextmanager
    async def joined(cls, runner: Runner) -> AsyncIterator[ClusterAttempts]:
        options = runner.options
        address = options.ray
        assert address is not None
        if options.service is not None:
            raise RunError("a service factory cannot be sent to cluster nodes")
        memory = memory_mb(options, runner)
        async with joined_cluster(RayOptions(address=address)) as ray:
            nodes = lean_nodes(await anyio.to_thread.run_sync(ray.nodes), memory)
            if not nodes:
                raise RunError(
                    f"no node of the cluster at {address} offers a {RESOURCE} unit with "
                    f"{memory} MB of memory",
                    hint="start nodes with `ray start ... --resources '{\"lean_slots\": N}'` "
                    "(docs/scale-out.md), or lower --attempt-memory",
                )
            suite = runner.suite
            if options.harness_bin is not None and runner.harness is not None:
                # (A relative --harness-bin is relative to where `leanrig run` was typed.)
                options = dataclasses.replace(options, harness_bin=runner.harness.program)
            plan = NodePlan(
                options=options, suite_root=suite.root.resolve(), suite_hash=runner.suite_hash,
                suite_files=suite_files(suite), lean_version=runner.install.version,
                harness=runner.harness, route=runner.route, words=tuple(runner.words),
                home=runner.run_dir,
            )  # fmt: skip
            ref = await anyio.to_thread.run_sync(ray.put, plan)
            runner.cluster = ClusterInfo(address=address, attempt_memory_mb=memory,
                                         nodes=nodes)  # fmt: skip
            log.info("run.cluster", address=address, nodes=nodes, memory_mb=memory)
            async with anyio.create_task_group() as tg:
                attempts = cls(ray, runner, ref, memory, tg)
                try:
                    yield attempts
                finally:
                    tg.cancel_scope.cancel()  # (hosts still being placed)
                    attempts.close()

    async def attempt(self, task: Task, k: int, progress: RunProgress) -> AttemptOutcome:
        return await with_infra_retry(self.placed, task, k, progress)

    async def placed(self, task: Task, k: int, retry: bool) -> AttemptOutcome:
        """One invocation of the attempt on an idle host (a node Ray picked); its files
        written home."""
        t0 = time.perf_counter()
        host = await self._host()
        actor, node = host.actor, host.node
        lost = True  # the host is given back only when the attempt came back from it
        try:
            try:
                t_placed = time.perf_counter()
                ref = actor.run.remote(task.id, k, retry, uuid.uuid4().hex)
                try:
                    with anyio.fail_after(self._deadline):
                        status, value = await ref
                except anyio.get_cancelled_exc_class():
                    with anyio.CancelScope(shield=True):
                        await self._cancel(ref)
                    raise
            except TimeoutError:
                return self._failed(task, k, f"the attempt's node {node} did not answer "
                                    "within the attempt's deadline")  # fmt: skip
            except self._ray.exceptions.RayActorError as exc:
                return self._failed(task, k, f"the attempt's node {node} was lost "
                                    f"({type(exc).__name__})", node)  # fmt: skip
            except self._ray.exceptions.RayError as exc:  # the attempt's code failed there
                first = str(exc).strip().splitlines()[-1:] or [""]
                return self._failed(task, k, f"the attempt failed on {node}: "
                                    f"{type(exc).__name__}: {first[0][:300]}", node)  # fmt: skip
            lost = False
            if status == "error":
                assert isinstance(value, Shipped)
                error = land(value)
                raise RunError(f"{node} cannot run attempts: {error.message}", hint=error.hint)
            assert isinstance(value, NodeOutcome)
            outcome = await anyio.to_thread.run_sync(self._home, task, k, retry, value, t_placed)
            return dataclasses.replace(outcome, placement_s=t_placed - t0)
        finally:
            if lost:
                self._kill(actor)
            else:
                self._idle_in.send_nowait(host)

    async def _cancel(self, ref: Any) -> None:
        """The node's attempt cancelled (its agent and Lean killed there), waited for briefly."""
        try:
            self._ray.cancel(ref)
            with anyio.move_on_after(CANCEL_GRACE):
                await ref
        except Exception:  # cancelled, or the node is gone: the actor's kill and reaper remain
            pass

    def _kill(self, actor: Any) -> None:
        self._actors.discard(actor)
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # already gone
            pass

    def _failed(self, task: Task, k: int, reason: str, node: str | None = None) -> AttemptOutcome:
        """An attempt that did not come back (its node lost, silent, or its code failed
        there): nothing of it comes home; an infrastructure failure."""
        log.warning("run.attempt_not_back", task=task.id, attempt=k, why=reason)
        result = AttemptResult(
            task=task.id, field=task.spec.field, difficulty=task.spec.difficulty, attempt=k,
            accepted=False, reasons=[f"infrastructure: {reason}"], invocation_s=0.0,
            condition=self._runner.options.condition, model=self._runner.options.model,
            agent_tool=self._runner.options.agent_tool, node=node,
        )  # fmt: skip
        return AttemptOutcome(result, [reason], 0.0, None)

    def _home(
        self, task: Task, k: int, retry: bool, shipped: NodeOutcome, t_placed: float
    ) -> AttemptOutcome:
        runner = self._runner
        root = runner.run_dir / "attempts" / task.id / (f"{k}-retry" if retry else str(k))
        refused = unpack_attempt(shipped.files, root)
        ledger = root / "ledger.jsonl"
        if ledger.is_file():
            append_run_ledger(runner.ledger_path, ledger.read_bytes())
        outcome = shipped.outcome
        notes = list(outcome.result.notes)
        if shipped.left_out or refused:
            notes.append("left on the node (not brought home): "
                         + ", ".join([*shipped.left_out, *refused][:20]))  # fmt: skip
        if not shipped.isolated:
            notes.append(
                f"the agent ran without its sandbox on {shipped.node} (bwrap cannot "
                "sandbox there): it kept the network and could write its files"
            )
        result = outcome.result.model_copy(update={"node": shipped.node, "notes": notes})
        # leanrig's own time for the attempt once placed, as seen from here: all but the
        # agent's run and the verdict (the node's setup and the trip home included; the wait
        # for a node is `placement_s`, a queue while the nodes are busy).
        overhead = time.perf_counter() - t_placed - result.invocation_s - (result.verdict_s or 0)
        log.info("run.cluster_attempt_timing", task=task.id, attempt=k, node=shipped.node,
                 overhead_s=round(overhead, 3), node_overhead_s=round(outcome.overhead_s, 3),
                 files=len(shipped.files))  # fmt: skip
        return AttemptOutcome(result, outcome.infra, overhead, outcome.invocation,
                              outcome.service_open_s)  # fmt: skip


__all__ = ["ClusterAttempts", "lean_nodes", "memory_mb", "unpack_attempt"]
