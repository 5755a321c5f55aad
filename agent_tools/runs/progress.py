"""The run's progress on the terminal (rich, on stderr): attempts done / running / accepted,
elapsed time and ETA. Off when stderr is not a terminal or with ``--quiet``."""

from __future__ import annotations

from types import TracebackType

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
