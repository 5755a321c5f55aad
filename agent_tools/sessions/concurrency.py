"""Structured concurrency helpers (anyio task groups, first error unwrapped); nothing else."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio

from lsp_bridge import single_errors

A = TypeVar("A")
B = TypeVar("B")


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two things concurrently (structured: a task group), returning both results.
    ``second`` runs in a child task, ``first`` in the caller's (one task per call, not two:
    this is on every proof step)."""
    results: list[Any] = []

    async def run() -> None:
        results.append(await second)

    with single_errors():
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            one = await first
    return one, results[0]


async def done(value: A) -> A:
    """An awaitable that is already finished (for `both` with one side skipped)."""
    return value
