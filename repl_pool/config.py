"""Pool configuration with machine-derived defaults, and the Ray router's options."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from lsp_bridge import Timeouts


def default_max_processes() -> int:
    cores = os.cpu_count() or 1
    mem_gib = psutil.virtual_memory().total / 2**30
    # Budget 4 GiB per process: a Mathlib-importing server tree needs a few.
    return max(1, min(cores, int(mem_gib // 4)))


def _default_rss_cap_mb() -> int:
    mem_mib = psutil.virtual_memory().total / 2**20
    return int(min(16 * 1024, max(1024, mem_mib / 2 / default_max_processes())))


@dataclass(frozen=True, slots=True)
class PoolConfig:
    min_processes: int = 0  # kept warm for ``default_header`` at all times
    default_header: str = ""  # "" = plain Init; bootstrap (prelude-only) Lean wants "prelude"
    max_processes: int = field(default_factory=default_max_processes)
    prewarm: Mapping[str, int] = field(default_factory=dict)  # header text -> warm processes
    max_uses: int = 500  # recycle a process after this many acquisitions
    idle_ttl: float = 900.0  # seconds an idle process may live
    rss_cap_mb: int = field(default_factory=_default_rss_cap_mb)  # per process tree
    request_deadline: float = 60.0  # any single Lean wait inside a slot operation
    monitor_interval: float = 1.0  # health / idle / RSS checks
    timeouts: Timeouts = field(default_factory=Timeouts)
    # Talk to `lean --worker`s directly, bypassing the watchdog, where the command allows it.
    direct_workers: bool = True

    def __post_init__(self) -> None:
        if self.max_processes < 1:
            raise ValueError("max_processes must be at least 1")
        if not 0 <= self.min_processes <= self.max_processes:
            raise ValueError("min_processes must be between 0 and max_processes")


@dataclass(frozen=True, slots=True)
class RayOptions:
    address: str | None = "auto"  # ray.init address: "auto", host:port, ray://...; None: local
    namespace: str = "leanrig"
    memory_mb: int = 1024  # Ray `memory=` per Lean process (scheduling only); Mathlib: ~8192
    start_timeout: float = 120.0  # an actor has this long to open its pool
    watch_interval: float = 2.0  # node liveness (GCS) and per-node stats refresh
    lost_cooldown: float = 30.0  # seconds before a lost node the GCS calls alive is retried
    lease_ttl: float | None = None  # default: 4 × the request deadline
    init_kwargs: dict[str, Any] = field(default_factory=dict)  # more ray.init arguments
