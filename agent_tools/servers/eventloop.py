"""The event loop a leanrig server process runs on: anyio on asyncio, with uvloop if installed."""

from __future__ import annotations

import gc
import importlib.util
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple

import anyio

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


def has_uvloop() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def run_event_loop(func: Callable[[*Ts], Awaitable[T]], *args: *Ts) -> T:
    """``anyio.run(func, *args)`` on the fastest loop available."""
    return anyio.run(func, *args, backend_options={"use_uvloop": has_uvloop()})


def freeze_heap() -> None:
    """Collect startup garbage, then freeze every live object out of the collector's sight.

    Call once, just before a server starts serving."""
    gc.collect()
    gc.freeze()
