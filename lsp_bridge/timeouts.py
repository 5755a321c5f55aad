"""Every deadline of a Lean server conversation, in one frozen object (seconds)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timeouts:
    spawn: float = 10.0  # process start until `initialize` answered
    request: float = 30.0  # any single request (goals, hover, rpc)
    barrier: float = 120.0  # a document version fully elaborated
    shutdown: float = 3.0  # polite shutdown before the process group is killed
    acquire: float = 60.0  # waiting for a pool slot


DEFAULT_TIMEOUTS = Timeouts()


# `-Dserver.reportDelayMs`: Lean's pause between progress/diagnostics reports (Lean's default 200).
REPORT_DELAY_MS = 2
