"""docs/scale-out.md as typed: `ray start --head …`, then `leanrig serve … --ray auto`. A private
``RAY_TMPDIR`` and a free port keep this cluster apart from any other; its processes (found by
that ``RAY_TMPDIR``, as `ray stop` would stop every Ray) are killed and checked gone."""

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
    cwd as cwd,
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
    """`--ray auto` with no cluster: exit 2 and one line naming `--ray HOST:PORT`. First in the
    module, before any cluster (a later test's included) is running."""
    env = {**os.environ, "RAY_TMPDIR": str(tmp_path)}  # no cluster recorded there
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "leanrig"),
            "serve",
            "--suite",
            "lean_project/suites/demo",
            "--jsonrpc",
            "--ray",
            "auto",
        ],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("leanrig:")]
    assert "cannot join a Ray cluster at 'auto'" in line and "--ray HOST:PORT" in line, line


@pytest.fixture
def ray_head(cwd: Path) -> Iterator[dict[str, str]]:
    """`ray start --head` with four lean_slots in ``cwd``; the environment a user's shell would
    then have."""
    # Short: Ray puts unix sockets under it (at most 107 bytes a path).
    tmpdir = tempfile.mkdtemp(prefix="lr-ray-", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": tmpdir}
    env.pop("RAY_ADDRESS", None)
    argv = [
        str(RAY),
        "start",
        "--head",
        "--port",
        str(free_port()),
        "--resources",
        '{"lean_slots": 4}',
        "--include-dashboard=false",
    ]
    try:
        started = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
        )
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
    said = b"".join(stderr).decode("utf-8", "replace")
    assert "WARNING" not in said and "stop_failed" not in said, said[-3000:]
    # The pool was on the cluster: one node, holding its four lean_slots.
    (node,) = status["nodes"]
    assert node["slots"] == 4, node
    (ledger,) = ledgers(cwd)
    steps = [orjson.loads(line) for line in ledger.read_bytes().splitlines()]
    lean_steps = [e for e in steps if e["tool"] in ("open_task", "set_proof")]
    assert lean_steps and all(e.get("node") == node["node_id"] for e in lean_steps), lean_steps
    # No Lean process the cluster started outlives serve.
    with anyio.fail_after(60):
        while lean_left := [
            p for p in cluster_processes(ray_head["RAY_TMPDIR"]) if p.name() == "lean"
        ]:
            await anyio.sleep(0.2)
    assert lean_left == []
