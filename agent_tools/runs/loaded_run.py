"""One run directory read for its reports (`load_run`), with notes on what is missing or short."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..tasks import TaskKind
from .ledger_report import ReportError
from .metrics import RunMetrics, compute_metrics
from .plots import PlotRun
from .prices import PriceSchedule
from .results import (
    ATTEMPT_STATE,
    RESULTS_FILE,
    RUN_FILE,
    AttemptResult,
    ResultsError,
    RunInfo,
    read_results,
    read_run_info,
)

RUN_HINT = "pass a run directory written by `leanrig run` (it holds run.json and results.jsonl)"


@dataclass(frozen=True, slots=True)
class LoadedRun:
    path: Path
    info: RunInfo
    metrics: RunMetrics
    notes: list[str]
    qualified: bool = False  # its directory's name added: runs shown together share a name

    @property
    def name(self) -> str:
        name = self.info.display_name() or self.path.name
        return f"{name} ({self.path.name})" if self.qualified and name != self.path.name else name

    # Each task kind's own metrics, when the run has a kind other than `proof`.
    by_kind: dict[TaskKind, RunMetrics] = dataclasses.field(default_factory=dict)

    def plot_run(self) -> PlotRun:
        return PlotRun(self.name, self.info.condition, self.metrics)


def metrics_by_kind(
    results: Sequence[AttemptResult], info: RunInfo, prices: PriceSchedule | None
) -> dict[TaskKind, RunMetrics]:
    """Each task kind's metrics; empty for a proofs-only run (its metrics are the run's)."""
    # The results' kind wins: an older run.json says `proof` of every task.
    said = {r.task: r.kind for r in results}
    kind_of = {t.id: said.get(t.id, t.kind) for t in info.tasks}
    kinds = set(kind_of.values()) | set(said.values())
    if kinds <= {"proof"}:
        return {}
    out: dict[TaskKind, RunMetrics] = {}
    for kind in sorted(kinds):
        inventory = [t for t in info.tasks if kind_of[t.id] == kind]
        mine = [r for r in results if r.kind == kind]
        if mine or inventory:
            out[kind] = compute_metrics(mine, inventory=inventory, prices=prices, model=info.model)
    return out


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / RUN_FILE).is_file()


MAX_ATTEMPT_NOTES = 20  # attempt notes shown in a report; the rest are counted


def attempt_notes(results: Sequence[AttemptResult]) -> list[str]:
    """Each results line's own notes, naming its task and attempt; past the cap, a count."""
    found = [f"{r.task} (attempt {r.attempt}): {note}" for r in results for note in r.notes]
    if len(found) <= MAX_ATTEMPT_NOTES:
        return found
    rest = len(found) - MAX_ATTEMPT_NOTES
    return [*found[:MAX_ATTEMPT_NOTES], f"… and {rest} more attempt notes in results.jsonl"]


def load_run(run_dir: Path, *, prices: PriceSchedule | None = None) -> LoadedRun:
    """A run's metadata, results and metrics. ``prices`` overrides the schedule in run.json."""
    if not run_dir.is_dir():
        raise ReportError(f"no such run directory: {run_dir}", hint=RUN_HINT)
    try:
        info = read_run_info(run_dir)
    except ResultsError as exc:
        ledger = run_dir / "ledger.jsonl"
        if ledger.is_file() and not (run_dir / "run.json").exists():
            hint = f"a `leanrig serve` directory has a ledger, not a run: pass {ledger}"
            raise ReportError(exc.message, hint=hint) from None
        raise ReportError(exc.message, hint=RUN_HINT) from None
    read = read_results(run_dir)
    if not read.results:
        why = "; ".join(read.notes()) or f"{RESULTS_FILE} is missing or empty"
        hint = RUN_HINT
        if info.condition == "human":
            hint = "; ".join(_unfinished_attempts(run_dir, [])) or (
                "a human run directory gets its results from `leanrig lsp` (the editor): "
                "attempt a task first"
            )
        raise ReportError(f"{run_dir} has no usable results ({why})", hint=hint)
    metrics = compute_metrics(
        read.results, inventory=info.tasks, prices=prices or info.prices, model=info.model
    )
    by_kind = metrics_by_kind(read.results, info, prices or info.prices)
    notes = read.notes()
    if metrics.missing_tasks:
        notes.append(
            f"{len(metrics.missing_tasks)} task(s) of the inventory have no results and count "
            f"as unverified: {', '.join(metrics.missing_tasks)}"
        )
    elif not info.tasks and metrics.tasks < info.task_count:
        notes.append(
            f"results cover {metrics.tasks} of {info.task_count} tasks (run.json lists no "
            "inventory, so the score is over the tasks with results)"
        )
    if metrics.unlisted_tasks:
        notes.append(
            f"results of {len(metrics.unlisted_tasks)} task(s) that run.json's inventory does "
            f"not list count for nothing: {', '.join(metrics.unlisted_tasks[:20])}"
        )
    if info.condition != "human" and info.attempts > 1:
        short = _short_of_attempts(read.results, info.attempts)
        if short:
            notes.append(
                f"{len(short)} task(s) have fewer than the run's {info.attempts} attempts "
                f"(interrupted? `leanrig run --resume` adds them): {', '.join(short)}; pass@k "
                "and the per-attempt rates are over the attempts present"
            )
    if info.condition == "human":
        notes.extend(_unfinished_attempts(run_dir, read.results))
    notes.extend(attempt_notes(read.results))
    # A human run directory has no end: saying so would read as an error.
    if info.ended_at is None and info.condition != "human":
        notes.append("run.json has no end time: the run was interrupted or is still running")
    if metrics.cost_tasks < metrics.tasks:
        notes.append(
            f"cost is reconstructable for {metrics.cost_tasks} of {metrics.tasks} task(s); "
            "USD per point is over those"
        )
    return LoadedRun(run_dir, info, metrics, notes, by_kind=by_kind)


def _unfinished_attempts(run_dir: Path, results: Sequence[AttemptResult]) -> list[str]:
    """A note naming the human attempts started in an editor that have no result line yet."""
    have = {r.task for r in results}
    started = sorted(p.stem for p in (run_dir / ATTEMPT_STATE).glob("*.json"))
    missing = [task for task in started if task not in have]
    if not missing:
        return []
    return [
        f"{len(missing)} attempt(s) started in an editor have no result yet and count as not "
        f"accepted: {', '.join(missing)} (the editor stopped leanrig before the verdict ended, "
        "or is still open); open the task in the editor again to resume and finish it"
    ]


def _short_of_attempts(results: Sequence[AttemptResult], attempts: int) -> list[str]:
    """The tasks with fewer than ``attempts`` distinct attempts, as ``task (k of n)``."""
    made: dict[str, set[int]] = {}
    for r in results:
        made.setdefault(r.task, set()).add(r.attempt)
    return [
        f"{task} ({len(done)} of {attempts})"
        for task, done in sorted(made.items())
        if len(done) < attempts
    ]
