"""A leanrig suite as an Inspect task (`inspect eval leanrig/suite`, docs/inspect.md).

Any solver works that keeps its scratch directory in the store (`leanrig_scratch`)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import orjson
import structlog
from inspect_ai import Epochs, Task
from inspect_ai.agent import as_solver, react
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    accuracy,
    metric,
    scorer,
    stderr,
    value_to_float,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import mcp_server_stdio

from lsp_bridge import LeanrigError, find_lean

from ..servers import serve_argv
from ..tasks import Suite, library_dir, load_suite, writes_proof, writes_statement
from ..tasks import Task as LeanTask
from ..verdict import EquivalenceGrader, StatementGrader, Verifier
from .attempt_dir import SERVER_NAME, prompt_text
from .metrics import weighted_score
from .options import DEFAULT_TIME_LIMIT

SCRATCH_KEY: Final = "leanrig_scratch"  # the sample's service directory, in the state's store
_TO_FLOAT: Final = value_to_float()


class SuiteTaskError(LeanrigError):
    hint = "see docs/inspect.md: -T suite=DIR [-T condition=lad] [-T kind=proof] [-T tasks=ID,…]"


def _ids(tasks: str | Sequence[str] | None) -> list[str] | None:
    if tasks is None:
        return None
    return [t for t in (tasks.split(",") if isinstance(tasks, str) else tasks) if t]


def suite_samples(
    suite: Suite, condition: str, kind: str | None, tasks: Sequence[str] | None
) -> list[Sample]:
    """The suite's tasks as samples (those of ``kind``, those named in ``tasks``)."""
    unknown = sorted(set(tasks or ()) - set(suite.tasks))
    if unknown:
        raise SuiteTaskError(f"suite {suite.name} has no task {', '.join(unknown)}")
    chosen = [
        t
        for t in suite.tasks.values()
        if (kind is None or t.kind == kind) and (tasks is None or t.id in tasks)
    ]
    if not chosen:
        raise SuiteTaskError(f"suite {suite.name}: no task of kind {kind!r} selected")
    samples = []
    for t in chosen:
        metadata = {
            "task": t.id,
            "field": t.spec.field,
            "difficulty": t.spec.difficulty,
            "kind": t.kind,
            "condition": condition,
            "suite": str(suite.root),
        }
        prompt = prompt_text(suite, t, t.path, library=condition == "lad")
        samples.append(Sample(id=t.id, input=prompt, target="", metadata=metadata))
    return samples


@metric
def difficulty_score() -> Metric:
    """leanrig's score: 100 · Σ d·v / Σ d over the samples, v after the epochs' reducer."""

    def compute(scores: list[SampleScore]) -> float:
        d = [int((s.sample_metadata or {}).get("difficulty", 1)) for s in scores]
        return weighted_score(d, [_TO_FLOAT(s.score.value) for s in scores])

    return compute


@metric
def completion() -> Metric:
    """leanrig's completion: 100 · the mean verdict."""

    def compute(scores: list[SampleScore]) -> float:
        return 100 * sum(_TO_FLOAT(s.score.value) for s in scores) / max(1, len(scores))

    return compute


def leanrig_scratch(state: TaskState) -> Path:
    """The sample's service directory, made on first use and kept in the store for the scorer."""
    where = state.store.get(SCRATCH_KEY)
    if where is None:
        where = tempfile.mkdtemp(prefix=f"leanrig-inspect-{state.sample_id}-")
        state.store.set(SCRATCH_KEY, where)
    return Path(str(where))


def serve_command(suite: Path, task: str, condition: str, scratch: Path) -> list[str]:
    """`leanrig serve` for one task (MCP on stdio), its ledger and record in ``scratch``."""
    ledger = str(scratch / "ledger.jsonl")
    return serve_argv(suite, scratch, "--task", task, "--condition", condition, "--ledger", ledger)


@solver
def leanrig_agent(suite: str, condition: str = "baseline") -> Solver:
    """Inspect's `react` agent with a fresh `leanrig serve` per sample over MCP stdio."""
    root = Path(suite).absolute()

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        scratch = leanrig_scratch(state)
        command = serve_command(root, str(state.metadata["task"]), condition, scratch)
        server = mcp_server_stdio(
            name=SERVER_NAME,
            command=command[0],
            args=command[1:],
            cwd=scratch,
            env=dict(os.environ),
        )
        agent = react(
            name="leanrig",
            tools=[server],
            description="proves a Lean theorem or writes its statement with leanrig's tools",
        )
        return await as_solver(agent)(state, generate)

    return solve


def _final_edit(scratch: Path, task: LeanTask) -> tuple[str, str]:
    """The last (body, statement) the sample's service accepted, else the task's own."""
    best: tuple[int, str, str] | None = None
    for path in scratch.glob("submission-*.json"):
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if not isinstance(record, dict):
            continue
        body, ts = record.get("body"), record.get("ts_ns")
        statement = record.get("statement", task.statement)
        if (
            record.get("task") == task.id
            and isinstance(body, str)
            and isinstance(ts, int)
            and isinstance(statement, str)
            and (best is None or ts > best[0])
        ):
            best = (ts, body, statement)
    return (best[1], best[2]) if best else (task.body, task.statement)


def _ledger_totals(scratch: Path) -> tuple[int, float]:
    calls, lean_ms = 0, 0.0
    try:
        lines = (scratch / "ledger.jsonl").read_bytes().splitlines()
    except OSError:
        return 0, 0.0
    for line in lines:
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict) and entry.get("closed_by") != "server":
            calls += 1
            lean_ms += float(entry.get("lean_ms") or 0.0)
    return calls, lean_ms / 1000


@scorer(metrics=[accuracy(), difficulty_score(), completion(), stderr()])
def leanrig_verdict(suite: str) -> Scorer:
    """leanrig's verdict on the sample's final body and statement, as `leanrig run` judges it."""
    loaded = load_suite(Path(suite).absolute())
    install = find_lean(loaded.root)
    library = library_dir(loaded, install)
    verifier = Verifier(loaded, install, library=library)
    statements = StatementGrader(
        loaded,
        verifier,
        EquivalenceGrader(loaded, install, library=library, allowed_axioms=loaded.spec.axioms),
    )

    async def score(state: TaskState, target: Target) -> Score:
        task = loaded.task(str(state.metadata["task"]))
        where = state.store.get(SCRATCH_KEY)
        scratch = Path(str(where)) if where is not None else None
        try:
            body, statement = (
                _final_edit(scratch, task) if scratch is not None else (task.body, task.statement)
            )
            calls, lean_s = _ledger_totals(scratch) if scratch is not None else (0, 0.0)
            accepted, reasons, extra = await _judge(task, body, statement)
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        state.metadata.update(lean_s=round(lean_s, 3), tool_calls=calls)
        return Score(
            value=CORRECT if accepted else INCORRECT,
            answer=body if writes_proof(task.kind) else statement,
            explanation="; ".join(reasons) or "verified",
            metadata={"lean_s": round(lean_s, 3), "tool_calls": calls, **extra},
        )

    async def _judge(
        task: LeanTask, body: str, statement: str
    ) -> tuple[bool, tuple[str, ...], dict[str, Any]]:
        """The statement graded and/or the proof verified, per the task's kind; both must pass."""
        extra: dict[str, Any] = {}
        graded = None
        if writes_statement(task.kind):
            graded = await statements.grade(task, statement, loaded.spec.limits.equiv_seconds)
            extra.update(
                statement=statement,
                equivalence=graded.to_json()["equivalence"],
                statement_ms=graded.elapsed_ms,
            )
            if not writes_proof(task.kind):
                return graded.accepted, graded.reasons, extra
        proved = task.restated(statement)
        verdict = await verifier.verify(proved, proved.with_body(body))
        extra.update(axioms=list(verdict.axioms), verdict_ms=verdict.elapsed_ms)
        if graded is not None and not graded.accepted:
            return False, (*graded.reasons, *verdict.reasons), extra
        return verdict.accepted, verdict.reasons, extra

    return score


def suite_task(
    suite: str,
    condition: str = "baseline",
    kind: str | None = None,
    tasks: str | Sequence[str] | None = None,
    epochs: int = 1,
    time_limit: float = DEFAULT_TIME_LIMIT,
    solver: Solver | None = None,
) -> Task:
    """The suite as an Inspect task; raises `SuiteTaskError` or `SuiteError` for bad input."""
    if condition not in ("baseline", "lad"):
        raise SuiteTaskError(f"condition {condition!r}: baseline or lad")
    if not structlog.is_configured():
        # Keep the verdict's debug logs out of Inspect's display.
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    loaded = load_suite(Path(suite).absolute())
    if condition == "lad" and loaded.spec.lad is None:
        raise SuiteTaskError(f"suite {loaded.name} has no [lad] library for condition lad")
    samples = suite_samples(loaded, condition, kind, _ids(tasks))
    reducers: Any = (
        ["mean", *(f"pass_at_{k}" for k in range(1, epochs + 1))] if epochs > 1 else None
    )
    return Task(
        dataset=MemoryDataset(samples, name=loaded.name, location=str(loaded.root)),
        solver=solver or leanrig_agent(str(loaded.root), condition),
        scorer=leanrig_verdict(str(loaded.root)),
        epochs=Epochs(epochs, reducers),
        time_limit=int(time_limit),
        version=loaded.spec.version or 0,
        metadata={
            "suite": loaded.name,
            "suite_hash": loaded.content_hash(),
            "condition": condition,
        },
    )


__all__ = [
    "DEFAULT_TIME_LIMIT",
    "SCRATCH_KEY",
    "SuiteTaskError",
    "completion",
    "difficulty_score",
    "leanrig_agent",
    "leanrig_scratch",
    "leanrig_verdict",
    "serve_command",
    "suite_samples",
    "suite_task",
]
