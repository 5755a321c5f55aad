"""The router's side of the `LeanNode` actors: join the cluster, start, call, stop, kill.

The only module touching Ray in the serving process; it must not decide placement."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import sniffio
import structlog

from lsp_bridge import LeanrigError

from .config import PoolConfig, RayOptions
from .environment import LeanEnvironment
from .errors import NoCluster, NodeLost
from .node_routing import RESOURCE, RayNode
from .ray_actor import LeanNode, Reply, Shipped, land

log = structlog.get_logger("leanrig.cluster")

MARGIN = 5.0  # seconds a remote call may take beyond the Lean deadline it carries
STOP_SECONDS = 35.0  # bound on an actor's stop (its pool closed, every Lean tree killed)


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise LeanrigError(
            "Ray is not installed", hint="pip install 'leanrig[ray]' (or drop --ray)"
        ) from exc
    return ray


REACH_DEADLINE = 10.0  # connecting to HOST:PORT first: Ray's join retries for ever


def reachable(address: str | None, timeout: float = REACH_DEADLINE) -> None:
    """Raise `NoCluster` unless ``HOST:PORT`` accepts a connection (else ``ray.init`` hangs)."""
    if address is None:
        return
    host, sep, port = address.rpartition(":")
    if address == "auto" or "://" in address or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise NoCluster(address, exc) from exc


@asynccontextmanager
async def joined_cluster(options: RayOptions) -> AsyncIterator[Any]:
    """``ray``, joined to ``options.address`` (left on exit if joined here); asyncio only."""
    if sniffio.current_async_library() != "asyncio":
        raise LeanrigError(
            "RayPool needs the asyncio event loop", hint="anyio.run(..., backend='asyncio')"
        )
    ray = import_ray()
    started_ray = False
    if not ray.is_initialized():
        await anyio.to_thread.run_sync(reachable, options.address)
        # Ray's own log lines are for debugging: shown at leanrig's debug level only.
        quiet = logging.getLogger("leanrig").getEffectiveLevel() > logging.DEBUG
        kwargs: dict[str, Any] = {
            "address": options.address,
            "namespace": options.namespace,
            "log_to_driver": False,
            "logging_level": logging.ERROR if quiet else logging.DEBUG,
            **options.init_kwargs,
        }
        if options.address is None:
            kwargs.setdefault("include_dashboard", False)
        try:
            await anyio.to_thread.run_sync(lambda: ray.init(**kwargs))
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise NoCluster(options.address, exc) from exc
        started_ray = True
    try:
        yield ray
    finally:
        if started_ray:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(ray.shutdown)


class NodeActors:
    """Starts, calls and ends the actors of one router (``run_id`` names them)."""

    def __init__(
        self, ray: Any, options: RayOptions, run_id: str, lose: Callable[[RayNode, str], None]
    ) -> None:
        """``lose(node, reason)``: the router forgets a node whose actor stopped answering."""
        self._ray = ray
        self._options = options
        self._run_id = run_id
        self._lose = lose

    async def start(
        self,
        node_id: str,
        address: str,
        slots: int,
        environment: LeanEnvironment,
        config: PoolConfig,
        lease_ttl: float,
    ) -> RayNode | None:
        """An actor on ``node_id`` with its pool open, or None (killed) if it did not start."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        handle = (
            self._ray.remote(LeanNode)
            .options(
                name=f"leanrig-{self._run_id}-{node_id[:12]}",
                num_cpus=0,
                resources={RESOURCE: slots},
                memory=slots * self._options.memory_mb * 2**20,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                max_restarts=0,
                max_concurrency=1000,
            )
            .remote(environment, config, f"{self._run_id}-{node_id[:12]}", lease_ttl)
        )
        node = RayNode(node_id, address, slots, handle)
        try:
            with anyio.fail_after(self._options.start_timeout):
                info = await handle.start.remote()
        except Exception as exc:
            log.warning("ray.node_start_failed", node=node_id[:12], error=repr(exc))
            self.kill(node)
            return None
        node.pid = int(info["pid"])
        return node

    async def call(self, node: RayNode, ref: Any, deadline: float, *, raw: bool = False) -> Any:
        """Await a call's value (``raw``: not a `Reply`); raises the node's error or `NodeLost`."""
        outcome: list[tuple[bool, Any]] = []  # (raised, value or exception)

        async def answer() -> None:
            try:
                outcome.append((False, await ref))
            except Exception as exc:
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
            if isinstance(result, self._ray.exceptions.RayActorError):
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

    def kill(self, node: RayNode) -> None:
        """Kill the actor now; its reaper kills whatever Lean it still has."""
        try:
            self._ray.kill(node.handle, no_restart=True)
        except Exception:  # already dead, or Ray is gone
            pass

    async def stop(self, nodes: Iterable[RayNode]) -> None:
        """Ask each actor to close its pool (at most `STOP_SECONDS`), then kill it."""

        async def stop(node: RayNode) -> None:
            if node.alive:
                try:
                    with anyio.fail_after(STOP_SECONDS):
                        await node.handle.stop.remote()
                except Exception as exc:
                    # The reaper's sweep can end the worker before the reply: that is a stop.
                    died = type(exc).__name__ in ("ActorDiedError", "RayActorError")
                    (log.debug if died else log.warning)(
                        "ray.stop_failed", node=node.node_id[:12], error=repr(exc)
                    )
            self.kill(node)

        async with anyio.create_task_group() as tg:
            for node in nodes:
                tg.start_soon(stop, node)
