"""`WarmPool`: hands out warm Lean slots keyed by environment + header, one FIFO for all keys.

Closing the pool leaves no Lean process behind. It must not know about tasks or sessions."""

from __future__ import annotations

import itertools
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TypeVar

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from lsp_bridge import TRACE_EVENT, DocumentReport, LeanClient, LeanrigError, single_errors

from .config import PoolConfig
from .environment import LeanEnvironment
from .errors import PoolBusy, PoolClosed
from .pool_keys import PoolKeys
from .pool_protocol import check_file
from .pool_stats import AcquireTimes, PoolStats, ProcessStat, bucket_labels
from .pool_upkeep import StartBackoff, retire_reason, warm_targets
from .slot import DOCUMENTS_PER_PROCESS, PoolKey, Slot, slot_fate

log = structlog.get_logger("leanrig.pool")
T = TypeVar("T")


@dataclass(slots=True)
class _Waiter:
    key: PoolKey
    prefer: str | None
    event: anyio.Event = field(default_factory=anyio.Event)
    slot: Slot | None = None
    start_reserved: bool = False  # the waiter starts its own process on reserved capacity


@dataclass(slots=True)
class _Reservation:
    consumed: bool = False


class WarmPool:
    """Create with ``async with WarmPool.open(environment, config) as pool``."""

    def __init__(
        self,
        environment: LeanEnvironment,
        config: PoolConfig,
        *,
        documents_per_process: int = DOCUMENTS_PER_PROCESS,
    ) -> None:
        self.environment = environment
        self.config = config
        self.documents_per_process = documents_per_process
        self._tg: TaskGroup | None = None
        self._slots: dict[int, Slot] = {}
        self._idle: dict[PoolKey, list[Slot]] = {}
        self._waiters: OrderedDict[int, _Waiter] = OrderedDict()
        self._numbers = itertools.count(1)
        self._waiter_ids = itertools.count(1)
        self._reserved = 0  # capacity promised to starters that have not registered yet
        self._closed = False
        self._started = 0
        self._restarts = 0
        self._killed = 0
        self._acquire_times = AcquireTimes()
        self._keys = PoolKeys(environment)
        self._changed = anyio.Event()  # set and replaced whenever slots change state
        self._start_failures = 0
        self._start_backoff = StartBackoff()

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        environment: LeanEnvironment,
        config: PoolConfig | None = None,
        *,
        documents_per_process: int = DOCUMENTS_PER_PROCESS,
    ) -> AsyncIterator[WarmPool]:
        """``documents_per_process``: Lean workers a process keeps for different holders."""
        pool = cls(environment, config or PoolConfig(), documents_per_process=documents_per_process)
        with single_errors():
            async with anyio.create_task_group() as tg:
                pool._tg = tg
                tg.start_soon(pool._monitor_loop)
                try:
                    pool._maintain()
                    yield pool
                finally:
                    pool._closed = True
                    for waiter in pool._waiters.values():
                        waiter.event.set()
                    for slot in list(pool._slots.values()):
                        slot.stop_requested.set()
                    tg.cancel_scope.cancel()

    def kill_all(self, reason: str = "shutdown") -> None:
        self._closed = True
        for slot in list(self._slots.values()):
            slot.kill(reason)

    def key_for(self, text: str, environment: LeanEnvironment | None = None) -> PoolKey:
        return self._keys.key_for(text, environment)

    @asynccontextmanager
    async def acquire(
        self, key: PoolKey, *, timeout: float | None = None, holder: str | None = None
    ) -> AsyncIterator[Slot]:
        """A warm slot for ``key``, yours inside the ``async with``; ``holder``'s own preferred."""
        slot = await self._acquire(
            key, self.config.timeouts.acquire if timeout is None else timeout, holder
        )
        slot.bind(holder)
        try:
            yield slot
        finally:
            self._release(slot)

    async def _acquire(self, key: PoolKey, timeout: float, holder: str | None) -> Slot:
        if self._closed:
            raise PoolClosed("pool is closed")
        if key.environment not in self._keys.environments:
            raise LeanrigError(f"unknown environment {key.environment}; use key_for()")
        started = time.perf_counter()
        slot = self._take_idle(key, holder)
        if slot is None and not self._waiters and self._capacity_left() > 0:
            self._reserved += 1
            slot = await self._start_reserved(key)
        elif slot is None:
            slot = await self._wait_for_slot(key, holder, started, timeout)
        slot.state = "busy"
        slot.uses += 1
        slot.last_used = time.monotonic()
        self._acquire_times.record((time.perf_counter() - started) * 1000)
        return slot

    async def _wait_for_slot(
        self, key: PoolKey, holder: str | None, started: float, timeout: float
    ) -> Slot:
        waiter = _Waiter(key, holder)
        wid = next(self._waiter_ids)
        self._waiters[wid] = waiter
        self._dispatch()
        try:
            with anyio.move_on_after(max(0.0, timeout - (time.perf_counter() - started))):
                await waiter.event.wait()
        except BaseException:  # cancelled: give back whatever we were handed
            self._waiters.pop(wid, None)
            self._undo_assignment(waiter)
            raise
        self._waiters.pop(wid, None)
        if self._closed:
            self._undo_assignment(waiter)
            raise PoolClosed("pool closed while waiting for a slot")
        if waiter.slot is not None:
            return waiter.slot
        if waiter.start_reserved:
            return await self._start_reserved(key)
        raise PoolBusy(key.short(), time.perf_counter() - started, len(self._waiters))

    def _undo_assignment(self, waiter: _Waiter) -> None:
        if waiter.slot is not None:
            slot, waiter.slot = waiter.slot, None
            self._release(slot)
        if waiter.start_reserved:
            waiter.start_reserved = False
            self._reserved -= 1
            self._dispatch()

    def _release(self, slot: Slot) -> None:
        if slot.state != "busy":
            return
        reason = retire_reason(slot, self.config, closed=self._closed)
        if reason is not None:
            self._stop(slot, reason)
        else:
            slot.state = "idle"
            self._idle.setdefault(slot.key, []).append(slot)
        self._dispatch()

    def _take_idle(self, key: PoolKey, holder: str | None) -> Slot | None:
        idle = self._idle.get(key)
        while idle:
            index = len(idle) - 1  # most recently used: warmest caches
            if holder is not None:
                for i, candidate in enumerate(idle):
                    if candidate.document_of(holder) is not None:
                        index = i
                        break
            slot = idle.pop(index)
            if slot.alive:
                return slot
            self._stop(slot, slot.broken or "process died while idle")
        return None

    def _capacity_left(self) -> int:
        return self.config.max_processes - len(self._slots) - self._reserved

    def _evict_lru_idle(self, exclude: PoolKey | None = None) -> bool:
        candidates = [s for key, slots in self._idle.items() if key != exclude for s in slots]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: s.last_used)
        self._idle[victim.key].remove(victim)
        self._stop(victim, "evicted (LRU) for another header")
        return True

    def _dispatch(self) -> None:
        """Serve waiters in arrival order with idle slots or free capacity."""
        self._changed.set()
        self._changed = anyio.Event()
        if self._closed:
            return
        while self._waiters:
            wid, waiter = next(iter(self._waiters.items()))
            slot = self._take_idle(waiter.key, waiter.prefer)
            if slot is not None:
                slot.state = "busy"
                waiter.slot = slot
            elif self._capacity_left() > 0:
                self._reserved += 1
                waiter.start_reserved = True
            elif self._evict_lru_idle(exclude=waiter.key):
                return  # capacity frees when the victim has exited; we run again then
            else:
                return
            del self._waiters[wid]
            waiter.event.set()

    async def _start_reserved(self, key: PoolKey) -> Slot:
        """Start a process for ``key`` on capacity the caller already reserved."""
        assert self._tg is not None
        reservation = _Reservation()
        try:
            slot: Slot = await self._tg.start(self._run_slot, key, reservation)
        finally:
            self._consume(reservation)
        return slot

    def _consume(self, reservation: _Reservation) -> None:
        if not reservation.consumed:
            reservation.consumed = True
            self._reserved -= 1
            self._dispatch()

    async def _run_slot(
        self, key: PoolKey, reservation: _Reservation, *, task_status: TaskStatus[Slot]
    ) -> None:
        env = self._keys.environments[key.environment]
        header_text = self._keys.header_text(key)
        command = env.server_command()
        if self.config.direct_workers:
            command = replace(command, direct_workers=True)
        slot = Slot(
            next(self._numbers),
            key,
            command,
            header_text,
            max_documents=self.documents_per_process,
        )
        self._slots[slot.number] = slot  # occupies the reserved capacity from now on
        reservation.consumed = True
        self._reserved -= 1
        started_ok = False
        t0 = time.perf_counter()
        try:
            async with LeanClient.start(slot.command, timeouts=self.config.timeouts) as client:
                slot.client = client
                await slot.elaborate(header_text, timeout=self.config.timeouts.spawn)
                self._started += 1
                slot.state = "busy"
                started_ok = True
                log.info(
                    "pool.start",
                    slot=slot.number,
                    pids=list(client.pids),
                    direct_workers=client.direct,
                    header=key.short(),
                    ms=round((time.perf_counter() - t0) * 1000, 1),
                )
                task_status.started(slot)
                await slot.stop_requested.wait()
        except Exception as exc:
            if not started_ok:
                raise
            log.warning("pool.slot_error", slot=slot.number, error=str(exc))
        finally:
            self._slots.pop(slot.number, None)
            idle = self._idle.get(slot.key, [])
            if slot in idle:
                idle.remove(slot)
            slot.state = "stopping"
            self._dispatch()

    def _stop(self, slot: Slot, reason: str) -> None:
        killed = slot.broken is not None
        slot.state = "stopping"
        if killed:
            self._killed += 1
            slot.kill(reason)
        else:
            slot.stop_requested.set()
        self._restarts += 0 if self._closed else 1
        log.info(
            "pool.kill" if killed else "pool.recycle", slot=slot.number, pid=slot.pid, reason=reason
        )

    async def _monitor_loop(self) -> None:
        while True:
            await anyio.sleep(self.config.monitor_interval)
            try:
                self._check_health()
                self._maintain()
            except Exception:  # never let a monitoring bug take the pool down
                log.exception("pool.monitor_failed")

    def _check_health(self) -> None:
        now = time.monotonic()
        cap = self.config.rss_cap_mb * 2**20
        for slot in list(self._slots.values()):
            if slot.state == "starting" or slot.state == "stopping":
                continue
            if slot.client is not None and not slot.client.alive:
                slot.mark_broken("process died")
            elif slot.rss_bytes() > cap:
                slot.mark_broken(f"over RSS cap ({slot.rss_bytes() / 2**20:.0f} MB)")
            if slot.broken is not None:
                if slot.state == "idle":
                    self._idle.get(slot.key, []).remove(slot)
                    self._stop(slot, slot.broken)
                elif slot.state == "busy":
                    slot.kill(slot.broken)  # the holder gets a typed error on its next wait
            elif (
                slot.state == "idle"
                and now - slot.last_used > self.config.idle_ttl
                and self._count(slot.key) > self._wanted(slot.key)
            ):
                self._idle[slot.key].remove(slot)
                self._stop(slot, "idle TTL")
        self._dispatch()

    def _count(self, key: PoolKey) -> int:
        return sum(1 for s in self._slots.values() if s.key == key and s.state != "stopping")

    def _wanted(self, key: PoolKey) -> int:
        return warm_targets(self.config, self.key_for).get(key, 0)

    def _maintain(self) -> None:
        """Start processes for min_processes and prewarm counts while capacity allows."""
        if self._closed or self._waiters or self._tg is None:
            return
        now = time.monotonic()
        for key, count in warm_targets(self.config, self.key_for).items():
            if self._start_backoff.waiting(key, now):
                continue
            missing = count - self._count(key)
            while missing > 0 and self._capacity_left() > 0:
                self._reserved += 1
                self._tg.start_soon(self._prewarm_one, key)
                missing -= 1

    async def _prewarm_one(self, key: PoolKey) -> None:
        try:
            slot = await self._start_reserved(key)
        except Exception as exc:
            self._start_failures += 1
            delay = self._start_backoff.failed(key, time.monotonic())
            log.warning("pool.prewarm_failed", header=key.short(), error=str(exc), retry_in_s=delay)
            return
        self._start_backoff.started(key)
        self._release(slot)

    async def wait_idle(self, count: int, key: PoolKey | None = None, *, timeout: float) -> None:
        """Wait until ``count`` processes (for ``key``, default: any) are warm and idle."""
        with anyio.fail_after(timeout):
            while sum(len(v) for k, v in self._idle.items() if key is None or k == key) < count:
                await self._changed.wait()

    async def execute(
        self,
        key: PoolKey,
        operation: Callable[[Slot], Awaitable[T]],
        *,
        idempotent: bool = True,
        holder: str | None = None,
        timeout: float | None = None,
    ) -> T:
        """Run ``operation`` on a slot, retried once if idempotent and ``slot_fate`` allows."""
        tries = 2 if idempotent else 1
        for try_number in range(1, tries + 1):
            try:
                async with self.acquire(key, holder=holder, timeout=timeout) as slot:
                    try:
                        result = await operation(slot)
                    except Exception as exc:
                        slot.judge(exc)  # before release: a discarded slot is killed there
                        raise
                sys.audit(TRACE_EVENT, "slot released")
                return result
            except LeanrigError as exc:
                if try_number == tries or not slot_fate(exc).retry:
                    raise
                log.info("pool.retry", error=type(exc).__name__, header=key.short())
        raise AssertionError("unreachable")

    async def check(
        self, text: str, *, environment: LeanEnvironment | None = None
    ) -> DocumentReport:
        """Elaborate a whole file on a warm slot (retried once on a process death)."""
        return await check_file(self, text, environment=environment)

    def stats(self) -> PoolStats:
        procs = tuple(
            ProcessStat(
                pid=s.pid,
                slot=s.number,
                key=s.key.short(),
                state=s.state,
                uses=s.uses,
                rss_mb=round(s.rss_bytes(max_age=1.0) / 2**20, 1),
                age_s=round(s.age(), 1),
            )
            for s in self._slots.values()
        )
        queued: dict[str, int] = {}
        for waiter in self._waiters.values():
            queued[waiter.key.short()] = queued.get(waiter.key.short(), 0) + 1
        times = self._acquire_times
        return PoolStats(
            processes=procs,
            queued=queued,
            started=self._started,
            restarts=self._restarts,
            killed=self._killed,
            start_failures=self._start_failures,
            acquire_count=len(times.samples),
            acquire_ms_median=times.median(),
            acquire_ms_p95=times.p95(),
            acquire_histogram=bucket_labels(times.histogram),
        )
