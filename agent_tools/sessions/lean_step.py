"""The Lean part of a proof step as one picklable slot operation (``LeanStep``, ``WrittenFile``).

Must stay picklable (no session or pool inside) and leave scope, completeness, timing to others."""

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
