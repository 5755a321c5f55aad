"""The timing ledger: one JSON line per tool call, failed ones included (fields: `LedgerEntry`).

Lines are appended atomically (O_APPEND, one write); memory keeps only open sessions' totals."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

LEDGER_SCHEMA = 1
ENTRIES_KEPT = 200  # per open session, in memory


@dataclass(slots=True)
class SessionTotals:
    """Every call of one open session, summed, and its last ``ENTRIES_KEPT`` entries."""

    calls: int = 0
    total_ms: float = 0.0
    queue_ms: float = 0.0
    lean_ms: float = 0.0
    entries: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=ENTRIES_KEPT))

    def add(self, entry: dict[str, Any]) -> None:
        self.calls += 1
        self.total_ms += float(entry.get("total_ms") or 0.0)
        self.queue_ms += float(entry.get("queue_ms") or 0.0)
        self.lean_ms += float(entry.get("lean_ms") or 0.0)
        self.entries.append(entry)


Interval = tuple[float, float]


@dataclass(slots=True)
class StepTimer:
    """Where one tool call's wall-clock time went; parallel intervals count once, so the
    overhead ``total - queue - lean`` is never negative."""

    started: float = field(default_factory=time.perf_counter)
    lean_intervals: list[Interval] = field(default_factory=list)
    queue_intervals: list[Interval] = field(default_factory=list)

    @contextmanager
    def lean(self) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.lean_intervals.append((t, time.perf_counter()))

    def queued(self, since: float) -> None:
        """Record waiting for a process from ``since`` until now."""
        self.queue_intervals.append((since, time.perf_counter()))

    def absorb(self, other: StepTimer) -> None:
        self.lean_intervals += other.lean_intervals
        self.queue_intervals += other.queue_intervals

    @property
    def lean_ms(self) -> float:
        return _union_ms(self.lean_intervals)

    @property
    def queue_ms(self) -> float:
        return _union_ms(self.queue_intervals + self.lean_intervals) - self.lean_ms

    def total_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


def _union_ms(intervals: list[Interval]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total * 1000


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # Open sessions only: dropped on close (``forget``).
        self._by_session: dict[str, SessionTotals] = {}

    def record(self, **fields: Any) -> dict[str, Any]:
        entry = {"v": LEDGER_SCHEMA, "ts": datetime.now(UTC).isoformat(timespec="milliseconds")}
        for key, value in fields.items():
            entry[key] = round(value, 3) if isinstance(value, float) else value
        os.write(self._fd, orjson.dumps(entry) + b"\n")
        session = entry.get("session")
        if isinstance(session, str):
            totals = self._by_session.get(session)
            if totals is None:
                totals = self._by_session[session] = SessionTotals()
            totals.add(entry)
        return entry

    def for_session(self, session_id: str) -> list[dict[str, Any]]:
        """The session's last ``ENTRIES_KEPT`` ledger lines."""
        totals = self._by_session.get(session_id)
        return list(totals.entries) if totals is not None else []

    def totals(self, session_id: str) -> SessionTotals:
        return self._by_session.get(session_id) or SessionTotals()

    def forget(self, session_id: str) -> None:
        self._by_session.pop(session_id, None)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
