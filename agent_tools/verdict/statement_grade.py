"""The verdict on a statement attempt: valid on its own, then equivalent to the hidden reference.

The reference is read here, after the attempt, into the grading file only: nothing of it may
reach a session or a reason."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio

from lsp_bridge import name_parts

from ..tasks import Suite, Task, reference_statement
from .equivalence import Equivalence, EquivalenceGrader
from .forbidden import effects_when_elaborated
from .verifier import Verifier

# Declared beside the target, in its namespace.
REFERENCE_NAME = "leanrig_reference"


@dataclass(frozen=True, slots=True)
class StatementVerdict:
    accepted: bool  # valid and shown equivalent to the reference
    reasons: tuple[str, ...]
    statement: str
    equivalence: Equivalence | None  # None: the statement is not valid
    elapsed_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "reasons": list(self.reasons),
            "statement": self.statement,
            "equivalence": self.equivalence.to_json() if self.equivalence else None,
            "elapsed_ms": round(self.elapsed_ms, 1),
        }


def grading_file(task: Task, statement: str, reference: str) -> tuple[str, str, int]:
    """The task file with ``statement`` and the reference theorem right after the target:
    the text, the reference's full name, and the offset just after it."""
    restated = task.restated(statement)
    namespace = name_parts(task.spec.theorem)[:-1]
    full = ".".join((*namespace, REFERENCE_NAME))
    declaration = f"\n\ntheorem _root_.{full}{reference}:={task.body}\n"
    at = restated.span.end
    text = restated.text[:at] + declaration + restated.text[at:]
    return text, full, at + len(declaration)


class StatementGrader:
    """Grades statement attempts of ``suite``: ``verifier`` checks, ``equivalence`` proves."""

    def __init__(self, suite: Suite, verifier: Verifier, equivalence: EquivalenceGrader) -> None:
        self.suite = suite
        self.verifier = verifier
        self.equivalence = equivalence

    async def grade(self, task: Task, statement: str, budget_seconds: float) -> StatementVerdict:
        """The verdict on ``statement`` for ``task``; ``budget_seconds`` per direction.
        The equivalence counts only if the statement's own check accepts."""
        started = time.perf_counter()
        acting = effects_when_elaborated(statement)
        if acting:
            return StatementVerdict(False, tuple(acting), statement, None, _ms(started))
        path = self.suite.reference_path(task)
        reference = reference_statement(path.read_text(encoding="utf-8"))
        text, name, insert_at = grading_file(task, statement, reference)
        outcomes: dict[str, Any] = {}

        async def check() -> None:
            # The equivalence's batches check the statement's axioms.
            outcomes["check"] = await self.verifier.verify(
                task.statement_view(),
                task.with_statement(statement),
                statement=True,
                statement_axioms=False,
            )

        async def equivalence() -> None:
            outcomes["shown"] = await self.equivalence.grade(
                text, name, task.spec.theorem, insert_at=insert_at, budget_seconds=budget_seconds
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(check)
            tg.start_soon(equivalence)
        checked, shown = outcomes["check"], outcomes["shown"]
        if not checked.accepted:
            return StatementVerdict(False, checked.reasons, statement, None, _ms(started))
        reasons: tuple[str, ...] = ()
        if shown.outcome != "equivalent":
            reasons = (_not_shown(shown),)
        return StatementVerdict(
            shown.outcome == "equivalent", reasons, statement, shown, _ms(started)
        )


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _not_shown(shown: Equivalence) -> str:
    """Why a valid statement is not accepted, without a word of the reference."""
    if shown.outcome == "invalid":
        return "the grader could not elaborate the pair: " + "; ".join(shown.reasons)
    directions = {"reference ⇒ statement": shown.forward, "statement ⇒ reference": shown.backward}
    missing = [name for name, d in directions.items() if d is None or d.outcome != "proved"]
    return "not shown equivalent to the reference: no proof of " + " nor ".join(missing)
