"""`LeanNode`: the Ray actor that owns one node's Lean processes (a node-local `WarmPool`).

Slots are lent as leases with a TTL; tagged processes are reaped even after a SIGKILL."""

from __future__ import annotations

import asyncio
import importlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from lsp_bridge import LeanrigError

from .config import PoolConfig
from .environment import LeanEnvironment
from .pool import WarmPool
from .pool_stats import PoolStats
from .reaper import ProcessReaper
from .slot import Slot

log = structlog.get_logger("leanrig.ray_actor")

ACTOR_VAR = "LEANRIG_RAY_ACTOR"
# Slot methods a lease may run.
SLOT_METHODS = frozenset(
    {
        "elaborate",
        "elaborate_and_ask",
        "elaborate_with",
        "send",
        "wait",
        "text",
        "ask",
        "plain_goal",
        "plain_term_goal",
        "document_symbols",
        "interactive_goals",
    }
)


@dataclass(frozen=True, slots=True)
class Shipped:
    """A `LeanrigError` as plain data: pickle cannot replay leanrig errors' constructors."""

    module: str
    name: str
    message: str
    hint: str
    attributes: dict[str, Any] = field(default_factory=dict)


def ship(exc: LeanrigError) -> Shipped:
    plain = (str, int, float, bool, type(None))
    attributes = {
        k: v for k, v in vars(exc).items() if k not in ("message", "hint") and isinstance(v, plain)
    }
    cls = type(exc)
    return Shipped(cls.__module__, cls.__qualname__, exc.message, exc.hint, attributes)


def land(shipped: Shipped) -> LeanrigError:
    """The shipped error as an instance of its own class (LeanrigError if that is unknown)."""
    try:
        cls = getattr(importlib.import_module(shipped.module), shipped.name)
        if not (isinstance(cls, type) and issubclass(cls, LeanrigError)):
            raise TypeError(shipped.name)
        error: LeanrigError = cls.__new__(cls)
    except (ImportError, AttributeError, TypeError):
        error = LeanrigError.__new__(LeanrigError)
    Exception.__init__(error, shipped.message)
    error.message = shipped.message
    error.hint = shipped.hint
    for name, value in shipped.attributes.items():
        setattr(error, name, value)
    return error


# Every reply is ("ok", value) or ("error", Shipped).
Reply = tuple[str, Any]


@dataclass(slots=True)
class _Lease:
    slot: Slot
    done: anyio.Event


def node_environment(environment: LeanEnvironment, tag: str) -> LeanEnvironment:
    """``environment`` with the actor's tag in Lean's environment (inherited by every worker)."""
    env = dict(os.environ if environment.env is None else environment.env)
    env[ACTOR_VAR] = tag
    return replace(environment, env=env)


def sandbox_binds(wrapper: tuple[str, ...]) -> list[Path]:
    """The writable directories a bwrap wrapper binds (they must exist on this node too)."""
    return [Path(wrapper[i + 1]) for i, part in enumerate(wrapper[:-2]) if part == "--bind"]


class LeanNode:
    """One per Ray node; `node_actors.NodeActors.start` wraps it with ``ray.remote``."""

    def __init__(
        self, environment: LeanEnvironment, config: PoolConfig, tag: str, lease_ttl: float
    ) -> None:
        self.tag = tag
        self.environment = node_environment(environment, tag)
        self.config = config
        self.lease_ttl = lease_ttl
        self.pool: WarmPool | None = None
        self._tg: TaskGroup | None = None
        self._leases: dict[str, _Lease] = {}
        self._released: set[str] = set()  # released before granted (the router gave up)
        self._stop: asyncio.Event | None = None
        self._main: asyncio.Task[None] | None = None
        self._reaper = ProcessReaper(ACTOR_VAR, tag)

    async def start(self) -> dict[str, Any]:
        """Open the pool; prewarming goes on in the background."""
        import ray

        if self._main is None:
            for path in sandbox_binds(self.environment.wrapper):
                path.mkdir(parents=True, exist_ok=True)
            self._reaper.start()
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._main = asyncio.get_running_loop().create_task(self._run(ready))
            await ready
        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "pid": os.getpid()}

    async def _run(self, ready: asyncio.Future[None]) -> None:
        assert self._stop is not None
        try:
            async with (
                WarmPool.open(self.environment, self.config) as pool,
                anyio.create_task_group() as tg,
            ):
                self.pool, self._tg = pool, tg
                ready.set_result(None)
                await self._stop.wait()
                tg.cancel_scope.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            raise
        finally:
            self.pool = None
            self._reaper.close()

    async def stop(self) -> None:
        """Close the pool (every Lean tree killed) and let the reaper go."""
        if self._stop is not None and self._main is not None:
            self._stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._main), timeout=30)
            except BaseException:  # the pool logs its own errors; the reaper sweeps
                pass
        self._reaper.close()
        await asyncio.to_thread(self._reaper.wait, 10)

    def kill_all(self, reason: str) -> None:
        if self.pool is not None:
            self.pool.kill_all(reason)

    async def acquire(
        self, lease_id: str, header_text: str, holder: str | None, timeout: float
    ) -> Reply:
        """Lease a slot for the header's key; answers the text of the holder's document."""
        if self.pool is None or self._tg is None:
            return "error", ship(LeanrigError("the node's pool is not open"))
        key = self.pool.key_for(header_text)
        try:
            text: str = await self._tg.start(self._lease, lease_id, key, holder, timeout)
        except LeanrigError as exc:
            return "error", ship(exc)
        return "ok", text

    async def _lease(
        self,
        lease_id: str,
        key: Any,
        holder: str | None,
        timeout: float,
        *,
        task_status: TaskStatus[str],
    ) -> None:
        assert self.pool is not None
        async with self.pool.acquire(key, holder=holder, timeout=timeout) as slot:
            lease = _Lease(slot, anyio.Event())
            self._leases[lease_id] = lease
            if lease_id in self._released:
                self._released.discard(lease_id)
                lease.done.set()
            try:
                try:
                    text = slot.text()
                except LeanrigError:
                    text = ""
                task_status.started(text)
                with anyio.move_on_after(self.lease_ttl):
                    await lease.done.wait()
            finally:
                self._leases.pop(lease_id, None)

    async def call(
        self, lease_id: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Reply:
        lease = self._leases.get(lease_id)
        if lease is None or method not in SLOT_METHODS:
            return "error", ship(LeanrigError(f"no lease {lease_id} for {method}"))
        try:
            result = getattr(lease.slot, method)(*args, **kwargs)
            if asyncio.iscoroutine(result):
                result = await result
        except LeanrigError as exc:
            return "error", ship(exc)
        return "ok", result

    async def execute(
        self, header_text: str, holder: str | None, timeout: float, operation: Any
    ) -> Reply:
        """Run a portable operation on a slot of this node; not retried (the router retries)."""
        if self.pool is None:
            return "error", ship(LeanrigError("the node's pool is not open"))
        key = self.pool.key_for(header_text)
        try:
            result = await self.pool.execute(
                key, operation, idempotent=False, holder=holder, timeout=timeout
            )
        except LeanrigError as exc:
            return "error", ship(exc)
        return "ok", result

    def release(self, lease_id: str) -> None:
        lease = self._leases.get(lease_id)
        if lease is not None:
            lease.done.set()
        else:
            self._released.add(lease_id)

    def stats(self) -> PoolStats | None:
        return self.pool.stats() if self.pool is not None else None

    def lean_pids(self) -> list[int]:
        """Every live process carrying this actor's tag."""
        return self._reaper.tagged()
