"""Steps on warm slots: a task with a body → Lean's report, scope verdict, completeness, goals.

``LeanStep`` and ``WrittenFile`` are the Lean part, one picklable slot operation each (a
``RayPool`` ships them to a node): no session or pool inside them; the scope check, the
completeness and the timers stay with the ``Elaborator``."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    COMMENT_KINDS,
    TRACE_EVENT,
    DocumentReport,
    LeanDiagnostic,
    LeanrigError,
    LineIndex,
    LspPos,
    LspRange,
    PlainTermGoal,
    Pos,
    Severity,
    TokenKind,
    has_tactic_block,
    lean_tokens,
)
from repl_pool import LeanEnvironment, Pool, PoolKey, Slot, goals_in, unless_refused

from ..tasks import (
    Task,
    axioms_declared,
    check_scope,
    code_end,
    code_span,
    exit_after,
    flatten_symbols,
    sorry_outside,
    suffix_structure,
)
from .axiom_probe import init_pattern, split_probe, unlisted, with_probe
from .completeness import Completeness, decide_completeness, slow_note
from .ledger import StepTimer
from .prefix import PrefixModules, TaskView
from .session import is_complete, leaves_proof_open
from .tool_outputs import GoalsResult, Hypothesis, StructuredGoal

log = structlog.get_logger("leanrig.elaborate")

# The least time a goal query after the barrier gets, whatever is left of the step's.
LATE_QUERY_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class LeanAnswer:
    report: DocumentReport  # in the session document's coordinates
    symbols: list[DocumentSymbol]
    goals: list[str] | None  # None: not asked (Lean reported nothing that could be incomplete)
    lean_s: float  # seconds spent on Lean inside the operation (where it ran)
    expected: str | None = None  # the whole body's expected type, if this step learned it


def maybe_incomplete(report: DocumentReport) -> bool:
    """Could `is_complete` say no for this report? (False guarantees it says yes.)"""
    if report.status != "done" and report.status != "superseded":
        return True
    return any(d.is_error or leaves_proof_open(d) for d in report.diagnostics)


# Past ``timeout``, so a remote pool hears of a slot's timeout rather than a lost node.
DEADLINE_SLACK = 10.0


@dataclass(frozen=True, slots=True)
class LeanStep:
    """Make ``text`` the document; return its report, symbols and, if incomplete, the goals.

    Goals: a tactic body's at ``goal_at``, else the body's expected type (at ``term_at``, then
    reused as ``expected``). Everything goes in one write; a refused goal query leaves goals out."""

    text: str
    timeout: float
    goal_at: LspPos  # after the body's last code character
    term_at: LspPos  # the body's first non-space character
    symbols_from: int = 0  # the target's first line: the scope check needs no earlier symbol
    tactic: bool = True  # the body opens a tactic block
    head_end: LspPos | None = None  # end of ``f`` in a body ``@f x …`` (see ``covers_body``)
    expected: str | None = None  # the whole body's expected type, if an earlier step learned it
    portable = True

    @property
    def deadline(self) -> float:
        return self.timeout + DEADLINE_SLACK

    async def __call__(self, slot: Slot) -> LeanAnswer:
        started = time.perf_counter()
        done = await slot.elaborate_and_ask(
            self.text,
            goal_at=self.goal_at if self.tactic else None,
            term_at=None if self.tactic or self.expected is not None else self.term_at,
            timeout=self.timeout,
            symbols_from=self.symbols_from,
        )
        goals: list[str] | None = None
        learned: str | None = None
        if maybe_incomplete(done.report):
            goal, term = done.goal, done.term_goal
            if done.report.clean:
                goals = []  # only an info message (say, a trace quoting "sorry") looked open
            elif goal is not None and goal.status == "goals":
                goals = list(goal.goals)
            elif self.expected is not None:
                goals = [self.expected]
            else:
                if self.tactic:  # no tactic goals at the end: ask for the expected type now
                    term = await self._late_term_goal(slot, started)
                if term is not None and term.status == "goal" and self.covers_body(term):
                    learned = term.goal
                goals = [learned] if learned is not None else []
        took = time.perf_counter() - started
        sys.audit(TRACE_EVENT, "step done on its slot")
        return LeanAnswer(done.report, done.symbols, goals, took, learned)

    def covers_body(self, term: PlainTermGoal) -> bool:
        """Is ``term`` the whole body's expected type: its range reaches the body's end, or is
        the head ``f`` of a body ``@f x …``?"""
        if term.range is None:
            return False
        start, end = term.range.start, term.range.end
        if (end.line, end.character) >= (self.goal_at.line, self.goal_at.character):
            return True
        return start == self.term_at and end == self.head_end

    async def _late_term_goal(self, slot: Slot, started: float) -> PlainTermGoal | None:
        """The expected type at the body's start, asked after the barrier (None: Lean refused)."""
        left = self.timeout - (time.perf_counter() - started)
        timeout = max(left, LATE_QUERY_SECONDS)
        return await unless_refused(slot.plain_term_goal(self.term_at, timeout=timeout))


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """Elaborate ``text`` (a task file as written, wrappers and all); portable like LeanStep."""

    text: str
    timeout: float
    portable = True

    @property
    def deadline(self) -> float:
        return self.timeout + DEADLINE_SLACK

    async def __call__(self, slot: Slot) -> DocumentReport:
        return await slot.elaborate(self.text, timeout=self.timeout)


def step_for(
    task: Task,
    view: TaskView,
    body: str,
    text: str,
    lean_text: str,
    index: LineIndex,
    expected: str | None,
    timeout: float,
) -> LeanStep:
    """The ``LeanStep`` for ``body`` (``text``: the task file with it; ``lean_text``: Lean's)."""
    body_start, body_end = task.span.start, task.span.start + len(body)
    first, last = code_span(text, body_start, body_end)
    explicit = text.startswith("@", first) and first + 1 < last
    if explicit:
        first += 1  # Lean has no term info on the `@` of `@f x`
    goal_at = view.lsp_to_lean(index.lsp_of_offset(last))
    term_at = view.lsp_to_lean(index.lsp_of_offset(first))
    assert goal_at is not None  # the body is after any prefix cut
    assert term_at is not None
    # Only for `@f args` while the expected type is unknown: as an operand (`h ▸ e`, `@f x |>.g`)
    # Lean's answer at the head is the operand's own type.
    learning = explicit and expected is None
    head = next(lean_tokens(text, first), None) if learning else None
    head_end = (
        view.lsp_to_lean(index.lsp_of_offset(head.end))
        if head is not None
        and head.kind is TokenKind.IDENT
        and head.end <= last
        and _only_arguments(text, head.end, last)
        else None
    )
    decl_at = view.lsp_to_lean(index.lsp_of_offset(task.span.decl_start))
    symbols_from = decl_at.line if decl_at is not None else 0
    return LeanStep(
        lean_text,
        timeout,
        goal_at,
        term_at,
        symbols_from,
        tactic=has_tactic_block(body),
        head_end=head_end,
        expected=expected,
    )


_OPEN, _CLOSE = "([{⟨⦃", ")]}⟩⦄"
_NOT_ARGUMENTS = frozenset({"fun", "at", "with", "then", "else", "from", "in", "do", "matches"})


def _only_arguments(text: str, start: int, end: int) -> bool:
    """Is ``text[start:end]`` only arguments of ``@f``: at depth 0, names, literals and ``@``?"""

    depth, previous = 0, start
    ident, symbol = TokenKind.IDENT, TokenKind.SYMBOL
    for kind, begin, finish, _ in lean_tokens(text, start):
        if begin >= end:
            break
        if kind in COMMENT_KINDS:
            continue
        piece = text[begin:finish]
        if piece in _OPEN:
            depth += 1
        elif piece in _CLOSE:
            depth -= 1
        elif depth == 0:
            if kind is ident and piece in _NOT_ARGUMENTS:
                return False
            dot = piece == "." and begin == previous  # a projection: `h.1`
            if kind is symbol and piece != "@" and not dot:
                return False
        previous = finish
    return True


TASK_FILE_ERRORS = (
    "the task file itself has errors outside the proof body (above): no proof can be accepted "
    "until the suite is fixed; tell the suite's author"
)

# Steps blank a wrapped target's `in`; the file as written is elaborated once for its own errors.
WRITTEN_FILE_ERRORS = (
    "the task file as written has an error outside the proof body (line {line}: {message}): "
    "no proof can be accepted until the suite is fixed; tell the suite's author"
)

WRITTEN_TRIES = 3  # steps that ask for the file as written before the session stops asking


def _with_task_file_errors(
    report: DocumentReport, index: LineIndex, body_start: int, body_end: int
) -> DocumentReport:
    """``report`` with one warning at the first error outside the body (the suite's fault)."""
    outside = _errors_outside(report, index, body_start, body_end)
    if not outside:
        return report
    log.warning("task.errors_outside_body", first=outside[0].message[:200], count=len(outside))
    return _with_warnings(report, outside[0].range.start, [TASK_FILE_ERRORS])


def _errors_outside(
    report: DocumentReport, index: LineIndex, body_start: int, body_end: int
) -> list[LeanDiagnostic]:
    return [
        d
        for d in report.diagnostics
        if d.is_error and not body_start <= index.offset_of_lsp(d.range.start) <= body_end
    ]


def _with_warnings(report: DocumentReport, at: LspPos, messages: Sequence[str]) -> DocumentReport:
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
    """``report`` without the errors after the body that blanking the wrappers' ``in`` causes
    (those the untouched task shows too: same message, same distance from the end)."""

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
    """What the elaborator knows of one task: decided from its file, or learned from a step."""

    view: TaskView
    lines: LineIndex  # the task file's (a step's file shares it up to the body)
    exit_at: int | None  # the offset of an ``#exit`` after the target
    # What a parse error running into the probe names instead (None: the file's own code).
    displaced: str | None
    probed: bool  # could a proof reach sorryAx or an unlisted axiom silently?
    init_outside: bool  # the task file names INIT_AXIOMS or NATIVE_WORDS outside the body
    key: PoolKey | None = None
    # Learned from steps: Lean's parse after the untouched body, the body's expected type, the
    # errors the blanked wrappers cause, the written file's first error ("": none; None: unknown).
    suffix: list[str] | None = None
    expected: str | None = None
    artifacts: set[tuple[str, int]] | None = None
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
        """``prefixes``: None means every session document is the whole file.
        ``library_sorry``: the suite's library leaves a ``sorry`` a target may go through."""
        self.pool = pool
        self.environment = environment
        self.step_timeout = step_timeout
        self.prefixes = prefixes
        self.library_sorry = library_sorry
        self.library_axioms = tuple(library_axioms)
        self.allowed_axioms = tuple(allowed_axioms)
        self.verdict_seconds = verdict_seconds  # the verdict's limit per stage (SLOW_NOTE)
        self._views: dict[str, TaskView] = {}  # by task id
        self._memos: dict[str, TaskMemo] = {}  # by task key
        self._init_pattern = init_pattern(self.allowed_axioms)

    async def view(self, task: Task) -> TaskView:
        """How the task's session document maps to the task file (decided once; may run Lean)."""
        view = self._views.get(task.id)
        if view is None:
            if self.prefixes is None:
                view = TaskView.whole_file(self.environment, "prefix modules are off")
            else:
                view = await self.prefixes.view(task)
            view = self._views.setdefault(task.id, view)
        return view

    async def memo(self, task: Task) -> TaskMemo:
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
        return self._memos.setdefault(task.key, made)  # a concurrent first use may have won

    def pool_key(self, memo: TaskMemo, lean_text: str) -> PoolKey:
        """The task's pool key (the header never changes: only the body is edited)."""
        if memo.key is None:
            memo.key = self.pool.key_for(lean_text, memo.view.environment)
        return memo.key

    async def warm(self, task: Task) -> None:
        """An idle Lean process for ``task``'s session document (its prefix module built)."""
        memo = self._memos.get(task.key) or await self.memo(task)
        lean_text, _ = self.lean_document(task, memo, task.text)
        await self.pool.execute(self.pool_key(memo, lean_text), _started)

    async def elaborate(
        self, task: Task, body: str, timers: Sequence[StepTimer], holder: str | None
    ) -> Elaborated:
        """Elaborate the task with ``body`` on a warm slot."""
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
            answer = await self.pool.execute(key, step, holder=holder)
        finally:
            # Queue until the slot's Lean work began (on Ray, the hop too); a failed step is Lean.
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
        why = completeness.reason if completeness.status in ("axioms", "forbidden") else None
        slow = slow_note(answer.lean_s, self.verdict_seconds) if completeness.proof_passes else None
        if notes := [note for note in (written, why, slow) if note]:
            report = _with_warnings(report, index.lsp_of_offset(task.span.decl_start), notes)
        open_goals = rejected is None and not completeness.proof_passes
        goals = answer.goals if open_goals and answer.goals is not None else []
        if answer.expected is not None:
            memo.expected = answer.expected  # only the body changes, so it holds for every step
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
            diagnostics=report.diagnostics,
        )

    async def _written_error(
        self,
        task: Task,
        memo: TaskMemo,
        key: PoolKey,
        timers: Sequence[StepTimer],
        holder: str | None,
    ) -> str | None:
        """WRITTEN_FILE_ERRORS for the file as written (None: no error, or not known yet)."""
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
        """Ask Lean: "" means no error outside the body, None that Lean could not say."""
        written = WrittenFile(memo.view.to_lean(task.text), self.step_timeout)
        entered = time.perf_counter()
        try:
            lean_report = await self.pool.execute(key, written, holder=holder)
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
        log.warning("task.errors_outside_body_as_written", task=task.id, first=first.message[:200])
        message = first.message.strip().splitlines()[0][:200] if first.message.strip() else ""
        return WRITTEN_FILE_ERRORS.format(line=first.range.start.line + 1, message=message)

    def lean_document(self, task: Task, memo: TaskMemo, text: str) -> tuple[str, int | None]:
        """Lean's session document for task-file ``text``, and its probe's line (None: none)."""
        lean_text = memo.view.to_lean(task.unwrapped(text))
        if not self._probed(task, memo, text):
            return lean_text, None
        return with_probe(lean_text, task.spec.theorem, task.text, memo.exit_at)

    def _probed(self, task: Task, memo: TaskMemo, text: str) -> bool:
        """Does the document for ``text`` get the probe? A text search: a comment may trigger it."""
        if memo.probed or memo.init_outside:
            return True
        body_end = len(text) - (len(task.text) - task.span.end)
        return self._init_pattern.search(text, task.span.start, body_end) is not None

    async def goals_at(
        self, task: Task, text: str, at: Pos, timer: StepTimer, holder: str | None
    ) -> GoalsResult:
        """Goals at ``at`` (1-based line, code point column); none before a compiled prefix."""
        memo = self._memos.get(task.key) or await self.memo(task)
        pos = memo.view.lsp_to_lean(LineIndex(text).to_lsp(at))
        if pos is None:
            return GoalsResult(
                line=at.line,
                column=at.column,
                goals=[],
                goal_status="no_goal",
                term_goal=None,
                structured=[],
            )

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

        return await self.pool.execute(key, operation, holder=holder)


async def _started(slot: Slot) -> None:
    return None
