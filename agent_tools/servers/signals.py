"""Stopping on SIGTERM/SIGINT, and not being interrupted while stopping.

Used by `leanrig serve`, `leanrig run` and `leanrig lsp`. A command opens ``stop_signals()``
around everything that must end cleanly (its task group and that group's cleanup: agents and
Lean killed, results written) and runs ``on_first`` in the group. The first signal starts the
stop; while the receiver is open, later ones are queued there and never reach Python's default
action. (When the receiver closed with the first signal's task, a second Ctrl-C — an impatient
user, or `timeout` passing its own SIGINT on — raised KeyboardInterrupt in the middle of the
cleanup: a traceback and no resume line, or a runner hung for good with a sandboxed Lean left
behind.)
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager

import anyio

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_signals() -> AbstractContextManager[AsyncIterator[signal.Signals]]:
    """SIGTERM and SIGINT, received for as long as the block runs."""
    return anyio.open_signal_receiver(*STOP_SIGNALS)


async def on_first(signals: AsyncIterator[signal.Signals], stop: Callable[[int], None]) -> None:
    """``stop(signum)`` on the first signal; the receiver keeps absorbing the rest."""
    async for signum in signals:
        stop(int(signum))
        return


def ignore_stop_signals() -> None:
    """After a stop has finished (the receiver closed): what is left is saying so and exiting,
    which a signal still on its way must not turn into a KeyboardInterrupt."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
