"""Elaboration on warm pool slots: a task with a given body → Lean's report, the scope verdict
(does the edit stay inside the proof body?) and the goals to show; goals at a position.

Times every wait into the caller's `StepTimer`s (queue: waiting for a slot; Lean: waiting on
Lean). Raises lower-level errors unchanged (the service translates them). Holds no session.

Lean sees a task's session document (prefix.py: the whole file, or the compiled prefix
imported); everything leaving this module is in task-file text and positions.

The Lean part of a step is one self-contained, picklable operation (`LeanStep`): the edit, the
barrier, the document symbols and — when Lean's report could mean an incomplete proof — the
goals. A local pool runs it on its slot here; a `RayPool` ships it to the node, so a step is one
round trip. The scope check, the completeness verdict and the timers stay here.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    COMMENT_KINDS,
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
    name_parts,
)
from repl_pool import LeanEnvironment, PoolKey, Slot, WarmPool, goals_in, unless_refused

from ..tasks import (
    Task,
    axioms_declared,
    check_scope,
    code_end,
    code_span,
    exit_after,
    flatten_symbols,
    insert_before_exit,
    sorry_outside,
    suffix_structure,
)
from ..verdict import (
    PLACEHOLDER_PROVES,
    axioms_outside,
    escape_name,
    forbidden_constructs,
    parse_axioms,
)
from .catalogue import GoalsResult, Hypothesis, StructuredGoal
from .ledger import StepTimer
from .prefix import PrefixModules, TaskView
from .session import is_complete, leaves_proof_open

log = structlog.get_logger("leanrig.elaborate")

# The least time a goal query asked after a step's barrier gets (``LeanStep``), whatever is
# left of the step's own time: the version is elaborated by then, so the query is short.
LATE_QUERY_SECONDS = 1.0

# A task file (or the suite's own library) may leave helper lemmas with `sorry` (as many
# benchmark files do): a target proved *through* one reports no error and no sorry of its own,
# yet depends on `sorryAx`, and the verdict rejects it. For such tasks the session document
# ends with `#print axioms` of the target (appended: no position moves), and a step whose
# proof depends on `sorryAx` is not complete, with this warning on the target.
SORRY_HELPER = (
    "the proof depends on `sorryAx` through a lemma it uses that is left with `sorry` (the "
    "verdict rejects that); prove it without the unproved lemmas"
)

# Likewise an axiom the task file or the suite's library declares outside the suite's
# allow-list: a target proved through it reports nothing, and the verdict rejects it. Such
# tasks get the same `#print axioms` probe (``sorryAx``, which a prelude library declares
# itself, is covered by Lean's own "declaration uses 'sorry'" and by SORRY_HELPER).
AXIOM_HELPER = (
    "not complete: the proof depends on axioms outside the suite's allow-list (check_proof "
    "rejects that): "
)

# Lean's own library declares axioms beyond the usual allow-list that a body can name (not
# declared in the task file or the suite's library, so not found there): `Lean.ofReduceBool` is
# what `native_decide` leaves, `Lean.ofReduceNat` its Nat twin, `Lean.trustCompiler` what
# compiler-trusting tactics leave. A session document whose text names one outside the
# allow-list gets the probe for that step (AXIOM_HELPER then names it).
INIT_AXIOMS = ("Lean.ofReduceBool", "Lean.ofReduceNat", "Lean.trustCompiler")
# Tactics that leave them without naming them (`native_decide` is forbidden outright, but
# `decide +native` / `decide (config := {native := true})` is the same tactic, and `bv_decide`
# checks its certificate by `Lean.ofReduceBool`): their words in the text probe too.
NATIVE_WORDS = ("native", "bv_decide")

# The probe's answer could not be read (no `#print axioms` message names the target): the
# session cannot tell, so it does not say complete; the verdict decides.
PROBE_UNREAD = (
    "not complete: Lean's `#print axioms` answer for the target could not be read, so the "
    "axioms this proof depends on are unknown; check_proof decides"
)

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

# A complete step that took Lean more than this share of the verdict's time limit gets a warning
# (SLOW_NOTE): the verdict elaborates the whole file again, in fresh processes that compete
# for the cores, each stage within the suite's ``limits.wall_seconds`` — and a step's time is
# only what Lean re-elaborated for it, so the verdict's is longer.
SLOW_SHARE = 0.5
SLOW_NOTE = (
    "complete, but Lean took {took:.1f} s for this step; check_proof elaborates the whole file "
    "again in fresh processes, each stage within {limit:g} s (the suite's limit), and may time "
    "out there: a faster proof is safer"
)

# A proof Lean accepts that uses a construct the verdict forbids (verdict.FORBIDDEN) is not
# complete either: the step says so with this warning, before the verdict would.
FORBIDDEN_NOTE = "not complete: check_proof rejects this proof: "


def _split_probe(
    report: DocumentReport, probe_line: int, displaced: str | None
) -> tuple[DocumentReport, list[str]]:
    """Lean's report without the appended ``#print axioms``, and that command's messages.
    A parse error that ran into the probe names it ("unexpected token 'set_option'"), a command
    the agent cannot see: it names what the task file has there instead (``displaced``)."""
    ours = [d.message for d in report.diagnostics if d.range.start.line >= probe_line]
    kept = tuple(
        dataclasses.replace(d, message=d.message.replace(_PROBE_TOKEN, displaced))
        if displaced is not None and _PROBE_TOKEN in d.message
        else d
        for d in report.diagnostics
        if d.range.start.line < probe_line
    )
    return dataclasses.replace(report, diagnostics=kept), ours


_PROBE_TOKEN = "unexpected token 'set_option'"  # the probe's first token


def probe_objection(messages: Sequence[str], theorem: str, allowed: Sequence[str]) -> str | None:
    """Why a step Lean reported clean is still not complete, from the appended ``#print
    axioms`` probe's ``messages`` (None: nothing against it). Judged on the names Lean lists,
    as the verdict does (a theorem or axiom whose name merely contains ``sorryAx`` is not
    ``sorryAx``); an answer that cannot be read is not taken as clean (PROBE_UNREAD)."""
    used = parse_axioms([{"data": m} for m in messages], theorem)
    if used is None:
        return PROBE_UNREAD
    if any(name_parts(name) == ("sorryAx",) for name in used):
        return SORRY_HELPER
    extra = axioms_outside(used, allowed)
    return AXIOM_HELPER + ", ".join(extra) if extra else None


_OPEN, _CLOSE = "([{⟨⦃", ")]}⟩⦄"
_NOT_ARGUMENTS = frozenset({"fun", "at", "with", "then", "else", "from", "in", "do", "matches"})


def _only_arguments(text: str, start: int, end: int) -> bool:
    """Is ``text[start:end]`` (after the head of ``@f …``) nothing but arguments of ``f``:
    outside brackets, only identifiers (``h.1`` too), literals and ``@``? Anything else (an
    operator such as ``▸``, ``|>.``, ``=``; a ``fun``) may make ``@f …`` an operand."""
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
    return _with_warning(report, outside[0].range.start, TASK_FILE_ERRORS)


def _errors_outside(
    report: DocumentReport, index: LineIndex, body_start: int, body_end: int
) -> list[LeanDiagnostic]:
    """``report``'s errors outside the proof body ``[body_start, body_end]``, in its order."""
    return [
        d
        for d in report.diagnostics
        if d.is_error and not body_start <= index.offset_of_lsp(d.range.start) <= body_end
    ]


def _with_warning(report: DocumentReport, at: LspPos, message: str) -> DocumentReport:
    warning = LeanDiagnostic(
        range=LspRange(at, at), severity=Severity.WARNING, message=message, source="leanrig"
    )
    return dataclasses.replace(report, diagnostics=(*report.diagnostics, warning))


@dataclass(frozen=True, slots=True)
class Elaborated:
    text: str
    index: LineIndex  # of ``text``
    report: DocumentReport
    goals: list[str]
    rejected: str | None
    complete: bool


@dataclass(frozen=True, slots=True)
class LeanAnswer:
    report: DocumentReport  # in the session document's coordinates
    symbols: list[DocumentSymbol]
    goals: list[str] | None  # None: not asked (Lean reported nothing that could be incomplete)
    lean_s: float  # seconds spent on Lean inside the operation (where it ran)
    # The expected type of the whole body, when this step learned it from Lean (``LeanStep``).
    expected: str | None = None


def maybe_incomplete(report: DocumentReport) -> bool:
    """Could `is_complete` say no for this report? (It says yes whenever this says no: no
    error, no unsolved goals and no sorry anywhere, and the version finished.)"""
    if report.status != "done" and report.status != "superseded":
        return True
    return any(d.is_error or leaves_proof_open(d) for d in report.diagnostics)


# A portable operation's deadline past its answers' own (``timeout``): slack for what surrounds
# them (the write, a late goal query, cancelling unanswered requests on a timeout: up to 1 s
# each), so a pool running it elsewhere hears of a slot's timeout rather than declaring the
# node lost.
DEADLINE_SLACK = 10.0


@dataclass(frozen=True, slots=True)
class LeanStep:
    """The Lean part of one step on a slot: make ``text`` the holder's document and wait for
    its report, with — about the same version — the document symbols (for the scope check) and
    the goals to show when the proof is incomplete: for a body with a tactic block
    (``tactic``), the tactic goals at ``goal_at``, and only if there are none the expected
    type at ``term_at``; for a term body, that expected type. (The goals asking both queries
    showed, whenever the body's tactic blocks are written in it; a tactic Lean runs without
    a written ``by`` — an auto-param such as the bound proof of ``xs[i]``, the default
    ``decreasing_tactic`` — could show its goals at a term body's end, which now shows the
    expected type, and its own error states its goal.) A goal query Lean answers with an
    error (``lean_refused``) leaves the goals out; the step's report stands.

    The expected type shown is the whole body's — the theorem's statement with its binders as
    hypotheses, the same for every body of a task, since only the body changes. Once a step
    has learned it (``expected``: an answer that ``covers_body``), later steps show it without
    asking: a term body's step asks no goal query at all, a tactic body without goals at its
    end no late one. (Lean answers at the body's start with the innermost term there: for
    ``(fun x => x) h`` the function's own type, for a body that failed at the top nothing.)

    Portable (see repl_pool.slot.portable_deadline): picklable and self-contained, so a pool
    may run it where the slot lives. The change, the barrier, the symbols query and the goal
    query go to Lean in one write (``Slot.elaborate_and_ask``): Lean answers them while it
    finishes the version, so they add no round trip after the barrier (asked one after
    another, the symbols cost ~1 ms after it on every step and the goals another 1-1.5 ms on
    every incomplete one), and a clean version's step does not wait for its goals. One goal
    query, not both: each costs Lean CPU that the version's elaboration competes with on two
    cores, whether or not its answer is shown (a short file's step took 0.13-0.45 ms longer
    with both in three interleaved in-process runs, 0.31 ms over MCP); the expected type of a
    tactic body is asked after the barrier, in the step that needs it."""

    text: str
    timeout: float
    goal_at: LspPos  # tactic goals: after the body's last code character
    term_at: LspPos  # expected type: the body's first non-space character
    # The target declaration's first line: the scope check needs no earlier symbol.
    symbols_from: int = 0
    tactic: bool = True  # the body opens a tactic block (lean_text.has_tactic_block)
    # The end of the identifier an explicit application ``@f x`` starts with (None: the body
    # starts otherwise): Lean answers an expected type asked at ``f`` with the range of ``f``
    # and the type expected of the application (``covers_body``).
    head_end: LspPos | None = None
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
                # Not waited for: only an information message looks like an incomplete proof
                # (e.g. a trace quoting "declaration uses 'sorry'").
                goals = []
            elif goal is not None and goal.status == "goals":
                goals = list(goal.goals)  # tactic goals at the end of the body
            elif self.expected is not None:  # else the whole body's expected type
                goals = [self.expected]
            else:  # not known yet: Lean's at the body's start, if it is the whole body's
                if self.tactic:  # a tactic body without goals at its end: ask now
                    term = await self._late_term_goal(slot, started)
                if term is not None and term.status == "goal" and self.covers_body(term):
                    learned = term.goal
                goals = [learned] if learned is not None else []
        took = time.perf_counter() - started
        return LeanAnswer(done.report, done.symbols, goals, took, learned)

    def covers_body(self, term: PlainTermGoal) -> bool:
        """Is ``term`` the expected type of the whole body? Lean answers with the innermost
        term at the position that is not the function of an application: for ``(fun x => x)
        h`` that is the parenthesized function (its own type), and for a body that failed to
        elaborate at the top (``And.intro h h`` with a type error) nothing. The whole body's
        answer has a range reaching the body's end, or that of the head of an explicit
        application (``@And.intro q p hq hp``: Lean's range is ``And.intro``)."""
        if term.range is None:
            return False
        start, end = term.range.start, term.range.end
        if (end.line, end.character) >= (self.goal_at.line, self.goal_at.character):
            return True
        return start == self.term_at and end == self.head_end

    async def _late_term_goal(self, slot: Slot, started: float) -> PlainTermGoal | None:
        """The expected type at the body's start, asked after the barrier: within what is
        left of the step's time, but never less than ``LATE_QUERY_SECONDS`` (the version is
        elaborated, so a query is short; a barrier at the end of the budget must not turn
        the step into a timeout). None: Lean answered it with an error."""
        left = self.timeout - (time.perf_counter() - started)
        timeout = max(left, LATE_QUERY_SECONDS)
        return await unless_refused(slot.plain_term_goal(self.term_at, timeout=timeout))


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """Elaborate ``text`` (a task file as written, wrappers and all) on the slot: its report.
    Portable, like LeanStep."""

    text: str
    timeout: float
    portable = True

    @property
    def deadline(self) -> float:
        return self.timeout + DEADLINE_SLACK

    async def __call__(self, slot: Slot) -> DocumentReport:
        return await slot.elaborate(self.text, timeout=self.timeout)


def _init_pattern(allowed_axioms: Sequence[str]) -> re.Pattern[str]:
    """What makes a step probed by its text (``Elaborator._probed``): a name of INIT_AXIOMS
    outside the allow-list, or a word of NATIVE_WORDS."""
    allowed = {name_parts(name) for name in allowed_axioms}
    names = [re.escape(name_parts(n)[-1]) for n in INIT_AXIOMS if name_parts(n) not in allowed]
    if not names:
        return re.compile(r"(?!)")  # every one allowed: nothing to look for
    words = "|".join(re.escape(word) for word in NATIVE_WORDS)
    return re.compile("|".join(names) + rf"|(?<![\w'.])(?:{words})(?![\w'])")


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
        pool: WarmPool,
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
        self._memos: dict[str, TaskMemo] = {}  # task id -> what is known of it
        # INIT_AXIOMS outside the allow-list, and NATIVE_WORDS (``_probed``)
        self._init_pattern = _init_pattern(self.allowed_axioms)

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
        memo = self._memos.get(task.id)
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
                or self._unlisted([*self.library_axioms, *axioms_declared(task.text, start, end)])
            ),
            init_outside=(
                self._init_pattern.search(task.text, 0, task.span.start) is not None
                or self._init_pattern.search(task.text, end) is not None
            ),
        )
        return self._memos.setdefault(task.id, made)  # (a concurrent first use made one too)

    def _key(self, memo: TaskMemo, lean_text: str) -> PoolKey:
        """The task's pool key (the header never changes: only the body is edited)."""
        if memo.key is None:
            memo.key = self.pool.key_for(lean_text, memo.view.environment)
        return memo.key

    async def elaborate(
        self, task: Task, body: str, timers: Sequence[StepTimer], holder: str | None
    ) -> Elaborated:
        """Elaborate the task with ``body`` on a warm slot: report, scope verdict, goals."""
        memo = self._memos.get(task.id) or await self.memo(task)
        view = memo.view
        text = task.with_body(body)
        lean_text, probe_line = self._lean_document(task, memo, text)
        key = self._key(memo, lean_text)
        body_start, body_end = task.span.start, task.span.start + len(body)
        index = LineIndex.sharing(memo.lines, body_start, text)
        first, last = code_span(text, body_start, body_end)
        explicit = text.startswith("@", first) and first + 1 < last
        if explicit:
            first += 1  # Lean has no term info on the `@` of `@f x`; the application starts here
        goal_at = view.lsp_to_lean(index.lsp_of_offset(last))
        term_at = view.lsp_to_lean(index.lsp_of_offset(first))
        assert goal_at is not None  # the body is after the cut
        assert term_at is not None
        # `@f x`: Lean's answer at `f` has the range of `f` (``LeanStep.covers_body``). Not
        # for a body starting with a plain identifier: that may be an operand (`h ▸ e`), whose
        # answer at the start is its own type.
        # Nor when the application may itself be an operand (`@f x ▸ e`, `@f x |>.g`): Lean
        # elaborates it without an expected type and answers at `f` with `f`'s own type.
        # Only while the expected type is still to be learned (``covers_body``): the scan of
        # the arguments was ~60 µs of every later step's time before Lean heard of it.
        learning = explicit and memo.expected is None
        head = next(lean_tokens(text, first), None) if learning else None
        head_end = (
            view.lsp_to_lean(index.lsp_of_offset(head.end))
            if head is not None
            and head.kind is TokenKind.IDENT
            and head.end <= last
            and _only_arguments(text, head.end, last)
            else None
        )
        # The scope check looks at the target and what follows it (check_scope).
        decl_at = view.lsp_to_lean(index.lsp_of_offset(task.span.decl_start))
        symbols_from = decl_at.line if decl_at is not None else 0
        step = LeanStep(
            lean_text, self.step_timeout, goal_at, term_at, symbols_from,
            tactic=has_tactic_block(body), head_end=head_end, expected=memo.expected,
        )  # fmt: skip
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
        lean_report, axioms = answer.report, None
        if probe_line is not None:
            lean_report, axioms = _split_probe(lean_report, probe_line, memo.displaced)
        report = view.report_from_lean(lean_report)
        if task.wrappers:
            report = _without_scope_artifacts(task, memo, body, report, index, body_end, len(text))
        complete = is_complete(report, index, task.span.decl_start, body_end)
        if task.wrappers:
            if memo.written_error is None and memo.written_tries < WRITTEN_TRIES:
                memo.written_tries += 1
                memo.written_error = await self._written_error(task, memo, key, timers, holder)
            if memo.written_error:
                complete = False
                at = index.lsp_of_offset(task.span.decl_start)
                report = _with_warning(report, at, memo.written_error)
        if complete and axioms is not None:
            objection = probe_objection(axioms, task.spec.theorem, self.allowed_axioms)
            if objection is not None:
                complete = False
                report = _with_warning(report, index.lsp_of_offset(task.span.decl_start), objection)
        if complete and (forbidden := forbidden_constructs(body)):
            # The verdict's own check, so a session never calls complete what it rejects.
            complete = False
            report = _with_warning(
                report,
                index.lsp_of_offset(task.span.decl_start),
                FORBIDDEN_NOTE + "; ".join(forbidden),
            )
        slow = (
            self.verdict_seconds is not None and answer.lean_s > SLOW_SHARE * self.verdict_seconds
        )
        if complete and slow:
            note = SLOW_NOTE.format(took=answer.lean_s, limit=self.verdict_seconds)
            report = _with_warning(report, index.lsp_of_offset(task.span.decl_start), note)
        lean_index = LineIndex(lean_text) if view.prefixed else index
        flat = view.symbols_from_lean(flatten_symbols(answer.symbols, lean_index))
        if memo.suffix is None and body == task.body:
            memo.suffix = suffix_structure(flat, body_end, len(text))
        rejected = check_scope(
            text=text,
            body_start=body_start,
            body_end=body_end,
            decl_start=task.span.decl_start,
            symbols=flat,
            expected_suffix=memo.suffix or [],
            diagnostics=report.diagnostics,
        )
        ok = rejected is None
        goals = answer.goals if ok and not complete and answer.goals is not None else []
        if answer.expected is not None:
            memo.expected = answer.expected  # only the body changes: so it stays
        if body == task.body:
            report = _with_task_file_errors(report, index, body_start, body_end)
            if complete and ok:  # the verdict's own rule (PLACEHOLDER_PROVES)
                complete = False
                at = index.lsp_of_offset(task.span.decl_start)
                report = _with_warning(report, at, PLACEHOLDER_PROVES)
        return Elaborated(text, index, report, goals, rejected, complete and ok)

    async def _written_error(
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

    def _lean_document(self, task: Task, memo: TaskMemo, text: str) -> tuple[str, int | None]:
        """Lean's session document for the task-file ``text`` — the view's document, the
        wrappers unwrapped, and for a probed step (``_probed``) ``#print axioms`` of the
        target (``SORRY_HELPER``) — and the line of its probe (None: not probed). The probe
        is appended, so no position moves — or, in a task file that stops with ``#exit``
        after the target, inserted right before that ``#exit`` (nothing after it is
        elaborated, so nothing after it is reported either)."""
        lean_text = memo.view.to_lean(task.unwrapped(text))
        if not self._probed(task, memo, text):
            return lean_text, None
        # Full names: `#print axioms` prints them relative to the namespaces open where it runs
        # (`[choice]` after `open Classical`), and they are compared with the allow-list.
        probe = (
            "set_option pp.fullNames true in\n"
            f"#print axioms _root_.{escape_name(task.spec.theorem)}\n"
        )
        if memo.exit_at is None:
            lean_text = lean_text + "\n\n" + probe
            return lean_text, lean_text.rstrip("\n").count("\n")
        # The probe gets a line of its own (the `#exit` may follow other text on its line).
        probed, at = insert_before_exit(lean_text, task.text, memo.exit_at, "\n" + probe)
        return probed, lean_text.count("\n", 0, at) + 1

    def _unlisted(self, declared: Sequence[str]) -> bool:
        """Is one of the ``declared`` axioms (full names, ``axioms_declared``) outside the
        allow-list? Compared by full name, as the verdict does: ``Demo.sound`` is not
        ``Quot.sound``. The root ``sorryAx`` is left to SORRY_HELPER."""
        allowed = {name_parts(name) for name in self.allowed_axioms}
        return any(
            name_parts(name) not in allowed and name_parts(name) != ("sorryAx",)
            for name in declared
        )

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
        memo = self._memos.get(task.id) or await self.memo(task)
        pos = memo.view.lsp_to_lean(LineIndex(text).to_lsp(at))
        if pos is None:
            return GoalsResult(line=at.line, column=at.column, goals=[], goal_status="no_goal",
                               term_goal=None, structured=[])  # fmt: skip
        lean_text = self._lean_document(task, memo, text)[0]
        key = self._key(memo, lean_text)
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
