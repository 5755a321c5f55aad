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


# `-Dserver.reportDelayMs`: Lean's pause between progress/diagnostics reports (default 200).
# 0 reports every snapshot at once: ~10 messages per edit, each waking this process on the
# cores Lean works on. At 2 ms, measured interleaved with the bootstrap Lean (raw client): the
# demo task 6.8-7.8 → 5.9-6.8 ms per edit, with 100 declarations before it 22.5 → 17.7 ms,
# 1000 unchanged; a one-theorem file 4.9-5.9 → 4.8-5.8 ms (1 ms: 4.3-5.3, but ~1.6x the
# messages); leanrig's MCP step 11.2 → 10.2-10.7 ms. Benchmarks give raw clients the same.
REPORT_DELAY_MS = 2
