"""A run's rich progress on stderr, and the summary `leanrig run` prints as JSON (`RunSummary`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .results import AttemptResult


class RunProgress:
    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total = total
        self.running = 0
        self.done = 0
        self.accepted = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if enabled:
            self._progress = Progress(
                TextColumn("leanrig run"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[running]} running · {task.fields[accepted]} accepted"),
                TextColumn("elapsed"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )

    def __enter__(self) -> RunProgress:
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task("run", total=self.total, running=0, accepted=0)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _update(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, completed=self.done, running=self.running, accepted=self.accepted
            )

    def started(self) -> None:
        self.running += 1
        self._update()

    def finished(self, accepted: bool) -> None:
        self.running -= 1
        self.done += 1
        self.accepted += accepted
        self._update()

    def note(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(message)


@dataclass(slots=True)
class RunSummary:
    run_dir: Path
    results: list[AttemptResult] = field(default_factory=list)  # this invocation's lines
    skipped: int = 0  # attempts already finished (resume)
    infra_retries: int = 0
    elapsed_s: float = 0.0
    overhead_s: list[float] = field(default_factory=list)  # per attempt, beyond the agent
    kill_s: list[float] = field(default_factory=list)  # per timed-out attempt
    placement_s: list[float] = field(default_factory=list)  # per attempt on a cluster (--ray)

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self.results)

    @property
    def agent_never_ran(self) -> bool:
        """Whether every attempt's agent failed before calling any tool, without timing out."""
        return bool(self.results) and all(
            r.tool_calls == 0 and not r.timed_out and r.exit_code != 0 for r in self.results
        )


def summary_json(summary: RunSummary) -> dict[str, Any]:
    def median(xs: list[float]) -> float | None:
        return round(sorted(xs)[len(xs) // 2], 3) if xs else None

    return {
        "run_dir": str(summary.run_dir),
        "attempts": len(summary.results),
        "accepted": summary.accepted,
        "skipped": summary.skipped,
        "infra_retries": summary.infra_retries,
        "elapsed_s": round(summary.elapsed_s, 3),
        "overhead_s_median": median(summary.overhead_s),
        "kill_s_median": median(summary.kill_s),
        "placement_s_median": median(summary.placement_s),
        "nodes": sorted({r.node for r in summary.results if r.node is not None}),
    }
