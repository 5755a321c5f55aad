"""Shared benchmark helpers: timing statistics, side-by-side tables, JSON results."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import psutil

from agent_tools.runs import percentile

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "lean_project" / "suites" / "demo"

RESULTS = Path(__file__).with_name("results")
# `make bench QUICK=1`: smoke-sized numbers go here (not committed), never over the reference
# tables in RESULTS.
QUICK_RESULTS = RESULTS / "quick"
# `make bench`: a full run's numbers (not committed); `make bench-reference` writes RESULTS.
LATEST_RESULTS = RESULTS / "latest"
_written_to = [LATEST_RESULTS]  # a benchmark run on its own writes here too


def write_results_to(path: Path) -> None:
    """Where ``write_result`` writes from now on (the runner's choice for a quick run)."""
    _written_to[0] = path


def summarize(samples_ms: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(samples_ms),
        "median_ms": round(statistics.median(samples_ms), 3) if samples_ms else float("nan"),
        "p95_ms": round(percentile(samples_ms, 95), 3),
        "min_ms": round(min(samples_ms), 3) if samples_ms else float("nan"),
        "max_ms": round(max(samples_ms), 3) if samples_ms else float("nan"),
    }


def print_table(
    title: str, rows: dict[str, dict[str, float]], reference: str | None = None
) -> None:
    """One line per variant: median and p95, and the ratio to ``reference``'s median."""
    print(f"\n## {title}")
    ref = rows.get(reference or "", {}).get("median_ms")
    print(f"{'variant':<44}{'n':>6}{'median ms':>12}{'p95 ms':>10}{'vs ref':>9}")
    for name, s in rows.items():
        ratio = f"{s['median_ms'] / ref:.2f}x" if ref else ""
        print(f"{name:<44}{s['n']:>6}{s['median_ms']:>12.2f}{s['p95_ms']:>10.2f}{ratio:>9}")


def write_result(name: str, payload: dict[str, Any]) -> Path:
    out = _written_to[0]
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": _cpus()},
        **payload,
    }
    path = out / f"{name}.json"
    path.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    return path


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


class CpuMeter:
    """CPU time (user + system) of a process and/or its descendants, from now until ``stop``:
    the descendants are the ones alive now (the steps' Lean processes, started beforehand)."""

    def __init__(
        self, process: psutil.Process, name: str, *, itself: bool = True, children: bool = True
    ) -> None:
        self.name = name
        self.procs = ([process] if itself else []) + (
            process.children(recursive=True) if children else []
        )
        self.start = self._total()
        self.per_step_ms = 0.0

    def _total(self) -> float:
        total = 0.0
        for p in self.procs:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
        return total

    def stop(self, steps: int) -> None:
        self.per_step_ms = round((self._total() - self.start) * 1000 / steps, 3)
