"""The goals at a position of a document, with the slot's health rules applied here."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from lsp_bridge import (
    ElaborationFailed,
    InteractiveGoal,
    LeanrigError,
    LspPos,
    PlainGoal,
    PlainTermGoal,
    WorkerCrashed,
    WorkerExited,
)

from .slot import Slot, lean_refused

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GoalsAnswer:
    plain: PlainGoal
    term: PlainTermGoal | None  # None: Lean refused the query
    structured: list[InteractiveGoal] | None  # None: Lean refused the query


async def unless_refused(query: Awaitable[T]) -> T | None:
    """``query``'s answer, or None when Lean refused it (``lean_refused``)."""
    try:
        return await query
    except LeanrigError as exc:
        if lean_refused(exc):
            return None
        raise


async def goals_in(slot: Slot, text: str, pos: LspPos, *, timeout: float) -> GoalsAnswer:
    """The plain, expected-type and structured goals at ``pos`` once ``text`` is the document.

    A stopped worker is restarted by resending; a refused optional query is left out."""
    if slot.text() != text:
        await slot.elaborate(text, timeout=timeout)
    try:
        plain = await slot.plain_goal(pos, timeout=timeout)
    except (WorkerCrashed, WorkerExited, ElaborationFailed):
        await slot.elaborate(text, timeout=timeout)
        plain = await slot.plain_goal(pos, timeout=timeout)
    term = await unless_refused(slot.plain_term_goal(pos, timeout=timeout))
    structured = await unless_refused(slot.interactive_goals(pos, timeout=timeout))
    return GoalsAnswer(plain, term, structured)
