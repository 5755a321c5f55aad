"""Stopping on SIGTERM/SIGINT, and not being interrupted while stopping.

Open ``stop_signals()`` around everything that must end cleanly and run ``on_first`` in its task
group: later signals are absorbed, and ignored once the block ends, instead of raising
KeyboardInterrupt mid-cleanup or in the event loop's teardown."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager

import anyio

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_signals() -> Iterator[AsyncIterator[signal.Signals]]:
    """SIGTERM and SIGINT, received for as long as the block runs, then ignored (still on the
    event loop: the process is stopping)."""
    try:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            yield signals
    finally:
        _ignore_stop_signals()


async def on_first(signals: AsyncIterator[signal.Signals], stop: Callable[[int], None]) -> None:
    """``stop(signum)`` on the first signal; the receiver keeps absorbing the rest."""
    async for signum in signals:
        stop(int(signum))
        return


def _ignore_stop_signals() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
