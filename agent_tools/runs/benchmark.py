"""`run_benchmark`: a run's attempts here or, with ``--ray``, on a Ray cluster."""

from __future__ import annotations

import shutil

from .cluster_run import ClusterAttempts
from .options import RunOptions
from .progress import RunSummary
from .runner import run_attempts, start_run


async def run_benchmark(options: RunOptions) -> RunSummary:
    """Run ``options.agent`` over the suite until every attempt has its line; raises `RunError`."""
    start = await start_run(options)
    try:
        if start.runner.options.ray is None:  # options as resumed
            return await run_attempts(start, start.runner.attempt)
        async with ClusterAttempts.joined(start.runner) as cluster:
            return await run_attempts(start, cluster.attempt)
    finally:
        shutil.rmtree(start.runner.socket_root, ignore_errors=True)
