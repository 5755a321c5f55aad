"""Questions about a document that are not proof steps (hover, completions, code actions,
definitions): the text made the holder's document, fully elaborated, then each question asked
about that version — with the slot's health rules applied here, where the processes are owned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from lsp_bridge import (
    DocQuery,
    DocumentReport,
    ElaborationFailed,
    RequestTimeout,
    WorkerCrashed,
    WorkerExited,
)

from .slot import Slot


async def ask_in(
    slot: Slot, text: str, queries: Sequence[DocQuery], *, timeout: float, report: bool = True
) -> tuple[DocumentReport | None, list[Any]]:
    """``text``'s report as the holder's document (sent first unless it already is) and each
    query's answer (an optional query's error in its place), all within ``timeout``. With
    ``report=False`` a document already holding ``text`` gets no barrier and no report (None):
    a hover or a completion is answered about the current version as Lean gets there, and
    needs no final diagnostics.

    A document whose worker stopped fails a query alone, and so would the pool's retry: the
    text is sent again, which restarts the worker, and the questions asked once more."""
    try:
        with anyio.fail_after(timeout):
            try:
                resend = slot.text() != text
                return await _ask_once(slot, text, queries, timeout, resend, report)
            except (WorkerCrashed, WorkerExited, ElaborationFailed):
                return await _ask_once(slot, text, queries, timeout, True, report)
    except TimeoutError:
        raise RequestTimeout("a question about the document", timeout) from None


async def _ask_once(
    slot: Slot, text: str, queries: Sequence[DocQuery], timeout: float, resend: bool,
    report: bool,
) -> tuple[DocumentReport | None, list[Any]]:  # fmt: skip
    if resend:  # the change and the questions in one write
        return await slot.elaborate_with(text, queries, timeout=timeout)
    answers: list[Any] = [None] * len(queries)
    reports: list[DocumentReport | None] = [None]

    async def barrier() -> None:
        reports[0] = await slot.wait(timeout=timeout)

    async def one(i: int, query: DocQuery) -> None:
        answers[i] = await slot.ask(query, timeout=timeout)

    # The barrier, when a report is wanted, and the questions at once: Lean answers each about
    # the version it has (the current one: nothing else changes the holder's document
    # meanwhile), so none waits for another's round trip.
    async with anyio.create_task_group() as tg:
        if report:
            tg.start_soon(barrier)
        for i, query in enumerate(queries):
            tg.start_soon(one, i, query)
    return reports[0], answers
