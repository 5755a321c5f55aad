"""Stopping on SIGTERM/SIGINT, and not being interrupted while stopping.

Open ``stop_signals()`` around everything that must end cleanly and run ``on_first`` in its task
group: later signals are then absorbed instead of raising KeyboardInterrupt mid-cleanup."""

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
    """Ignore stop signals once the receiver is closed, so exiting is not interrupted."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
