"""`RayPool`: the warm pool on a Ray cluster — one `LeanNode` actor per node, a router here.

Responsibilities (and nothing else): find the cluster's nodes that offer ``lean_slots`` and
start one actor per node (it owns a node-local `WarmPool`: same sandbox wrapper, same kill
tokens); route each request to a node — the holder's node while it lives (session
stickiness), else a node that already has the request's header key (header affinity, as Ray
Serve's model multiplexing does), spilling to a node with a free slot when every warm node is
saturated, else the least-loaded node; run the caller's operation here against a
`RemoteSlot` whose methods run on a leased slot of that node; when a node dies (an actor call
raises ``ActorUnavailableError`` after ~2.5 s or ``ActorDiedError``, or the GCS reports the
node dead) forget it, move its sessions, and retry the in-flight step once elsewhere (steps
are idempotent: the text is the state, so a session is re-established from its text by the
retried step itself); report per-node status.

To its callers it *is* a `WarmPool` (a subclass: ``ProofService`` takes it unchanged, and the
operations — closures over the caller's state, timers included — keep running in the caller's
process, so nothing but slot method arguments and results crosses the wire). None of the local
machinery of the base class runs.

Capacity comes from Ray resources: an actor reserves all of its node's ``lean_slots`` (one
unit = one Lean server process, which many sessions share step by step) and
``memory = slots × memory_mb``; its pool's ``max_processes`` is the slot count.

``ray`` is imported only when a `RayPool` is opened (the ``leanrig[ray]`` extra). It must not
know about sessions, tasks or the ledger (agent_tools records ``node_of(slot)``).
"""

from __future__ import annotations

import itertools
import statistics
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import anyio
import sniffio
import structlog
from anyio.abc import TaskGroup
from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    DocumentReport,
    InteractiveGoal,
    LeanrigError,
    LspPos,
    PlainGoal,
    PlainTermGoal,
    ServerError,
    first_line,
)

from .config import PoolConfig
from .environment import LeanEnvironment
from .errors import PoolClosed, PoolError
from .placement import record
from .pool import LATENCY_BUCKETS_MS, PoolStats, WarmPool
from .ray_actor import LeanNode, Reply, Shipped, land
from .slot import Elaboration, PoolKey, Slot, portable_deadline, slot_fate

log = structlog.get_logger("leanrig.cluster")
T = TypeVar("T")

RESOURCE = "lean_slots"
MARGIN = 5.0  # seconds a remote call may take beyond the Lean deadline it carries


class NodeLost(ServerError):
    """A Ray node (or its actor) stopped answering; the step may be retried on another node."""

    hint = "the Lean node was lost; retry the step (it runs on another node)"

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"Ray node {node_id[:12]} lost: {reason}")
        self.node_id = node_id


class NoNodes(PoolError):
    hint = "no Ray node offers lean_slots; start nodes with --resources '{\"lean_slots\": N}'"


class NoCluster(PoolError):
    """``ray.init`` could not join the cluster (none running, a wrong address)."""

    hint = (
        "start a cluster (`ray start --head --resources '{\"lean_slots\": 4}'`, "
        "docs/scale-out.md) or pass its address: --ray HOST:PORT"
    )

    def __init__(self, address: str | None, cause: BaseException) -> None:
        super().__init__(
            f"cannot join a Ray cluster at {address or 'a new local instance'!r}: "
            + first_line(cause)
        )


@dataclass(frozen=True, slots=True)
class RayOptions:
    address: str | None = "auto"  # ray.init address: "auto", host:port, ray://...; None: local
    namespace: str = "leanrig"
    memory_mb: int = 1024  # Ray `memory=` per Lean process (scheduling only); Mathlib: ~8192
    start_timeout: float = 120.0  # an actor has this long to open its pool
    watch_interval: float = 2.0  # node liveness (GCS) and per-node stats refresh
    lost_cooldown: float = 30.0  # a lost node that the GCS still calls alive is retried after
    lease_ttl: float | None = None  # default: 4 × the request deadline
    init_kwargs: dict[str, Any] = field(default_factory=dict)  # more ray.init arguments


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise LeanrigError(
            "Ray is not installed", hint="pip install 'leanrig[ray]' (or drop --ray)"
        ) from exc
    return ray


def node_of(slot: Slot) -> str | None:
    """The Ray node id a slot lives on (None: a local slot)."""
    return slot.node_id if isinstance(slot, RemoteSlot) else None


@dataclass(slots=True)
class _Node:
    node_id: str
    address: str
    slots: int
    handle: Any
    pid: int = 0
    alive: bool = True
    lost: anyio.Event = field(default_factory=anyio.Event)
    inflight: int = 0
    holders: set[str] = field(default_factory=set)
    keys: OrderedDict[PoolKey, None] = field(default_factory=OrderedDict)  # LRU: newest last
    stats: PoolStats | None = None
    steps: int = 0

    def load(self) -> tuple[float, float]:
        return (self.inflight / self.slots, len(self.holders) / self.slots)

    def touch(self, key: PoolKey) -> None:
        self.keys[key] = None
        self.keys.move_to_end(key)
        while len(self.keys) > self.slots:  # the node's pool evicts the LRU idle key too
            self.keys.popitem(last=False)


@dataclass(frozen=True, slots=True)
class NodeStatus:
    node_id: str
    address: str
    alive: bool
    slots: int
    sessions: int
    inflight: int
    steps: int
    headers: tuple[str, ...]
    pool: PoolStats | None

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "address": self.address,
            "alive": self.alive,
            "slots": self.slots,
            "sessions": self.sessions,
            "inflight": self.inflight,
            "steps": self.steps,
            "headers": list(self.headers),
            "queued": dict(self.pool.queued) if self.pool else {},
            "pool": self.pool.to_json() if self.pool else None,
        }


class RemoteSlot(Slot):
    """A slot leased on a node: every method runs on the node's real `Slot`."""

    def __init__(self, pool: RayPool, node: _Node, lease: str, key: PoolKey, text: str) -> None:
        # Not Slot.__init__: no process here. The attributes the pool's callers read are set.
        self.number = 0
        self.key = key
        self.node_id = node.node_id
        self.state = "busy"
        self.uses = 1
        self.started_at = self.last_used = time.monotonic()
        self.broken = None
        self.holder = None
        self._pool = pool
        self._node = node
        self._lease = lease
        self._text = text

    @property
    def pid(self) -> int | None:
        return None

    @property
    def alive(self) -> bool:
        return self._node.alive and self.broken is None

    def rss_bytes(self, max_age: float = 0.0) -> int:
        return 0

    def kill(self, reason: str) -> None:
        self.mark_broken(reason)

    def bind(self, holder: str | None) -> None:
        self.holder = holder

    async def _remote(self, method: str, deadline: float, *args: Any, **kwargs: Any) -> Any:
        ref = self._node.handle.call.remote(self._lease, method, args, kwargs)
        return await self._pool._call(self._node, ref, deadline)

    async def elaborate(self, text: str, *, timeout: float) -> DocumentReport:
        report: DocumentReport = await self._remote("elaborate", timeout, text, timeout=timeout)
        self._text = text
        return report

    async def send(self, text: str) -> None:
        await self._remote("send", self._pool.config.request_deadline, text)
        self._text = text

    async def wait(self, *, timeout: float) -> DocumentReport:
        report: DocumentReport = await self._remote("wait", timeout, timeout=timeout)
        return report

    def text(self) -> str:
        return self._text

    async def elaborate_and_ask(
        self,
        text: str,
        *,
        goal_at: LspPos | None,
        term_at: LspPos | None,
        timeout: float,
        symbols_from: int = 0,
    ) -> Elaboration:
        done: Elaboration = await self._remote(
            "elaborate_and_ask", timeout, text, goal_at=goal_at, term_at=term_at,
            timeout=timeout, symbols_from=symbols_from,
        )  # fmt: skip
        self._text = text
        return done

    async def plain_goal(self, pos: LspPos, *, timeout: float) -> PlainGoal:
        goal: PlainGoal = await self._remote("plain_goal", timeout, pos, timeout=timeout)
        return goal

    async def plain_term_goal(self, pos: LspPos, *, timeout: float) -> PlainTermGoal:
        goal: PlainTermGoal = await self._remote("plain_term_goal", timeout, pos, timeout=timeout)
        return goal

    async def document_symbols(self, *, timeout: float) -> list[DocumentSymbol]:
        symbols: list[DocumentSymbol] = await self._remote(
            "document_symbols", timeout, timeout=timeout
        )
        return symbols

    async def interactive_goals(self, pos: LspPos, *, timeout: float) -> list[InteractiveGoal]:
        goals: list[InteractiveGoal] = await self._remote(
            "interactive_goals", timeout, pos, timeout=timeout
        )
        return goals


class RayPool(WarmPool):
    """Create with ``async with RayPool.connect(environment, config, RayOptions(...)) as pool``
    inside an asyncio event loop (Ray's futures are asyncio futures)."""

    def __init__(
        self, environment: LeanEnvironment, config: PoolConfig, options: RayOptions
    ) -> None:
        super().__init__(environment, config)
        self.options = options
        self.run_id = uuid.uuid4().hex[:12]
        self._ray: Any = None
        self._nodes: dict[str, _Node] = {}
        self._lost: dict[str, float] = {}  # node id -> when it was lost
        self._sticky: dict[str, _Node] = {}
        self._leases = itertools.count(1)
        self._router_tg: TaskGroup | None = None
        self._prewarm_assigned = False

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        environment: LeanEnvironment,
        config: PoolConfig | None = None,
        options: RayOptions | None = None,
    ) -> AsyncIterator[RayPool]:
        if sniffio.current_async_library() != "asyncio":
            raise LeanrigError("RayPool needs the asyncio event loop", hint="anyio.run(..., "
                               "backend='asyncio')")  # fmt: skip
        ray = import_ray()
        options = options or RayOptions()
        pool = cls(environment, config or PoolConfig(), options)
        pool._ray = ray
        started_ray = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": options.address, "namespace": options.namespace,
                                      "log_to_driver": False, **options.init_kwargs}  # fmt: skip
            if options.address is None:
                kwargs.setdefault("include_dashboard", False)
            try:
                await anyio.to_thread.run_sync(lambda: ray.init(**kwargs))
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise NoCluster(options.address, exc) from exc
            started_ray = True
        try:
            async with anyio.create_task_group() as tg:
                pool._router_tg = tg
                await pool._discover()
                if not pool._live():
                    raise NoNodes("no Ray node with lean_slots answered")
                tg.start_soon(pool._watch_loop)
                try:
                    yield pool
                finally:
                    pool._closed = True
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(40):
                await pool._stop_actors()
            if started_ray:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(ray.shutdown)

    async def _stop_actors(self) -> None:
        async def stop(node: _Node) -> None:
            if node.alive:
                try:
                    with anyio.fail_after(35):
                        await node.handle.stop.remote()
                except Exception as exc:
                    log.warning("ray.stop_failed", node=node.node_id[:12], error=repr(exc))
            self._kill_actor(node)

        async with anyio.create_task_group() as tg:
            for node in list(self._nodes.values()):
                tg.start_soon(stop, node)

    def _kill_actor(self, node: _Node) -> None:
        try:
            self._ray.kill(node.handle, no_restart=True)
        except Exception:  # already dead, or Ray is gone
            pass

    def kill_all(self, reason: str = "shutdown") -> None:
        """Every node's Lean trees killed now (signal handlers, last-resort shutdown). The
        actors are killed too: each one's reaper then sweeps what is left on its node."""
        self._closed = True
        for node in self._live():
            try:
                node.handle.kill_all.remote(reason)
            except Exception:
                pass
            self._kill_actor(node)

    # -- nodes --------------------------------------------------------------------------------

    def _live(self) -> list[_Node]:
        return [n for n in self._nodes.values() if n.alive]

    async def _discover(self) -> None:
        """Start an actor on every alive node with lean_slots that has none."""
        ray = self._ray
        nodes: list[dict[str, Any]] = await anyio.to_thread.run_sync(ray.nodes)
        now = time.monotonic()
        wanted = []
        for info in sorted(nodes, key=lambda n: str(n["NodeID"])):
            node_id = str(info["NodeID"])
            slots = int(info.get("Resources", {}).get(RESOURCE, 0))
            if not info.get("Alive") or slots < 1 or node_id in self._nodes:
                continue
            if now - self._lost.get(node_id, -1e9) < self.options.lost_cooldown:
                continue
            wanted.append((node_id, str(info.get("NodeManagerAddress", "")), slots))
        async with anyio.create_task_group() as tg:
            for node_id, address, slots in wanted:
                tg.start_soon(self._start_node, node_id, address, slots)

    def _node_config(self, slots: int) -> tuple[PoolConfig, list[PoolKey]]:
        """The first node started keeps warm what the config asks for; the others start cold
        (the router sends a header's first request to a node that has it warm)."""
        if self._prewarm_assigned:
            return replace(self.config, max_processes=slots, min_processes=0, prewarm={}), []
        self._prewarm_assigned = True
        minimum = min(self.config.min_processes, slots)
        keys = [self.key_for(text) for text in self.config.prewarm]
        if minimum:
            keys.append(self.key_for(self.config.default_header))
        return replace(self.config, max_processes=slots, min_processes=minimum), keys

    async def _start_node(self, node_id: str, address: str, slots: int) -> None:
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        config, warm = self._node_config(slots)
        ttl = self.options.lease_ttl or 4 * self.config.request_deadline
        handle = (
            ray.remote(LeanNode)
            .options(
                name=f"leanrig-{self.run_id}-{node_id[:12]}",
                num_cpus=0,
                resources={RESOURCE: slots},
                memory=slots * self.options.memory_mb * 2**20,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                max_restarts=0,
                max_concurrency=1000,
            )
            .remote(self.environment, config, f"{self.run_id}-{node_id[:12]}", ttl)
        )
        node = _Node(node_id, address, slots, handle)
        try:
            with anyio.fail_after(self.options.start_timeout):
                info = await handle.start.remote()
        except Exception as exc:
            log.warning("ray.node_start_failed", node=node_id[:12], error=repr(exc))
            self._lost[node_id] = time.monotonic()
            self._kill_actor(node)
            return
        node.pid = int(info["pid"])
        for key in warm:
            node.touch(key)
        self._nodes[node_id] = node
        log.info("ray.node_ready", node=node_id[:12], address=address, slots=slots)

    def _lose(self, node: _Node, reason: str) -> None:
        if not node.alive:
            return
        node.alive = False
        node.lost.set()
        self._lost[node.node_id] = time.monotonic()
        self._nodes.pop(node.node_id, None)
        for holder in node.holders:
            self._sticky.pop(holder, None)
        log.warning("ray.node_lost", node=node.node_id[:12], reason=reason,
                    sessions=len(node.holders))  # fmt: skip
        self._kill_actor(node)  # its reaper kills whatever Lean it still has

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
        for node in self._live():
            if node.node_id in dead:
                self._lose(node, "the GCS reports the node dead")
        await self._discover()

        async def refresh(node: _Node) -> None:
            try:
                node.stats = await self._call(node, node.handle.stats.remote(), 0.0, raw=True)
            except NodeLost:
                pass

        async with anyio.create_task_group() as tg:
            for node in self._live():
                tg.start_soon(refresh, node)

    async def _call(self, node: _Node, ref: Any, deadline: float, *, raw: bool = False) -> Any:
        """Await an actor call: its value, the node's error re-raised as its own class, or
        `NodeLost` (the actor is unavailable or dead, missed its deadline, or the node was
        lost while we waited)."""
        ray = self._ray
        outcome: list[tuple[bool, Any]] = []  # (raised, value or exception)

        async def answer() -> None:
            try:
                outcome.append((False, await ref))
            except Exception as exc:  # Ray's errors: examined below, outside the task group
                outcome.append((True, exc))
            scope.cancel()

        async def lost() -> None:
            await node.lost.wait()
            scope.cancel()

        try:
            with anyio.fail_after(deadline + MARGIN):
                async with anyio.create_task_group() as tg:
                    scope = tg.cancel_scope
                    tg.start_soon(answer)
                    tg.start_soon(lost)
        except TimeoutError:
            self._lose(node, f"no answer within {deadline + MARGIN:.0f} s")
            raise NodeLost(node.node_id, "no answer within the deadline") from None
        if not outcome:
            raise NodeLost(node.node_id, "lost while the call was in flight")
        raised, result = outcome[0]
        if raised:
            if isinstance(result, ray.exceptions.RayActorError):  # Unavailable or Died
                self._lose(node, type(result).__name__)
                raise NodeLost(node.node_id, type(result).__name__) from result
            raise LeanrigError(f"the Lean node failed: {type(result).__name__}") from result
        if raw:
            return result
        reply: Reply = result
        status, value = reply
        if status == "error":
            assert isinstance(value, Shipped)
            raise land(value)
        return value

    # -- routing ------------------------------------------------------------------------------

    def _place(self, key: PoolKey, holder: str | None) -> _Node:
        """Holder's node (sticky) > a node warm for the key (spill to a free slot when they are
        all saturated) > the least-loaded node with a free slot > the least-loaded node."""
        if self._closed:
            raise PoolClosed("pool is closed")
        node = self._sticky.get(holder) if holder is not None else None
        if node is None or not node.alive:
            live = self._live()
            if not live:
                raise NoNodes("every Ray node with lean_slots is gone")
            free = [n for n in live if key not in n.keys and len(n.keys) < n.slots]
            warm = [n for n in live if key in n.keys]
            if warm:
                node = min(warm, key=_Node.load)
                if node.inflight >= node.slots and free:
                    node = min(free, key=_Node.load)
            else:
                node = min(free or live, key=_Node.load)
            if holder is not None:
                self._sticky[holder] = node
                node.holders.add(holder)
        node.touch(key)
        return node

    def forget(self, holder: str) -> None:
        """A session ended: its node no longer counts it."""
        node = self._sticky.pop(holder, None)
        if node is not None:
            node.holders.discard(holder)

    # -- the WarmPool interface ---------------------------------------------------------------

    @asynccontextmanager
    async def acquire(
        self, key: PoolKey, *, timeout: float | None = None, holder: str | None = None
    ) -> AsyncIterator[Slot]:
        """A slot for ``key`` leased on the chosen node, exclusively yours inside the block."""
        node = self._place(key, holder)
        wait = self.config.timeouts.acquire if timeout is None else timeout
        lease = f"{self.run_id}-{next(self._leases)}"
        header_text = self._header_texts.get(key) or key.header + "\n"
        started = time.perf_counter()
        node.inflight += 1
        try:
            ref = node.handle.acquire.remote(lease, header_text, holder, wait)
            try:
                text: str = await self._call(node, ref, wait)
            except BaseException:  # a lease granted after we gave up is given back at once
                if node.alive:
                    node.handle.release.remote(lease)
                raise
            self._record_latency((time.perf_counter() - started) * 1000)
            slot = RemoteSlot(self, node, lease, key, text)
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

    async def run(
        self,
        key: PoolKey,
        operation: Callable[[Slot], Awaitable[T]],
        *,
        idempotent: bool = True,
        holder: str | None = None,
        timeout: float | None = None,
    ) -> T:
        """As `WarmPool.run`, across nodes: a lost node (`NodeLost`, retryable) is forgotten and
        the step runs once more on another node, which rebuilds the session from its text."""
        attempts = 2 if idempotent else 1
        deadline = portable_deadline(operation)
        for attempt in range(1, attempts + 1):
            try:
                if deadline is not None:  # the whole operation on the node: one round trip
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
                if attempt == attempts or not slot_fate(exc).retry:
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
        """A portable operation (slot.portable_deadline) shipped to the chosen node, which
        acquires a slot, runs it and releases the slot: one actor call per attempt."""
        node = self._place(key, holder)
        wait = self.config.timeouts.acquire if timeout is None else timeout
        header_text = self._header_texts.get(key) or key.header + "\n"
        record(key.short(), node.node_id)
        node.inflight += 1
        node.steps += 1
        try:
            ref = node.handle.run.remote(header_text, holder, wait, operation)
            result: T = await self._call(node, ref, wait + deadline)
        finally:
            node.inflight -= 1
        return result

    async def wait_idle(self, count: int, key: PoolKey | None = None, *, timeout: float) -> None:
        """Wait until ``count`` processes (for ``key``, default: any) are idle across nodes."""
        with anyio.fail_after(timeout):
            while True:
                idle = 0
                for node in self._live():
                    stats: PoolStats | None = await self._call(
                        node, node.handle.stats.remote(), timeout, raw=True
                    )
                    node.stats = stats
                    for p in stats.processes if stats else ():
                        if p.state == "idle" and (key is None or p.key == key.short()):
                            idle += 1
                if idle >= count:
                    return
                await anyio.sleep(0.05)  # polling the nodes; the deadline bounds it

    def stats(self) -> PoolStats:
        """All nodes' pools (as of the last refresh) with the router's own acquire times."""
        node_stats = [n.stats for n in self._live() if n.stats is not None]
        queued: dict[str, int] = {}
        for s in node_stats:
            for key, count in s.queued.items():
                queued[key] = queued.get(key, 0) + count
        lat = self._latencies
        # Acquires: the router's own (leases) plus the nodes' (portable operations acquire
        # their slot on the node); the times are the router's when it has any, else the
        # slowest node's.
        count = len(lat) + sum(s.acquire_count for s in node_stats)
        histogram = [
            n + sum(s.acquire_histogram.get(f"<={b:g}ms", 0) for s in node_stats)
            for b, n in zip(LATENCY_BUCKETS_MS, self._histogram, strict=True)
        ]
        median = round(statistics.median(lat), 3) if lat else 0.0
        p95 = round(sorted(lat)[int(0.95 * (len(lat) - 1))], 3) if lat else 0.0
        if not lat and node_stats:
            median = max(s.acquire_ms_median for s in node_stats)
            p95 = max(s.acquire_ms_p95 for s in node_stats)
        return PoolStats(
            processes=tuple(p for s in node_stats for p in s.processes),
            queued=queued,
            started=sum(s.started for s in node_stats),
            restarts=sum(s.restarts for s in node_stats),
            killed=sum(s.killed for s in node_stats),
            start_failures=sum(s.start_failures for s in node_stats),
            acquire_count=count,
            acquire_ms_median=median,
            acquire_ms_p95=p95,
            acquire_histogram={
                f"<={b:g}ms": n for b, n in zip(LATENCY_BUCKETS_MS, histogram, strict=True)
            },
        )

    def nodes(self) -> list[NodeStatus]:
        return [
            NodeStatus(
                node_id=n.node_id,
                address=n.address,
                alive=n.alive,
                slots=n.slots,
                sessions=len(n.holders),
                inflight=n.inflight,
                steps=n.steps,
                headers=tuple(k.short() for k in n.keys),
                pool=n.stats,
            )
            for n in self._nodes.values()
        ]
