"""docs/scale-out.md as a user types it: `ray start --head …`, then `leanrig serve --suite
lean_project/suites/demo --jsonrpc --ray auto` from the user's working directory. (The page's
sweep — `doctor`, `run`, `report` with `--ray auto` — runs as typed in tests/test_run_ray.py,
on a two-node cluster.)

Two things differ from the page, both to keep this cluster apart from any other on the machine
(a developer's own, or another test's): ``RAY_TMPDIR`` points Ray at a private temp directory
(where `ray start` records the address that ``--ray auto`` then finds), and ``--port`` takes a
free port instead of 6379. `ray stop` is not used: it stops every Ray on the machine. The
cluster's processes are the ones whose environment carries that ``RAY_TMPDIR``; the test
kills them and checks none is left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import psutil
import pytest

from .test_as_typed import (
    ROOT,
    free_port,
    jsonrpc_stdio,
    ledgers,
    prove_over_jsonrpc,
)
from .test_as_typed import (
    cwd as cwd,  # the fixture: the demo suite at its README path
)

pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install .[ray])")

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

RAY = ROOT / ".venv" / "bin" / "ray"


def cluster_processes(tmpdir: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("RAY_TMPDIR") == tmpdir:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_serve_without_a_cluster_says_so_in_one_line(cwd: Path, tmp_path: Path) -> None:
    """(First in this module, and the Ray modules share a worker: `--ray auto` finds any
    cluster running on the machine, a later test's included.)

    `--ray auto` with no cluster running printed a 75-line exception group ending in Ray's
    advice to set `--address` (a flag leanrig does not have), exit 1 (a docs sweep)."""
    env = {**os.environ, "RAY_TMPDIR": str(tmp_path)}  # no cluster recorded there
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "leanrig"), "serve", "--suite", "lean_project/suites/demo",
         "--jsonrpc", "--ray", "auto"],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("leanrig:")]
    assert "cannot join a Ray cluster at 'auto'" in line and "--ray HOST:PORT" in line, line


@pytest.fixture
def ray_head(cwd: Path) -> Iterator[dict[str, str]]:
    """`ray start --head --resources '{"lean_slots": 4}' --include-dashboard=false` in ``cwd``;
    the environment a user's shell would then have (with this cluster's RAY_TMPDIR)."""
    # Short: Ray puts unix sockets under it (at most 107 bytes a path).
    tmpdir = tempfile.mkdtemp(prefix="lr-ray-", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": tmpdir}
    env.pop("RAY_ADDRESS", None)
    argv = [str(RAY), "start", "--head", "--port", str(free_port()),
            "--resources", '{"lean_slots": 4}', "--include-dashboard=false"]  # fmt: skip
    try:
        started = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                 timeout=120, check=False)  # fmt: skip
        assert started.returncode == 0, started.stdout + started.stderr
        yield env
    finally:
        procs = cluster_processes(tmpdir)
        for proc in procs:
            try:
                proc.kill()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=30)
        shutil.rmtree(tmpdir, ignore_errors=True)
        assert alive == [], f"Ray processes outlived the test: {alive}"


@pytest.mark.anyio
async def test_serve_on_the_ray_cluster_ray_start_made(
    cwd: Path,
    ray_head: dict[str, str],
) -> None:
    async with jsonrpc_stdio(cwd, "--ray", "auto", env=ray_head) as (rpc, stderr):
        verdict = await prove_over_jsonrpc(rpc)
        status = await rpc.call("server_status", timeout=60)
    assert verdict["accepted"] is True, verdict
    # Quiet unless asked: no Ray warning, no failed stop of its actor at shutdown.
    said = b"".join(stderr).decode("utf-8", "replace")
    assert "WARNING" not in said and "stop_failed" not in said, said[-3000:]
    # The pool really was on the cluster: one node, holding the four lean_slots it started with.
    (node,) = status["nodes"]
    assert node["slots"] == 4, node
    (ledger,) = ledgers(cwd)
    steps = [orjson.loads(line) for line in ledger.read_bytes().splitlines()]
    lean_steps = [e for e in steps if e["tool"] in ("open_task", "set_proof")]
    assert lean_steps and all(e.get("node") == node["node_id"] for e in lean_steps), lean_steps
    # No Lean process the cluster started outlives serve (its actor's reaper kills them once
    # the driver is gone; the cluster itself is stopped by the fixture).
    with anyio.fail_after(60):
        while lean_left := [p for p in cluster_processes(ray_head["RAY_TMPDIR"])
                            if p.name() == "lean"]:  # fmt: skip
            await anyio.sleep(0.2)
    assert lean_left == []
