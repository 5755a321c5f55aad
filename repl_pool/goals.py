"""The goals at a position of a document: what `get_goals` asks, with the slot's health rules
applied here, where the processes are owned (not in the session layer)."""

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
    term: PlainTermGoal | None  # None: Lean answered the query with an error of its own
    structured: list[InteractiveGoal] | None  # likewise


async def unless_refused(query: Awaitable[T]) -> T | None:
    """``query``'s answer, or None when Lean answered it with an error (``lean_refused``)."""
    try:
        return await query
    except LeanrigError as exc:
        if lean_refused(exc):
            return None
        raise


async def goals_in(slot: Slot, text: str, pos: LspPos, *, timeout: float) -> GoalsAnswer:
    """The tactic goals, the expected type and the structured goals at ``pos`` once ``text``
    is the holder's document (sent first unless it already is).

    A document whose worker stopped (a crash) fails a query alone, and so would the pool's
    retry of it: the text is sent again, which restarts the worker, and the goals asked once
    more. The expected type and the structured goals add to the goals: an error Lean answers
    one of them with leaves it out (e.g. its pretty printer failed on the term)."""
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
