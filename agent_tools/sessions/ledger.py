"""The timing ledger: one JSON line per tool call, appended atomically (O_APPEND, one write).

Fields (schema ``v`` = 1): ``ts`` (UTC ISO-8601), ``session``, ``task``, ``tool``, ``queue_ms``
(waiting for a pool slot), ``lean_ms`` (waiting on Lean), ``total_ms`` (the whole call, so
leanrig's own overhead is ``total - queue - lean``), ``outcome`` (``ok``, ``rejected`` or
``error:<Type>``), plus optional ``version``, ``complete``, ``body_sha`` and, on
``close_session``, ``session_wall_ms`` (invocation wall-clock from open to close).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

LEDGER_SCHEMA = 1


@dataclass(slots=True)
class StepTimer:
    """Accumulates where one tool call's time went."""

    started: float = field(default_factory=time.perf_counter)
    queue_ms: float = 0.0
    lean_ms: float = 0.0

    @contextmanager
    def lean(self) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.lean_ms += (time.perf_counter() - t) * 1000

    @contextmanager
    def queue(self) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.queue_ms += (time.perf_counter() - t) * 1000

    def total_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # Open sessions' entries, for get_timings; dropped when the session closes, so a long
        # run does not keep its whole ledger in memory (the file has it).
        self._by_session: dict[str, list[dict[str, Any]]] = {}

    def record(self, **fields: Any) -> dict[str, Any]:
        entry = {"v": LEDGER_SCHEMA, "ts": datetime.now(UTC).isoformat(timespec="milliseconds")}
        for key, value in fields.items():
            entry[key] = round(value, 3) if isinstance(value, float) else value
        os.write(self._fd, orjson.dumps(entry) + b"\n")
        session = entry.get("session")
        if isinstance(session, str):
            self._by_session.setdefault(session, []).append(entry)
        return entry

    def for_session(self, session_id: str) -> list[dict[str, Any]]:
        return list(self._by_session.get(session_id, ()))

    def forget(self, session_id: str) -> None:
        self._by_session.pop(session_id, None)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
