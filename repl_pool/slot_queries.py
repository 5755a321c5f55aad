"""LSP queries about a document on a pool slot that are not proof steps (hover, completions)."""

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
    """``text``'s report as the holder's document and each query's answer, within ``timeout``.

    An optional query's error takes its answer's place. ``report=False``: no barrier and no
    report (None) when the document already holds ``text``. A stopped worker is restarted."""
    try:
        with anyio.fail_after(timeout):
            try:
                resend = slot.text() != text
                return await _ask_once(slot, text, queries, timeout, resend, report)
            except (WorkerCrashed, WorkerExited, ElaborationFailed):
                return await _ask_once(slot, text, queries, timeout, True, report)
    except TimeoutError:
        raise RequestTimeout("a query about the document", timeout) from None


async def _ask_once(
    slot: Slot,
    text: str,
    queries: Sequence[DocQuery],
    timeout: float,
    resend: bool,
    report: bool,
) -> tuple[DocumentReport | None, list[Any]]:
    if resend:  # the change and the queries in one write
        return await slot.elaborate_with(text, queries, timeout=timeout)
    answers: list[Any] = [None] * len(queries)
    reports: list[DocumentReport | None] = [None]

    async def barrier() -> None:
        reports[0] = await slot.wait(timeout=timeout)

    async def one(i: int, query: DocQuery) -> None:
        answers[i] = await slot.ask(query, timeout=timeout)

    # All at once: nothing else changes the holder's document meanwhile.
    async with anyio.create_task_group() as tg:
        if report:
            tg.start_soon(barrier)
        for i, query in enumerate(queries):
            tg.start_soon(one, i, query)
    return reports[0], answers
