"""The Lean part of one proof step, as one self-contained, picklable operation on a pool slot
(``LeanStep``, made by ``step_for``: where the goals are asked): the edit, the barrier, the
document symbols and — when Lean's report could mean an incomplete proof — the goals; and the
task file as written, elaborated once (``WrittenFile``). A local pool runs them on its slot;
a ``RayPool`` ships them to the node, so a step is one round trip.

Must not decide: the scope check, the completeness status and the timers stay with the
elaborator (elaborate.py). Must stay picklable: plain fields, no session or pool inside.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    COMMENT_KINDS,
    TRACE_EVENT,
    DocumentReport,
    LineIndex,
    LspPos,
    PlainTermGoal,
    TokenKind,
    has_tactic_block,
    lean_tokens,
)
from repl_pool import Slot, unless_refused

from ..tasks import Task, code_span
from .prefix import TaskView
from .session import leaves_proof_open

# The least time a goal query asked after a step's barrier gets (``LeanStep``), whatever is
# left of the step's own time: the version is elaborated by then, so the query is short.
LATE_QUERY_SECONDS = 1.0


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
        sys.audit(TRACE_EVENT, "step done on its slot")
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
    """The Lean part of the step that makes ``body`` the task's (``text``: the task file with
    it, ``index`` its lines; ``lean_text``: the session document): where its goals are asked,
    and what the scope check needs of Lean's symbols. ``expected``: the whole body's expected
    type, if an earlier step learned it."""
    body_start, body_end = task.span.start, task.span.start + len(body)
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
    # The scope check looks at the target and what follows it (check_scope).
    decl_at = view.lsp_to_lean(index.lsp_of_offset(task.span.decl_start))
    symbols_from = decl_at.line if decl_at is not None else 0
    return LeanStep(
        lean_text, timeout, goal_at, term_at, symbols_from,
        tactic=has_tactic_block(body), head_end=head_end, expected=expected,
    )  # fmt: skip


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
