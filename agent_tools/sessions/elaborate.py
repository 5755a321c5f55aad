"""Elaboration on warm pool slots: a task with a given body → Lean's report, the scope verdict
(does the edit stay inside the proof body?), the completeness status and the goals to show;
goals at a position.

Times every wait into the caller's `StepTimer`s (queue: waiting for a slot; Lean: waiting on
Lean). Raises lower-level errors unchanged (the service translates them). Holds no session.

Lean sees a task's session document (prefix.py: the whole file, or the compiled prefix
imported; with the ``#print axioms`` probe where it is needed, axiom_probe.py); everything
leaving this module is in task-file text and positions.

The Lean part of a step is one self-contained, picklable operation (``LeanStep``,
lean_step.py). The scope check, the completeness status (completeness.py) and the timers stay
here; they must not move into the operation, which a ``RayPool`` runs on another node.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from lsp_bridge import (
    TRACE_EVENT,
    DocumentReport,
    LeanDiagnostic,
    LeanrigError,
    LineIndex,
    LspPos,
    LspRange,
    Pos,
    Severity,
)
from repl_pool import LeanEnvironment, Pool, PoolKey, Slot, goals_in

from ..tasks import (
    Task,
    axioms_declared,
    check_scope,
    code_end,
    exit_after,
    flatten_symbols,
    sorry_outside,
    suffix_structure,
)
from .axiom_probe import init_pattern, split_probe, unlisted, with_probe
from .completeness import Completeness, decide_completeness, slow_note
from .lean_step import LeanAnswer, WrittenFile, step_for
from .ledger import StepTimer
from .prefix import PrefixModules, TaskView
from .session import is_complete
from .tool_outputs import GoalsResult, Hypothesis, StructuredGoal

log = structlog.get_logger("leanrig.elaborate")

# The task file itself has errors outside the proof body (``_with_task_file_errors``).
TASK_FILE_ERRORS = (
    "the task file itself has errors outside the proof body (above): no proof can be accepted "
    "until the suite is fixed; tell the suite's author"
)

# A target under `… in` wrappers: the session's document has their `in` blanked (their scope
# runs on over the rest of the file), so errors that only the file as written has — a later
# declaration using a name the `open … in` opened for the target alone — show in no step.
# The file as written is elaborated once (``WrittenFile``), and such errors are said here.
WRITTEN_FILE_ERRORS = (
    "the task file as written has an error outside the proof body (line {line}: {message}): "
    "no proof can be accepted until the suite is fixed; tell the suite's author"
)

WRITTEN_TRIES = 3  # steps that ask for the file as written before the session stops asking


def _with_task_file_errors(
    report: DocumentReport, index: LineIndex, body_start: int, body_end: int
) -> DocumentReport:
    """The untouched task with errors outside its proof body (a statement that does not
    elaborate, a later declaration that does not compile): no proof can be accepted, and the
    errors are the suite's, not the agent's. Said once, where the first one is."""
    outside = _errors_outside(report, index, body_start, body_end)
    if not outside:
        return report
    log.warning("task.errors_outside_body", first=outside[0].message[:200], count=len(outside))
    return _with_warnings(report, outside[0].range.start, [TASK_FILE_ERRORS])


def _errors_outside(
    report: DocumentReport, index: LineIndex, body_start: int, body_end: int
) -> list[LeanDiagnostic]:
    """``report``'s errors outside the proof body ``[body_start, body_end]``, in its order."""
    return [
        d
        for d in report.diagnostics
        if d.is_error and not body_start <= index.offset_of_lsp(d.range.start) <= body_end
    ]


def _with_warnings(report: DocumentReport, at: LspPos, messages: Sequence[str]) -> DocumentReport:
    """``report`` with leanrig's warnings ``messages`` at ``at``, in order, after Lean's."""
    warnings = tuple(
        LeanDiagnostic(
            range=LspRange(at, at), severity=Severity.WARNING, message=message, source="leanrig"
        )
        for message in messages
    )
    return dataclasses.replace(report, diagnostics=(*report.diagnostics, *warnings))


@dataclass(frozen=True, slots=True)
class Elaborated:
    text: str
    index: LineIndex  # of ``text``
    report: DocumentReport
    goals: list[str]
    rejected: str | None  # the scope check's reason (None: the edit stays in the body)
    completeness: Completeness

    @property
    def complete(self) -> bool:
        return self.completeness.complete


def _without_scope_artifacts(
    task: Task,
    memo: TaskMemo,
    body: str,
    report: DocumentReport,
    index: LineIndex,
    body_end: int,
    text_len: int,
) -> DocumentReport:
    """A wrapped target's session document has its ``… in`` blanked (tasks.scope_wrappers),
    so the wrappers' scope runs on over the commands after the body, where Lean may then
    report errors the task file does not have (an ``open`` making a later name ambiguous).
    Those are the errors after the body that the untouched task shows too (same message,
    same place counted from the end, learned in ``memo``): dropped, so they neither show nor
    block ``complete``. The verdict judges the submission itself."""

    def after_body(d: LeanDiagnostic) -> tuple[str, int] | None:
        offset = index.offset_of_lsp(d.range.start)
        return (d.message, text_len - offset) if d.is_error and offset >= body_end else None

    if memo.artifacts is None:
        if body != task.body:
            return report
        memo.artifacts = {key for d in report.diagnostics if (key := after_body(d)) is not None}
    if not memo.artifacts:
        return report
    kept = tuple(d for d in report.diagnostics if after_body(d) not in memo.artifacts)
    return dataclasses.replace(report, diagnostics=kept)


@dataclass(slots=True)
class TaskMemo:
    """What the elaborator keeps of one task: decided once from its file (only the body
    changes), or learned from a step and true for every later one."""

    view: TaskView  # how the session document maps to the task file
    lines: LineIndex  # the task file's (a step's file shares it up to the body)
    exit_at: int | None  # the offset of an ``#exit`` after the target
    # What a parse error running into the probe names in the task file: the end of input,
    # or its `#exit`. None: the task file has code between the target and the probe (`end
    # Bx`, or a `set_option` command of its own), which such an error names.
    displaced: str | None
    # Could a proof reach sorryAx or an axiom outside the allow-list without saying so
    # (SORRY_HELPER, AXIOM_HELPER)?
    probed: bool
    # Does the task file name INIT_AXIOMS or NATIVE_WORDS outside the body (``_probed``)?
    init_outside: bool
    key: PoolKey | None = None  # the pool key, from the first session document
    # Learned: Lean's parse after the body of the untouched task (check_scope) ...
    suffix: list[str] | None = None
    # ... the expected type of the whole body (LeanStep.covers_body) ...
    expected: str | None = None
    # ... the errors after the body that only the blanked wrappers cause ...
    artifacts: set[tuple[str, int]] | None = None
    # ... and, for a wrapped target, the first error outside the body of the file as written
    # (WRITTEN_FILE_ERRORS; "" when it has none; None: not known yet, after written_tries).
    written_error: str | None = None
    written_tries: int = 0


class Elaborator:
    def __init__(
        self,
        pool: Pool,
        environment: LeanEnvironment,
        step_timeout: float,
        prefixes: PrefixModules | None = None,
        library_sorry: bool = False,
        library_axioms: Sequence[str] = (),
        allowed_axioms: Sequence[str] = (),
        verdict_seconds: float | None = None,
    ) -> None:
        """``prefixes``: prefix modules (None: every session document is the whole file).
        ``library_sorry``: the suite's own library leaves something with ``sorry``, which
        any task may prove its target through (``SORRY_HELPER``)."""
        self.pool = pool
        self.environment = environment
        self.step_timeout = step_timeout
        self.prefixes = prefixes
        self.library_sorry = library_sorry
        self.library_axioms = tuple(library_axioms)
        self.allowed_axioms = tuple(allowed_axioms)
        self.verdict_seconds = verdict_seconds  # the verdict's limit per stage (SLOW_NOTE)
        self._views: dict[str, TaskView] = {}  # task id -> its view (TaskMemo.view)
        self._memos: dict[str, TaskMemo] = {}  # task key -> what is known of it
        # INIT_AXIOMS outside the allow-list, and NATIVE_WORDS (``_probed``)
        self._init_pattern = init_pattern(self.allowed_axioms)

    async def view(self, task: Task) -> TaskView:
        """How the task's session document maps to the task file (decided once per task; the
        Lean work of a task's first use, which open_task times as such)."""
        view = self._views.get(task.id)
        if view is None:
            if self.prefixes is None:
                view = TaskView.whole_file(self.environment, "prefix modules are off")
            else:
                view = await self.prefixes.view(task)
            view = self._views.setdefault(task.id, view)
        return view

    async def memo(self, task: Task) -> TaskMemo:
        """What is known of ``task`` (made on its first use: its view, then text scans)."""
        memo = self._memos.get(task.key)
        if memo is not None:
            return memo
        view = await self.view(task)
        start, end = task.span.decl_start, task.span.end
        exit_at = exit_after(task.text, end)
        stop = len(task.text) if exit_at is None else exit_at
        made = TaskMemo(
            view=view,
            lines=LineIndex(task.text),
            exit_at=exit_at,
            displaced=(
                None
                if code_end(task.text, end, stop) > end
                else "unexpected end of input"
                if exit_at is None
                else "unexpected token '#exit'"
            ),
            probed=(
                self.library_sorry
                or sorry_outside(task.text, start, end)
                or unlisted(
                    [*self.library_axioms, *axioms_declared(task.text, start, end)],
                    self.allowed_axioms,
                )
            ),
            init_outside=(
                self._init_pattern.search(task.text, 0, task.span.start) is not None
                or self._init_pattern.search(task.text, end) is not None
            ),
        )
        if task.is_restated and (original := self._memos.get(task.id)) is not None:
            # Lean's parse after the target is the task file's, whatever its statement.
            made.suffix = original.suffix
        return self._memos.setdefault(task.key, made)  # (a concurrent first use made one too)

    def pool_key(self, memo: TaskMemo, lean_text: str) -> PoolKey:
        """The task's pool key (the header never changes: only the body is edited)."""
        if memo.key is None:
            memo.key = self.pool.key_for(lean_text, memo.view.environment)
        return memo.key

    async def elaborate(
        self, task: Task, body: str, timers: Sequence[StepTimer], holder: str | None
    ) -> Elaborated:
        """Elaborate the task with ``body`` on a warm slot: report, scope verdict,
        completeness, goals."""
        memo = self._memos.get(task.key) or await self.memo(task)
        view = memo.view
        text = task.with_body(body)
        lean_text, probe_line = self.lean_document(task, memo, text)
        key = self.pool_key(memo, lean_text)
        body_start, body_end = task.span.start, task.span.start + len(body)
        index = LineIndex.sharing(memo.lines, body_start, text)
        step = step_for(task, view, body, text, lean_text, index, memo.expected, self.step_timeout)
        entered = time.perf_counter()
        answer: LeanAnswer | None = None
        try:
            answer = await self.pool.run(key, step, holder=holder)
        finally:
            # Queue: from asking until the slot's Lean work began (on Ray: the hop too);
            # Lean: the operation's own time on Lean. A failed step counts as Lean time.
            now = time.perf_counter()
            lean_from = now - answer.lean_s if answer is not None else entered
            for timer in timers:
                if answer is not None:
                    timer.queue_intervals.append((entered, lean_from))
                timer.lean_intervals.append((lean_from, now))
        lean_report, probe_messages = answer.report, None
        if probe_line is not None:
            lean_report, probe_messages = split_probe(lean_report, probe_line, memo.displaced)
        report = view.report_from_lean(lean_report)
        if task.wrappers:
            report = _without_scope_artifacts(task, memo, body, report, index, body_end, len(text))
        lean_complete = is_complete(report, index, task.span.decl_start, body_end)
        written = (
            await self._written_error(task, memo, key, timers, holder) if task.wrappers else None
        )
        rejected = self._scope_rejection(task, memo, body, text, lean_text, index, answer, report)
        completeness = decide_completeness(
            lean_complete=lean_complete,
            task_file_error=written,
            probe_messages=probe_messages,
            theorem=task.spec.theorem,
            allowed_axioms=self.allowed_axioms,
            body=body,
            scope_rejection=rejected,
            placeholder=body == task.body,
        )
        # What says why on the target: the file as written (on every step, complete or not),
        # the rule that failed, and a slow proof that passes every rule.
        why = completeness.reason if completeness.status in ("axioms", "forbidden") else None
        slow = slow_note(answer.lean_s, self.verdict_seconds) if completeness.proof_passes else None
        if notes := [note for note in (written, why, slow) if note]:
            report = _with_warnings(report, index.lsp_of_offset(task.span.decl_start), notes)
        open_goals = rejected is None and not completeness.proof_passes  # (the proof's own)
        goals = answer.goals if open_goals and answer.goals is not None else []
        if answer.expected is not None:
            memo.expected = answer.expected  # only the body changes: so it stays
        if body == task.body:
            report = _with_task_file_errors(report, index, body_start, body_end)
            if completeness.status == "placeholder" and completeness.reason:
                at = index.lsp_of_offset(task.span.decl_start)
                report = _with_warnings(report, at, [completeness.reason])
        sys.audit(TRACE_EVENT, "scope checked")
        return Elaborated(text, index, report, goals, rejected, completeness)

    def _scope_rejection(
        self,
        task: Task,
        memo: TaskMemo,
        body: str,
        text: str,
        lean_text: str,
        index: LineIndex,
        answer: LeanAnswer,
        report: DocumentReport,
    ) -> str | None:
        """Why the edit leaves the proof body, by Lean's parse (None: it stays inside)."""
        view = memo.view
        body_end = task.span.start + len(body)
        lean_index = LineIndex(lean_text) if view.prefixed else index
        flat = view.symbols_from_lean(flatten_symbols(answer.symbols, lean_index))
        if memo.suffix is None and body == task.body:
            memo.suffix = suffix_structure(flat, body_end, len(text))
        return check_scope(
            text=text,
            body_start=task.span.start,
            body_end=body_end,
            decl_start=task.span.decl_start,
            symbols=flat,
            expected_suffix=memo.suffix or [],
            diagnostics=report.diagnostics,  # (only its errors count: no warning of ours)
        )

    async def _written_error(
        self,
        task: Task,
        memo: TaskMemo,
        key: PoolKey,
        timers: Sequence[StepTimer],
        holder: str | None,
    ) -> str | None:
        """WRITTEN_FILE_ERRORS for a wrapped target's task file as written, if it has an error
        outside the body (None: it has none, or that is not known yet). Asked of Lean until it
        says (``_ask_written``), up to WRITTEN_TRIES steps; kept in ``memo``."""
        if memo.written_error is None and memo.written_tries < WRITTEN_TRIES:
            memo.written_tries += 1
            memo.written_error = await self._ask_written(task, memo, key, timers, holder)
        return memo.written_error or None

    async def _ask_written(
        self,
        task: Task,
        memo: TaskMemo,
        key: PoolKey,
        timers: Sequence[StepTimer],
        holder: str | None,
    ) -> str | None:
        """WRITTEN_FILE_ERRORS for the first error outside the body of the task file as
        written (its wrappers' `in` kept), "" when it has none, None when Lean could not say
        (a busy pool, a timeout: a later step asks again, up to WRITTEN_TRIES times; the
        verdict judges the file as written in any case)."""
        written = WrittenFile(memo.view.to_lean(task.text), self.step_timeout)
        entered = time.perf_counter()
        try:
            lean_report = await self.pool.run(key, written, holder=holder)
        except LeanrigError as exc:
            log.warning("task.written_file_unread", task=task.id, error=str(exc)[:200])
            return None
        finally:
            for timer in timers:
                timer.lean_intervals.append((entered, time.perf_counter()))
        report = memo.view.report_from_lean(lean_report)
        outside = _errors_outside(report, memo.lines, task.span.start, task.span.end)
        if not outside:
            return ""
        first = outside[0]
        log.warning("task.errors_outside_body_as_written", task=task.id,
                    first=first.message[:200])  # fmt: skip
        message = first.message.strip().splitlines()[0][:200] if first.message.strip() else ""
        return WRITTEN_FILE_ERRORS.format(line=first.range.start.line + 1, message=message)

    def lean_document(self, task: Task, memo: TaskMemo, text: str) -> tuple[str, int | None]:
        """Lean's session document for the task-file ``text`` — the view's document, the
        wrappers unwrapped, and for a probed step (``_probed``) ``#print axioms`` of the
        target (``SORRY_HELPER``) — and the line of its probe (None: not probed). The probe
        is appended, so no position moves — or, in a task file that stops with ``#exit``
        after the target, inserted right before that ``#exit`` (nothing after it is
        elaborated, so nothing after it is reported either)."""
        lean_text = memo.view.to_lean(task.unwrapped(text))
        if not self._probed(task, memo, text):
            return lean_text, None
        return with_probe(lean_text, task.spec.theorem, task.text, memo.exit_at)

    def _probed(self, task: Task, memo: TaskMemo, text: str) -> bool:
        """Does the session document for the task-file ``text`` end with the probe: the task
        is probed (``TaskMemo.probed``), or the text names one of Lean's own axioms outside
        the allow-list (INIT_AXIOMS), or a tactic that leaves one (NATIVE_WORDS). A text
        search, so a mention in a comment costs a probe, no more; the task file's own text
        is searched once, a step's body on every step."""
        if memo.probed or memo.init_outside:
            return True
        body_end = len(text) - (len(task.text) - task.span.end)
        return self._init_pattern.search(text, task.span.start, body_end) is not None

    async def goals_at(
        self, task: Task, text: str, at: Pos, timer: StepTimer, holder: str | None
    ) -> GoalsResult:
        """Plain, term and structured goals at ``at`` (1-based line, code point column). With
        the prefix compiled, a position before the target command has no goals to show (that
        part of the file is not in the session's document)."""
        memo = self._memos.get(task.key) or await self.memo(task)
        pos = memo.view.lsp_to_lean(LineIndex(text).to_lsp(at))
        if pos is None:
            return GoalsResult(line=at.line, column=at.column, goals=[], goal_status="no_goal",
                               term_goal=None, structured=[])  # fmt: skip
        lean_text = self.lean_document(task, memo, text)[0]
        key = self.pool_key(memo, lean_text)
        entered = time.perf_counter()
        timeout = self.step_timeout

        async def operation(slot: Slot) -> GoalsResult:
            timer.queued(entered)
            with timer.lean():
                answer = await goals_in(slot, lean_text, pos, timeout=timeout)
            plain, term, structured = answer.plain, answer.term, answer.structured
            return GoalsResult(
                line=at.line,
                column=at.column,
                goals=list(plain.goals),
                goal_status=plain.status,
                term_goal=term.goal if term is not None and term.status == "goal" else None,
                structured=[
                    StructuredGoal(
                        hypotheses=[
                            Hypothesis(names=list(h.names), type=h.type, value=h.value)
                            for h in g.hypotheses
                        ],
                        target=g.target,
                        user_name=g.user_name,
                    )
                    for g in structured or ()
                ],
            )

        return await self.pool.run(key, operation, holder=holder)
