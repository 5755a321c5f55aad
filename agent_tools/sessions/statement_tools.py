"""The statement tools of `ProofService`: ``set_statement`` and ``check_statement``.

Must never read the task's reference: a session must not learn whether a statement matches it."""

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

from ..tasks import Suite, Task, writes_statement
from ..verdict import Verifier
from .body_text import as_lean_reads, refusal
from .elaborate import Elaborated, Elaborator
from .errors import ToolError, rejected_edit
from .output_builders import agent_diagnostics
from .question_documents import info_at, statement_document
from .question_lean import LeanQuestions
from .questions import answering, split_shown
from .session import ProofSession, body_sha, leaves_proof_open
from .tool_calls import Call
from .tool_outputs import Diagnostic, StatementCheckResult, StatementResult, StepState

StatementStatus = Literal["elaborated", "error", "not_checked"]


class StatementTools:
    """The statement tools of `ProofService` (which provides the attributes below)."""

    suite: Suite
    elaborator: Elaborator
    questions: LeanQuestions
    verifier: Verifier

    def _on_session(
        self,
        tool: str,
        session_id: str,
        client: str,
        *,
        lock: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[Call]:
        raise NotImplementedError  # ProofService's

    async def _record_submission(self, session: ProofSession) -> None:
        raise NotImplementedError  # ProofService's

    async def set_statement(
        self, session_id: str, statement: str, client: str = "local"
    ) -> StatementResult:
        async with self._on_session("set_statement", session_id, client) as call:
            session = call.open_session
            _statement_task(session)
            started = time.perf_counter()
            statement = as_lean_reads(statement)
            call.extra["statement_sha"] = body_sha(statement)
            reason = refusal(statement)
            if reason is not None:
                mend = "send the statement again, mended as this says"
                raise rejected_edit("statement", reason, mend, session.version)
            original = self.suite.task(session.task.id)
            view = original.statement_view()
            elaborated = await self.elaborator.elaborate(view, statement, [call.timer], session.id)
            if elaborated.rejected is not None:
                mend = (
                    "only the target's binders and type may change (no commands or declarations "
                    "in it)"
                )
                raise rejected_edit("statement", elaborated.rejected, mend, session.version)
            diagnostics, first_error = _statement_diagnostics(elaborated)
            session.task = original.restated(statement)
            session.statement = statement
            session.text = session.task.with_body(session.body)
            session.version += 1
            printed = None if first_error else await self._printed(session, call)
            status: StatementStatus
            if first_error:
                status, why = "error", first_error
            elif elaborated.report.status not in ("done", "superseded"):
                status, why = "not_checked", "Lean did not finish elaborating in time"
            else:
                status, why = "elaborated", None
            call.extra.update(version=session.version, status=status)
            await self._record_submission(session)
            return StatementResult(
                version=session.version,
                status=status,
                status_reason=why,
                diagnostics=diagnostics,
                statement=printed,
                elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
            )

    async def _open_statement(self, task: Task, session: ProofSession, call: Call) -> StepState:
        """A statement task's opening state, without the placeholder body's goals."""
        view = task.statement_view()
        elaborated = await self.elaborator.elaborate(view, view.body, [call.timer], session.id)
        diagnostics, first_error = _statement_diagnostics(elaborated)
        reason = first_error or (
            "write the statement of the claim with set_statement; check_statement checks it "
            "(the body stays the placeholder)"
        )
        return StepState(
            version=session.version,
            status="error" if first_error else "incomplete",
            status_reason=reason,
            diagnostics=diagnostics,
            goals=[],
            complete=False,
        )

    async def _printed(self, session: ProofSession, call: Call) -> str | None:
        """The session's statement as Lean prints it (``#check @target``), or None."""
        memo = await self.elaborator.memo(session.task)
        doc = statement_document(session.task, memo.view)
        with answering("the statement"):
            report, _ = await self.questions.reported(session.task, doc.text, [], call.timer)
        shown = info_at(report.diagnostics, doc.at.line)
        return split_shown(shown) if shown is not None else None

    async def check_statement(self, session_id: str, client: str = "local") -> StatementCheckResult:
        async with self._on_session("check_statement", session_id, client) as call:
            session = call.open_session
            _statement_task(session)
            original = self.suite.task(session.task.id)
            with call.timer.lean():
                verdict = await self.verifier.verify(
                    original.statement_view(), session.task.text, statement=True
                )
            printed = await self._printed(session, call) if verdict.accepted else None
            call.extra.update(valid=verdict.accepted, statement_sha=body_sha(session.statement))
            return StatementCheckResult(
                valid=verdict.accepted,
                reasons=list(verdict.reasons),
                statement=printed,
                elapsed_ms=round(verdict.elapsed_ms, 1),
            )


def _statement_task(session: ProofSession) -> None:
    """Raise ToolError if the session's task has a given statement."""
    if not writes_statement(session.task.kind):
        raise ToolError(
            "this task's statement is given: only its proof may change",
            code="rejected",
            hint="use set_proof and check_proof (list_tasks gives each task's kind)",
        )


def _statement_diagnostics(elaborated: Elaborated) -> tuple[list[Diagnostic], str | None]:
    """A statement edit's diagnostics for the agent, and its first error as one line (if any).

    The placeholder body's `sorry` is the task's, not the agent's to mend: left out."""
    kept = [d for d in elaborated.report.diagnostics if not leaves_proof_open(d)]
    diagnostics = agent_diagnostics(elaborated.index, kept)
    errors = [d for d in diagnostics if d.severity == "error"]
    first = f"line {errors[0].line}: {errors[0].message.splitlines()[0]}" if errors else None
    return diagnostics, first
