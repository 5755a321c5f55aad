"""`leanrig serve` with a steady-state profiler (for bench/step_profile.py): SIGUSR1 starts
cProfile on the server's main thread (its event loop), SIGUSR2 stops it and writes the stats
to the file named by ``LEANRIG_PROFILE_OUT``. Startup and shutdown stay out of the profile; the
clock is the thread's CPU time.

    LEANRIG_PROFILE_OUT=out.prof python -m bench.profiled_serve serve --suite ...
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time
from types import FrameType


def main() -> int:
    # CPU time of the serving thread, not wall time: a write to a pipe that wakes Lean or the
    # client can be preempted by it on a busy 2-core machine, which a wall clock would charge
    # to the write.
    profiler = cProfile.Profile(time.thread_time)
    out = os.environ["LEANRIG_PROFILE_OUT"]

    def start(_signum: int, _frame: FrameType | None) -> None:
        profiler.enable()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    from agent_tools.cli import main as leanrig

    return leanrig(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
