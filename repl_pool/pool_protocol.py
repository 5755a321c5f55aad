"""`Pool`: what a pool of warm Lean slots offers callers, whether `WarmPool` or `RayPool`.

It must not hold state or import a backend (ray, Lean's LSP types)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from lsp_bridge import DocumentReport

    from .config import PoolConfig
    from .environment import LeanEnvironment
    from .pool_stats import PoolStats
    from .slot import PoolKey, Slot

T = TypeVar("T")


class Pool(Protocol):
    """Warm Lean slots keyed by environment + header, lent one operation at a time."""

    @property
    def config(self) -> PoolConfig:
        """Limits and deadlines (``max_processes`` bounds the caller's parallel work)."""
        ...

    def key_for(self, text: str, environment: LeanEnvironment | None = None) -> PoolKey:
        """The key of a file's text: its environment (default: the pool's) and its header."""
        ...

    async def execute(
        self,
        key: PoolKey,
        operation: Callable[[Slot], Awaitable[T]],
        *,
        idempotent: bool = True,
        holder: str | None = None,
        timeout: float | None = None,
    ) -> T:
        """Run ``operation`` on a slot for ``key``, preferring ``holder``'s last one.

        Retried once if idempotent and ``slot_fate`` allows; ``timeout`` bounds the wait."""
        ...

    def stats(self) -> PoolStats:
        """Processes, queues and acquire times (Ray: as of each node's last report)."""
        ...

    def kill_all(self, reason: str = "shutdown") -> None:
        """Kill every Lean process tree now (signal handlers, last-resort shutdown)."""
        ...


async def check_file(
    pool: Pool, text: str, *, environment: LeanEnvironment | None = None
) -> DocumentReport:
    """Elaborate a whole file on a warm slot of ``pool`` (retried once on a process death)."""
    key = pool.key_for(text, environment)

    async def elaborate(slot: Slot) -> DocumentReport:
        return await slot.elaborate(text, timeout=pool.config.request_deadline)

    return await pool.execute(key, elaborate)
