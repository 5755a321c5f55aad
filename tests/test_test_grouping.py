"""The suite's scheduling under `make test` (`-n 3 --dist loadgroup`): a module's tests run on
one worker, as do the modules sharing a group (tests/conftest.py SHARED_WORKER;
pytest-dev/pytest-xdist#1386)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_each_module_runs_on_one_worker_under_loadgroup() -> None:
    # Three quick modules: what is checked is where they run.
    modules = ["tests/test_results.py", "tests/test_completeness.py", "tests/test_node_routing.py"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            *modules,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d)\].*?PASSED (tests/test_\w+\.py)", done.stdout):
        workers[module].add(worker)
    assert set(workers) == set(modules), done.stdout[-2000:]
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
