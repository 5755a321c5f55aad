"""The starting machine's side of `leanrig run --ray`: attempts placed by Ray, brought home.

Only this process writes the run directory, once per attempt, after the attempt's end."""

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

PLACEMENT_DEADLINE: Final = 6 * 3600.0  # seconds an attempt may wait for a lean_slots unit
SETUP_ALLOWANCE: Final = 600.0  # seconds beyond the time limit: node setup, kill, verdict
HOST_RECHECK: Final = 2.0  # seconds between checks for a lost host to replace
CANCEL_GRACE: Final = 20.0  # seconds a cancelled attempt may clean up before its actor is killed


def memory_mb(options: RunOptions, runner: Runner) -> int:
    limits = runner.suite.spec.limits
    return options.attempt_memory_mb or limits.attempt_memory_mb or limits.memory_mb


def lean_nodes(nodes: list[dict[str, Any]], memory_mb: int) -> list[str]:
    """The alive nodes with a ``lean_slots`` unit and the memory, as "address (node id)"."""
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
    """Unpack an attempt into ``root`` (``data`` tar filter) anew; returns the refused members."""
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
    actor: Any
    node: str


class ClusterAttempts:
    """The run's attempts on at most ``--parallel`` Ray actors; create with `joined`."""

    def __init__(self, ray: Any, runner: Runner, plan: Any, memory_mb: int, tg: TaskGroup) -> None:
        self._ray = ray
        self._runner = runner
        self._plan = plan  # an ObjectRef of the NodePlan
        self._memory_mb = memory_mb
        self._actor_class = ray.remote(AttemptOnNode)
        options = runner.options
        self._deadline = (
            options.time_limit + SETUP_ALLOWANCE + 2 * runner.suite.spec.limits.wall_seconds
        )
        self._tg = tg
        self._actors: set[Any] = set()  # started and not yet killed
        self._idle_in, self._idle = anyio.create_memory_object_stream[_Host](1000)
        self._limit = options.parallel

    async def _placed_host(self, actor: Any) -> None:
        """Adds a new host to the idle ones once it answers; kills it on failure."""
        try:
            with anyio.fail_after(PLACEMENT_DEADLINE):
                node = await actor.where.remote()
        except (TimeoutError, self._ray.exceptions.RayError) as exc:
            log.warning("run.host_not_started", error=repr(exc))
            self._kill(actor)
            return
        await self._idle_in.send(_Host(actor, node))

    async def _host(self) -> _Host:
        """An idle host, starting a new one while fewer than ``--parallel`` live."""
        with anyio.fail_after(PLACEMENT_DEADLINE):
            while True:
                try:
                    return self._idle.receive_nowait()
                except anyio.WouldBlock:
                    pass
                if len(self._actors) < self._limit:
                    actor = self._actor_class.options(
                        num_cpus=0,
                        resources={RESOURCE: 1},
                        memory=self._memory_mb * 2**20,
                        max_restarts=0,
                        max_concurrency=4,
                    ).remote(self._plan)
                    self._actors.add(actor)
                    self._tg.start_soon(self._placed_host, actor)
                with anyio.move_on_after(HOST_RECHECK):
                    return await self._idle.receive()

    def close(self) -> None:
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
                # A relative --harness-bin is relative to where `leanrig run` was typed.
                options = dataclasses.replace(options, harness_bin=runner.harness.program)
            plan = NodePlan(
                options=options,
                suite_root=suite.root.resolve(),
                suite_hash=runner.suite_hash,
                suite_files=suite_files(suite),
                lean_version=runner.install.version,
                harness=runner.harness,
                route=runner.route,
                words=tuple(runner.words),
                home=runner.run_dir,
            )
            ref = await anyio.to_thread.run_sync(ray.put, plan)
            runner.cluster = ClusterInfo(address=address, attempt_memory_mb=memory, nodes=nodes)
            log.info("run.cluster", address=address, nodes=nodes, memory_mb=memory)
            async with anyio.create_task_group() as tg:
                attempts = cls(ray, runner, ref, memory, tg)
                try:
                    yield attempts
                finally:
                    tg.cancel_scope.cancel()  # hosts still being placed
                    attempts.close()

    async def attempt(self, task: Task, k: int, progress: RunProgress) -> AttemptOutcome:
        return await with_infra_retry(self.placed, task, k, progress)

    async def placed(self, task: Task, k: int, retry: bool) -> AttemptOutcome:
        """One invocation of the attempt on an idle host; its files written home."""
        t0 = time.perf_counter()
        host = await self._host()
        actor, node = host.actor, host.node
        lost = True  # the host is reused only if the attempt came back from it
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
                return self._failed(
                    task,
                    k,
                    f"the attempt's node {node} did not answer within the attempt's deadline",
                )
            except self._ray.exceptions.RayActorError as exc:
                return self._failed(
                    task, k, f"the attempt's node {node} was lost ({type(exc).__name__})", node
                )
            except self._ray.exceptions.RayError as exc:  # the attempt's code failed there
                first = str(exc).strip().splitlines()[-1:] or [""]
                return self._failed(
                    task,
                    k,
                    f"the attempt failed on {node}: {type(exc).__name__}: {first[0][:300]}",
                    node,
                )
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
        """Cancels the node's attempt and waits for it briefly."""
        try:
            self._ray.cancel(ref)
            with anyio.move_on_after(CANCEL_GRACE):
                await ref
        except Exception:  # the actor's kill and reaper remain
            pass

    def _kill(self, actor: Any) -> None:
        self._actors.discard(actor)
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:  # already gone
            pass

    def _failed(self, task: Task, k: int, reason: str, node: str | None = None) -> AttemptOutcome:
        """An attempt that did not come back: an infrastructure failure, nothing brought home."""
        log.warning("run.attempt_not_back", task=task.id, attempt=k, why=reason)
        result = AttemptResult(
            task=task.id,
            field=task.spec.field,
            difficulty=task.spec.difficulty,
            attempt=k,
            accepted=False,
            reasons=[f"infrastructure: {reason}"],
            invocation_s=0.0,
            condition=self._runner.options.condition,
            model=self._runner.options.model,
            agent_tool=self._runner.options.agent_tool,
            node=node,
        )
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
            notes.append(
                "left on the node (not brought home): "
                + ", ".join([*shipped.left_out, *refused][:20])
            )
        if not shipped.isolated:
            notes.append(
                f"the agent ran without its sandbox on {shipped.node} (bwrap cannot "
                "sandbox there): it kept the network and could write its files"
            )
        result = outcome.result.model_copy(update={"node": shipped.node, "notes": notes})
        # Once placed, all but the agent's run and the verdict; the wait is `placement_s`.
        overhead = time.perf_counter() - t_placed - result.invocation_s - (result.verdict_s or 0)
        log.info(
            "run.cluster_attempt_timing",
            task=task.id,
            attempt=k,
            node=shipped.node,
            overhead_s=round(overhead, 3),
            node_overhead_s=round(outcome.overhead_s, 3),
            files=len(shipped.files),
        )
        return AttemptOutcome(
            result, outcome.infra, overhead, outcome.invocation, outcome.service_open_s
        )


__all__ = ["ClusterAttempts", "lean_nodes", "memory_mb", "unpack_attempt"]
