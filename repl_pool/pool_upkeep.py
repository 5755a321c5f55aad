"""The local pool's pure upkeep decisions: retiring slots, warm counts, start back-off.

It must not start, stop or hold a process, nor wait."""

from __future__ import annotations

from collections.abc import Callable

from .config import PoolConfig
from .slot import PoolKey, Slot

MAX_START_BACKOFF = 60.0  # seconds between failed prewarm starts of one key, at most


def retire_reason(slot: Slot, config: PoolConfig, *, closed: bool) -> str | None:
    """Why ``slot``, released, must not be handed out again (None: it goes back idle)."""
    if closed:
        return "pool closed"
    if not slot.alive:
        return slot.broken or "process died"
    if slot.uses >= config.max_uses:
        return f"recycled after {slot.uses} uses"
    if slot.rss_bytes(max_age=1.0) > config.rss_cap_mb * 2**20:
        return f"over RSS cap ({slot.rss_bytes() / 2**20:.0f} MB > {config.rss_cap_mb} MB)"
    return None


def warm_targets(config: PoolConfig, key_for: Callable[[str], PoolKey]) -> dict[PoolKey, int]:
    """Warm process counts wanted per key: prewarm counts, min_processes for the default."""
    targets: dict[PoolKey, int] = {}
    for text, count in config.prewarm.items():
        key = key_for(text)
        targets[key] = max(targets.get(key, 0), count)
    default = key_for(config.default_header)
    targets[default] = max(targets.get(default, 0), config.min_processes)
    return targets


class StartBackoff:
    """Per-key exponential back-off after failed starts, up to `MAX_START_BACKOFF`."""

    __slots__ = ("failures", "retry_at")

    def __init__(self) -> None:
        self.failures: dict[PoolKey, int] = {}
        self.retry_at: dict[PoolKey, float] = {}

    def waiting(self, key: PoolKey, now: float) -> bool:
        return self.retry_at.get(key, 0.0) > now

    def failed(self, key: PoolKey, now: float) -> float:
        """Count a failed start; returns the seconds until the next try."""
        failures = self.failures[key] = self.failures.get(key, 0) + 1
        delay = min(MAX_START_BACKOFF, 2.0 ** (failures - 1))
        self.retry_at[key] = now + delay
        return delay

    def started(self, key: PoolKey) -> None:
        self.failures.pop(key, None)
