"""Structured concurrency helpers (anyio task groups, first error unwrapped); nothing else."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio

from lsp_bridge import single_errors

A = TypeVar("A")
B = TypeVar("B")


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two things concurrently (structured: a task group), returning both results."""
    results: dict[int, Any] = {}

    async def run(i: int, awaitable: Awaitable[Any]) -> None:
        results[i] = await awaitable

    with single_errors():
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, 0, first)
            tg.start_soon(run, 1, second)
    return results[0], results[1]


async def done(value: A) -> A:
    """An awaitable that is already finished (for `both` with one side skipped)."""
    return value
