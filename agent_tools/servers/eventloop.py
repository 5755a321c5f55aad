"""The event loop a leanrig server process runs on: anyio on asyncio, with uvloop when it is
installed (a dependency on Linux and macOS).

A proof step is short and message-bound (a tool call in, ~10 LSP frames from Lean, a reply
out), so the loop's own cost is a large share of the server's time: with the standard loop,
asyncio and anyio took about 40 % of the server's CPU per step (cProfile); uvloop runs the
loop, its timers and pipe I/O in C (bench: server CPU per step in the closing note of issue
13). Nothing here depends on the loop: without uvloop the standard one runs. Used by `leanrig
serve`, `leanrig lsp` and `leanrig run` (whose process hosts each attempt's service).

One difference matters to a server on stdio: libuv makes fds 0-2 blocking in every child it
spawns, and the flag is shared with any process holding the same open file description. A
server therefore takes its wire off fds 0 and 1 before it starts children
(fdstreams.claimed_stdio), and one-shot runs get the null device as stdin.
"""

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
    """Before a server starts serving: collect what starting up left behind, then move every
    object alive now (imported modules, the SDK's models, the suite, the warm pool) out of
    the collector's sight. A full collection scanned all of them: 60-100 ms of this process
    stopped, a few times a minute under steady proof steps, each landing on some step. What
    a session allocates from now on is collected as before."""
    gc.collect()
    gc.freeze()
