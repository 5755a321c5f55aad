"""What a pool reports about itself; plain data that must not own or judge processes."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LATENCY_BUCKETS_MS = (0.1, 0.5, 1, 2, 5, 10, 50, 100, 500, 1000, 5000, float("inf"))
RECENT_SAMPLES = 10_000  # acquire times kept for the median and p95


@dataclass(frozen=True, slots=True)
class ProcessStat:
    pid: int | None
    slot: int
    key: str
    state: str
    uses: int
    rss_mb: float
    age_s: float


@dataclass(frozen=True, slots=True)
class PoolStats:
    processes: tuple[ProcessStat, ...]
    queued: dict[str, int]
    started: int
    restarts: int  # processes replaced after dying, being killed or recycled
    killed: int
    start_failures: int  # processes that could not be started
    acquire_count: int
    acquire_ms_median: float
    acquire_ms_p95: float
    acquire_histogram: dict[str, int]  # "<=N ms" -> count

    def to_json(self) -> dict[str, Any]:
        return {
            "processes": [vars_of(p) for p in self.processes],
            "queued": self.queued,
            "started": self.started,
            "restarts": self.restarts,
            "killed": self.killed,
            "start_failures": self.start_failures,
            "acquire": {
                "count": self.acquire_count,
                "median_ms": self.acquire_ms_median,
                "p95_ms": self.acquire_ms_p95,
                "histogram": self.acquire_histogram,
            },
        }


def vars_of(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def bucket_labels(counts: Sequence[int]) -> dict[str, int]:
    """Histogram counts per `LATENCY_BUCKETS_MS` bucket, keyed ``"<=N ms"`` as reported."""
    return {f"<={b:g}ms": n for b, n in zip(LATENCY_BUCKETS_MS, counts, strict=True)}


class AcquireTimes:
    """Milliseconds callers waited for a slot: the recent samples and a histogram of all."""

    __slots__ = ("histogram", "samples")

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.histogram = [0] * len(LATENCY_BUCKETS_MS)

    def record(self, ms: float) -> None:
        self.samples.append(ms)
        if len(self.samples) > RECENT_SAMPLES:
            del self.samples[: RECENT_SAMPLES // 2]
        self.histogram[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1

    def median(self) -> float:
        return round(statistics.median(self.samples), 3) if self.samples else 0.0

    def p95(self) -> float:
        lat = self.samples
        return round(sorted(lat)[int(0.95 * (len(lat) - 1))], 3) if lat else 0.0


def merged_stats(node_stats: Sequence[PoolStats], own: AcquireTimes) -> PoolStats:
    """The nodes' pools as one; acquire times are the router's if any, else the slowest node's."""
    queued: dict[str, int] = {}
    for s in node_stats:
        for key, count in s.queued.items():
            queued[key] = queued.get(key, 0) + count
    histogram = [
        n + sum(s.acquire_histogram.get(f"<={b:g}ms", 0) for s in node_stats)
        for b, n in zip(LATENCY_BUCKETS_MS, own.histogram, strict=True)
    ]
    median, p95 = own.median(), own.p95()
    if not own.samples and node_stats:
        median = max(s.acquire_ms_median for s in node_stats)
        p95 = max(s.acquire_ms_p95 for s in node_stats)
    return PoolStats(
        processes=tuple(p for s in node_stats for p in s.processes),
        queued=queued,
        started=sum(s.started for s in node_stats),
        restarts=sum(s.restarts for s in node_stats),
        killed=sum(s.killed for s in node_stats),
        start_failures=sum(s.start_failures for s in node_stats),
        acquire_count=len(own.samples) + sum(s.acquire_count for s in node_stats),
        acquire_ms_median=median,
        acquire_ms_p95=p95,
        acquire_histogram=bucket_labels(histogram),
    )
