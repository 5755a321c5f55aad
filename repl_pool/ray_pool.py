"""`RayPool`: the warm pool on a Ray cluster — one `LeanNode` actor per node, a router here.

It must not know about sessions, tasks or the ledger; ``ray`` is imported only when opened."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

import anyio
import structlog

from lsp_bridge import DocumentReport, LeanrigError

from .config import PoolConfig, RayOptions
from .environment import LeanEnvironment
from .errors import NodeLost, NoNodes, PoolClosed
from .node_actors import NodeActors, joined_cluster
from .node_routing import NodeRouter, NodeStatus, RayNode
from .placement import record
from .pool_keys import PoolKeys
from .pool_protocol import check_file
from .pool_stats import AcquireTimes, PoolStats, merged_stats
from .remote_slot import RemoteSlot
from .slot import PoolKey, Slot, portable_deadline, slot_fate

log = structlog.get_logger("leanrig.cluster")
T = TypeVar("T")

STOP_ALL_SECONDS = 40.0  # closing: every actor's stop, at most


class RayPool:
    """The `Pool` over Ray nodes; open with ``RayPool.connect`` inside an asyncio event loop."""

    def __init__(
        self, environment: LeanEnvironment, config: PoolConfig, options: RayOptions, ray: Any
    ) -> None:
        """``ray``: the ``ray`` module, joined to the cluster (`node_actors.joined_cluster`)."""
        self.environment = environment
        self.config = config
        self.options = options
        self.run_id = uuid.uuid4().hex[:12]
        self._ray = ray
        self._keys = PoolKeys(environment)
        self._router = NodeRouter()
        self._actors = NodeActors(ray, options, self.run_id, self._lose)
        self._leases = itertools.count(1)
        self._acquire_times = AcquireTimes()
        self._closed = False
        self._prewarm_assigned = False

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        environment: LeanEnvironment,
        config: PoolConfig | None = None,
        options: RayOptions | None = None,
    ) -> AsyncIterator[RayPool]:
        options = options or RayOptions()
        async with joined_cluster(options) as ray:
            pool = cls(environment, config or PoolConfig(), options, ray)
            try:
                async with anyio.create_task_group() as tg:
                    await pool._discover()
                    if not pool._router.live():
                        raise NoNodes("no Ray node with lean_slots answered")
                    tg.start_soon(pool._watch_loop)
                    try:
                        yield pool
                    finally:
                        pool._closed = True
                        tg.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_ALL_SECONDS):
                    await pool._actors.stop(list(pool._router.nodes.values()))

    def kill_all(self, reason: str = "shutdown") -> None:
        """Kill every node's Lean trees and actors now (last-resort shutdown)."""
        self._closed = True
        for node in self._router.live():
            try:
                node.handle.kill_all.remote(reason)
            except Exception:
                pass
            self._actors.kill(node)

    def key_for(self, text: str, environment: LeanEnvironment | None = None) -> PoolKey:
        return self._keys.key_for(text, environment)

    async def _discover(self) -> None:
        """Start an actor on every alive node with lean_slots that has none."""
        infos: list[dict[str, Any]] = await anyio.to_thread.run_sync(self._ray.nodes)
        wanted = self._router.wanted(infos, self.options.lost_cooldown)
        async with anyio.create_task_group() as tg:
            for node_id, address, slots in wanted:
                tg.start_soon(self._start_node, node_id, address, slots)

    def _node_config(self, slots: int) -> tuple[PoolConfig, list[PoolKey]]:
        """Only the first node prewarms; the router sends a header to the node that has it warm."""
        if self._prewarm_assigned:
            return replace(self.config, max_processes=slots, min_processes=0, prewarm={}), []
        self._prewarm_assigned = True
        minimum = min(self.config.min_processes, slots)
        keys = [self.key_for(text) for text in self.config.prewarm]
        if minimum:
            keys.append(self.key_for(self.config.default_header))
        return replace(self.config, max_processes=slots, min_processes=minimum), keys

    async def _start_node(self, node_id: str, address: str, slots: int) -> None:
        config, warm = self._node_config(slots)
        ttl = self.options.lease_ttl or 4 * self.config.request_deadline
        node = await self._actors.start(node_id, address, slots, self.environment, config, ttl)
        if node is None:
            self._router.failed_to_start(node_id)
            return
        for key in warm:
            node.touch(key)
        self._router.add(node)
        log.info("ray.node_ready", node=node_id[:12], address=address, slots=slots)

    def _lose(self, node: RayNode, reason: str) -> None:
        if not self._router.lose(node):
            return
        log.warning(
            "ray.node_lost", node=node.node_id[:12], reason=reason, sessions=len(node.holders)
        )
        self._actors.kill(node)

    async def _watch_loop(self) -> None:
        while True:
            await anyio.sleep(self.options.watch_interval)
            try:
                await self._watch_once()
            except Exception:  # never let a monitoring bug take the router down
                log.exception("ray.watch_failed")

    async def _watch_once(self) -> None:
        infos: list[dict[str, Any]] = await anyio.to_thread.run_sync(self._ray.nodes)
        dead = {str(i["NodeID"]) for i in infos if not i.get("Alive")}
        for node in self._router.live():
            if node.node_id in dead:
                self._lose(node, "the GCS reports the node dead")
        await self._discover()

        async def refresh(node: RayNode) -> None:
            try:
                node.stats = await self._actors.call(
                    node, node.handle.stats.remote(), 0.0, raw=True
                )
            except NodeLost:
                pass

        async with anyio.create_task_group() as tg:
            for node in self._router.live():
                tg.start_soon(refresh, node)

    def _place(self, key: PoolKey, holder: str | None) -> RayNode:
        if self._closed:
            raise PoolClosed("pool is closed")
        return self._router.place(key, holder)

    def forget(self, holder: str) -> None:
        """A session ended: its node no longer counts it."""
        self._router.forget(holder)

    @asynccontextmanager
    async def acquire(
        self, key: PoolKey, *, timeout: float | None = None, holder: str | None = None
    ) -> AsyncIterator[Slot]:
        """A slot for ``key`` leased on the chosen node, exclusively yours inside the block."""
        node = self._place(key, holder)
        wait = self.config.timeouts.acquire if timeout is None else timeout
        lease = f"{self.run_id}-{next(self._leases)}"
        header_text = self._keys.header_text(key)
        started = time.perf_counter()
        node.inflight += 1
        try:
            ref = node.handle.acquire.remote(lease, header_text, holder, wait)
            try:
                text: str = await self._actors.call(node, ref, wait)
            except BaseException:  # a lease granted after we gave up is given back at once
                if node.alive:
                    node.handle.release.remote(lease)
                raise
            self._acquire_times.record((time.perf_counter() - started) * 1000)
            slot = RemoteSlot(
                self._actors, node, lease, key, text, request_deadline=self.config.request_deadline
            )
            slot.bind(holder)
            node.steps += 1
            try:
                yield slot
            finally:
                if node.alive:
                    try:
                        node.handle.release.remote(lease)  # no answer awaited
                    except Exception:
                        pass
        finally:
            node.inflight -= 1

    async def execute(
        self,
        key: PoolKey,
        operation: Callable[[Slot], Awaitable[T]],
        *,
        idempotent: bool = True,
        holder: str | None = None,
        timeout: float | None = None,
    ) -> T:
        """As `WarmPool.execute`, across nodes: after a lost node, once more elsewhere."""
        tries = 2 if idempotent else 1
        deadline = portable_deadline(operation)
        for try_number in range(1, tries + 1):
            try:
                if deadline is not None:
                    return await self._run_on_node(key, operation, deadline, holder, timeout)
                async with self.acquire(key, holder=holder, timeout=timeout) as slot:
                    assert isinstance(slot, RemoteSlot)
                    record(key.short(), slot.node_id)
                    try:
                        return await operation(slot)
                    except Exception as exc:
                        slot.judge(exc)
                        raise
            except LeanrigError as exc:
                if try_number == tries or not slot_fate(exc).retry:
                    raise
                log.info("ray.retry", error=type(exc).__name__, header=key.short())
        raise AssertionError("unreachable")

    async def _run_on_node(
        self,
        key: PoolKey,
        operation: Callable[[Slot], Awaitable[T]],
        deadline: float,
        holder: str | None,
        timeout: float | None,
    ) -> T:
        """Ship a portable operation to the chosen node: one actor call per try."""
        node = self._place(key, holder)
        wait = self.config.timeouts.acquire if timeout is None else timeout
        header_text = self._keys.header_text(key)
        record(key.short(), node.node_id)
        node.inflight += 1
        node.steps += 1
        try:
            ref = node.handle.execute.remote(header_text, holder, wait, operation)
            result: T = await self._actors.call(node, ref, wait + deadline)
        finally:
            node.inflight -= 1
        return result

    async def wait_idle(self, count: int, key: PoolKey | None = None, *, timeout: float) -> None:
        """Wait until ``count`` processes (for ``key``, default: any) are idle across nodes."""
        with anyio.fail_after(timeout):
            while True:
                idle = 0
                for node in self._router.live():
                    stats: PoolStats | None = await self._actors.call(
                        node, node.handle.stats.remote(), timeout, raw=True
                    )
                    node.stats = stats
                    for p in stats.processes if stats else ():
                        if p.state == "idle" and (key is None or p.key == key.short()):
                            idle += 1
                if idle >= count:
                    return
                await anyio.sleep(0.05)

    async def check(
        self, text: str, *, environment: LeanEnvironment | None = None
    ) -> DocumentReport:
        """Elaborate a whole file on a node's warm slot (retried once if the node is lost)."""
        return await check_file(self, text, environment=environment)

    def stats(self) -> PoolStats:
        """All nodes' pools (as of the last refresh) with the router's own acquire times."""
        return merged_stats(
            [n.stats for n in self._router.live() if n.stats is not None], self._acquire_times
        )

    def nodes(self) -> list[NodeStatus]:
        return self._router.statuses()
