"""Building the typed tool results in agent coordinates (1-based lines, code point columns)."""

from __future__ import annotations

from collections.abc import Sequence

from lsp_bridge import SETUP_ARTEFACT_NOTE, LeanDiagnostic, LineIndex, without_setup_artefacts
from repl_pool import Pool, PoolStats, RayPool

from .completeness import Completeness
from .elaborate import Elaborated
from .ledger import SessionTotals
from .session import ProofSession
from .tool_outputs import (
    BodyRange,
    Diagnostic,
    LedgerEntry,
    NodeReport,
    PoolStatus,
    Position,
    StepState,
    StepStatus,
    TimingsResult,
    TimingTotals,
    ToolFailure,
)


def agent_diagnostics(index: LineIndex, diagnostics: Sequence[LeanDiagnostic]) -> list[Diagnostic]:
    """Diagnostics in agent coordinates; silent ones dropped, setup artefacts unless alone."""
    shown = without_setup_artefacts([d for d in diagnostics if not d.is_silent])
    out = []
    for d in shown:
        start, end = index.from_lsp(d.range.start), index.from_lsp(d.range.end)
        out.append(
            Diagnostic(
                severity=d.severity.name.lower(),  # type: ignore[arg-type]
                line=start.line,
                column=start.column,
                end_line=end.line,
                end_column=end.column,
                message=f"{d.message}: {SETUP_ARTEFACT_NOTE}" if d.is_setup_artefact else d.message,
            )
        )
    return out


def body_range(session: ProofSession) -> BodyRange:
    index = LineIndex(session.text)
    start, end = index.pos_of(session.body_start), index.pos_of(session.body_end)
    return BodyRange(
        start=Position(line=start.line, column=start.column),
        end=Position(line=end.line, column=end.column),
    )


def step_state(
    version: int,
    index: LineIndex,
    diagnostics: Sequence[LeanDiagnostic],
    goals: list[str],
    completeness: Completeness,
) -> StepState:
    shown = agent_diagnostics(index, diagnostics)
    status, reason = step_outcome(shown, goals, completeness)
    return StepState(
        version=version,
        status=status,
        status_reason=reason,
        diagnostics=shown,
        goals=goals,
        complete=completeness.complete,
    )


def step_outcome(
    diagnostics: Sequence[Diagnostic], goals: Sequence[str], completeness: Completeness
) -> tuple[StepStatus, str | None]:
    """The step's status and its reason (the first error, or why it is incomplete)."""
    if completeness.complete:
        return "complete", None
    errors = [d for d in diagnostics if d.severity == "error"]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return "error", f"line {first.line}: {_one_line(first.message)}{more}"
    if completeness.reason:
        return "incomplete", _one_line(completeness.reason)
    if goals:
        return "incomplete", f"{len(goals)} goal(s) left: {_one_line(goals[0])}"
    warnings = [d for d in diagnostics if d.severity == "warning"]
    if warnings:
        return "incomplete", f"line {warnings[0].line}: {_one_line(warnings[0].message)}"
    return "incomplete", "Lean did not finish this version"


def candidate_outcome(
    shown: Sequence[Diagnostic],
    rejected: str | None,
    failure: ToolFailure | None,
    elaborated: Elaborated | None,
) -> tuple[StepStatus, str | None]:
    """A try_proofs candidate's outcome: not checked when refused or not elaborated."""
    if rejected is not None:
        return "not_checked", f"refused: {_one_line(rejected)}"
    if failure is not None or elaborated is None:
        return "not_checked", failure.message if failure is not None else None
    return step_outcome(shown, elaborated.goals, elaborated.completeness)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def timings(session: ProofSession, totals: SessionTotals) -> TimingsResult:
    """Totals over every call of the session; entries: its last ``ENTRIES_KEPT`` calls."""
    # Fields unknown to LedgerEntry stay in the file only.
    known = LedgerEntry.model_fields
    typed = [
        LedgerEntry.model_validate({k: v for k, v in e.items() if k in known})
        for e in totals.entries
    ]
    total = round(totals.total_ms, 2)
    queue = round(totals.queue_ms, 2)
    lean = round(totals.lean_ms, 2)
    return TimingsResult(
        session_id=session.id,
        session_wall_ms=round(session.wall_ms(), 1),
        totals=TimingTotals(
            calls=totals.calls,
            total_ms=total,
            queue_ms=queue,
            lean_ms=lean,
            overhead_ms=round(max(total - queue - lean, 0.0), 2),
        ),
        entries=typed,
    )


def pool_status(stats: PoolStats) -> PoolStatus:
    return PoolStatus.model_validate(stats.to_json())


def node_status(pool: Pool) -> list[NodeReport] | None:
    """Per Ray node (a `RayPool`); None for the local pool."""
    if not isinstance(pool, RayPool):
        return None
    return [NodeReport.model_validate(n.to_json()) for n in pool.nodes()]
