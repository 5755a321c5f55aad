"""Elaboration on warm pool slots: a task with a given body → Lean's report, the scope verdict
(does the edit stay inside the proof body?) and the goals to show; goals at a position.

Times every wait into the caller's `StepTimer`s (queue: waiting for a slot; Lean: waiting on
Lean). Raises lower-level errors unchanged (the service translates them). Holds no session.

Lean sees a task's session document (prefix.py: the whole file, or the compiled prefix
imported); everything leaving this module is in task-file text and positions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from lsp_bridge import DocumentReport, LineIndex, Pos
from repl_pool import LeanEnvironment, Slot, WarmPool

from ..tasks import Task, check_scope, code_end, flatten_symbols, suffix_structure
from .catalogue import GoalsResult, Hypothesis, StructuredGoal
from .concurrency import both, done
from .ledger import StepTimer
from .prefix import PrefixModules, TaskView
from .session import is_complete


@dataclass(frozen=True, slots=True)
class Elaborated:
    text: str
    report: DocumentReport
    goals: list[str]
    rejected: str | None
    complete: bool


class Elaborator:
    def __init__(
        self,
        pool: WarmPool,
        environment: LeanEnvironment,
        step_timeout: float,
        prefixes: PrefixModules | None = None,
    ) -> None:
        """``prefixes``: prefix modules (None: every session document is the whole file)."""
        self.pool = pool
        self.environment = environment
        self.step_timeout = step_timeout
        self.prefixes = prefixes
        self._views: dict[str, TaskView] = {}
        self._suffix: dict[str, list[str]] = {}  # task id -> Lean's parse after the body

    async def view(self, task: Task) -> TaskView:
        """How the task's session document maps to the task file (decided once per task)."""
        view = self._views.get(task.id)
        if view is None:
            if self.prefixes is None:
                view = TaskView.whole_file(self.environment, "prefix modules are off")
            else:
                view = await self.prefixes.view(task)
            self._views[task.id] = view
        return view

    async def elaborate(
        self, task: Task, body: str, timers: Sequence[StepTimer], holder: str | None
    ) -> Elaborated:
        """Elaborate the task with ``body`` on a warm slot: report, scope verdict, goals."""
        view = self._views.get(task.id) or await self.view(task)
        text = task.with_body(body)
        lean_text = view.to_lean(text)
        key = self.pool.key_for(lean_text, view.environment)
        body_start, body_end = task.span.start, task.span.start + len(body)
        entered = time.perf_counter()
        timeout = self.step_timeout

        async def operation(slot: Slot) -> Elaborated:
            for timer in timers:
                timer.queued(entered)
            index = LineIndex(text)
            lean_index = LineIndex(lean_text) if view.prefixed else index
            started = time.perf_counter()
            try:
                report = view.report_from_lean(await slot.elaborate(lean_text, timeout=timeout))
                complete = is_complete(report, index, task.span.decl_start, body_end)
                # Goals only for an incomplete proof, fetched beside the symbols. (Sending all
                # queries before the barrier measured no faster: 6.30 vs 6.41 ms, and wastes
                # Lean work on complete proofs.)
                symbols, goals = await both(
                    slot.document_symbols(timeout=timeout),
                    self._goals_after(slot, view, text, index, body_start, body_end)
                    if not complete
                    else done(list[str]()),
                )
            finally:
                interval = (started, time.perf_counter())
                for timer in timers:
                    timer.lean_intervals.append(interval)
            flat = view.symbols_from_lean(flatten_symbols(symbols, lean_index))
            if task.id not in self._suffix and body == task.body:
                self._suffix[task.id] = suffix_structure(flat, body_end, len(text))
            rejected = check_scope(
                text=text,
                body_start=body_start,
                body_end=body_end,
                decl_start=task.span.decl_start,
                symbols=flat,
                expected_suffix=self._suffix.get(task.id, []),
                diagnostics=report.diagnostics,
            )
            ok = rejected is None
            return Elaborated(text, report, goals if ok else [], rejected, complete and ok)

        return await self.pool.run(key, operation, holder=holder)

    async def _goals_after(
        self, slot: Slot, view: TaskView, text: str, index: LineIndex, start: int, end: int
    ) -> list[str]:
        """Tactic goals at the end of the body, else the expected type at its start."""
        last = code_end(text, start, end)
        first = start
        while first < end and text[first].isspace():
            first += 1
        at_last = view.lsp_to_lean(index.lsp_of_offset(last))
        at_first = view.lsp_to_lean(index.lsp_of_offset(first))
        assert at_last is not None  # the body is after the cut
        assert at_first is not None
        goal, term = await both(
            slot.plain_goal(at_last, timeout=self.step_timeout),
            slot.plain_term_goal(at_first, timeout=self.step_timeout),
        )
        if goal.status == "goals":
            return list(goal.goals)
        return [term.goal] if term.status == "goal" else []

    async def goals_at(
        self, task: Task, text: str, at: Pos, timer: StepTimer, holder: str | None
    ) -> GoalsResult:
        """Plain, term and structured goals at ``at`` (1-based line, code point column). With
        the prefix compiled, a position before the target command has no goals to show (that
        part of the file is not in the session's document)."""
        view = self._views.get(task.id) or await self.view(task)
        pos = view.lsp_to_lean(LineIndex(text).to_lsp(at))
        if pos is None:
            return GoalsResult(line=at.line, column=at.column, goals=[], goal_status="no_goal",
                               term_goal=None, structured=[])  # fmt: skip
        lean_text = view.to_lean(text)
        key = self.pool.key_for(lean_text, view.environment)
        entered = time.perf_counter()
        timeout = self.step_timeout

        async def operation(slot: Slot) -> GoalsResult:
            timer.queued(entered)
            with timer.lean():
                if slot.text() != lean_text:
                    await slot.elaborate(lean_text, timeout=timeout)
                plain = await slot.plain_goal(pos, timeout=timeout)
                term = await slot.plain_term_goal(pos, timeout=timeout)
                structured = await slot.interactive_goals(pos, timeout=timeout)
            return GoalsResult(
                line=at.line,
                column=at.column,
                goals=list(plain.goals),
                goal_status=plain.status,
                term_goal=term.goal if term.status == "goal" else None,
                structured=[
                    StructuredGoal(
                        hypotheses=[
                            Hypothesis(names=list(h.names), type=h.type, value=h.value)
                            for h in g.hypotheses
                        ],
                        target=g.target,
                        user_name=g.user_name,
                    )
                    for g in structured
                ],
            )

        return await self.pool.run(key, operation, holder=holder)
