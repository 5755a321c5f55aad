"""Where a pool ran a caller's work: (header key, node) per step, for the caller's records.

A context variable holds the record, so child tasks' work lands in it; none open: no-op."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass(slots=True)
class Placements:
    steps: list[tuple[str, str | None]] = field(default_factory=list)  # (header, node id)

    def fields(self) -> dict[str, str]:
        """Ledger fields: the last step's ``header`` and ``node`` (when it ran on a node)."""
        if not self.steps:
            return {}
        header, node = self.steps[-1]
        return {"header": header} | ({"node": node} if node is not None else {})


_current: ContextVar[Placements | None] = ContextVar("leanrig_placements", default=None)


@contextmanager
def recording() -> Iterator[Placements]:
    placements = Placements()
    token = _current.set(placements)
    try:
        yield placements
    finally:
        _current.reset(token)


def record(header: str, node: str | None) -> None:
    placements = _current.get()
    if placements is not None:
        placements.steps.append((header, node))
