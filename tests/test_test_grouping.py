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


def verbose_pytest(*args: str) -> str:
    """Run pytest on ``args`` in the repository, each test listed; its output, once it passes."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-v", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout


def test_each_module_runs_on_one_worker_under_loadgroup() -> None:
    # Three quick modules: what is checked is where they run.
    modules = ["tests/test_results.py", "tests/test_completeness.py", "tests/test_node_routing.py"]
    out = verbose_pytest("-n", "2", "--dist", "loadgroup", *modules)
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module in re.findall(r"\[(gw\d)\].*?PASSED (tests/test_\w+\.py)", out):
        workers[module].add(worker)
    assert set(workers) == set(modules), out[-2000:]
    assert all(len(w) == 1 for w in workers.values()), dict(workers)


def test_make_test_s_workers_take_groups_in_the_suite_s_order() -> None:
    """Under `make suite`'s flags, groups start in collection order (tests/conftest.py sorts the
    longest first), not reordered by test count as xdist does by default."""
    (command,) = [
        line.split()
        for line in subprocess.run(
            ["make", "-n", "suite"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.splitlines()
        if "pytest" in line
    ]
    flags = [flag for flag in command[1:] if flag != "-q"]  # verbose_pytest lists each test
    flags[flags.index("-n") + 1] = "1"  # one worker: it runs the groups one after another
    # Fewest tests first: xdist's default order would run test_node_routing (7) first.
    modules = ["tests/test_completeness.py", "tests/test_results.py", "tests/test_node_routing.py"]
    out = verbose_pytest(*flags, *modules)
    ran = re.findall(r"PASSED (tests/test_\w+\.py)", out)
    assert list(dict.fromkeys(ran)) == modules, out[-2000:]
