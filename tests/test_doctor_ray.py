"""`leanrig doctor --ray ADDRESS` (docs/cli.md, docs/scale-out.md): every alive node of a Ray
cluster checked for `leanrig run --ray`, on a local `ray.cluster_utils.Cluster` of two nodes
with one ``lean_slots`` each (one cluster for the module).

The command runs as a user types it (the console script beside this interpreter, from a
working directory holding the demo suite at its README path). A node that differs from the
starting machine is made by the one thing that differs between them on one machine: the
environment (the nodes have this process's, the command is given another). What cannot
differ on one machine (a suite's content) is checked on the node's check function directly.

Runs in `make test` when the `ray` extra is installed; skipped (and reported) without it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import orjson
import psutil
import pytest

from agent_tools.cli import main
from agent_tools.cli.doctor_cluster import alive_nodes, check_cluster, cluster_problems
from agent_tools.cli.node_check import Expected, expected_here, suite_check
from agent_tools.tasks import load_suite

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install .[ray])")


pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parent.parent
LEANRIG = Path(sys.executable).parent / "leanrig"
DEMO = ROOT / "lean_project" / "suites" / "demo"
SUITE = "lean_project/suites/demo"  # as README types it, relative to the working directory
DEADLINE = 120.0  # one command, end to end, on a loaded machine


@pytest.fixture
def cluster(two_node_cluster: Any) -> Any:
    """Head + one worker node, 1 lean_slots each (tests/conftest.py, shared)."""
    return two_node_cluster


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """A user's working directory with the demo suite at its README path."""
    shutil.copytree(DEMO, tmp_path / SUITE)
    return tmp_path


def doctor(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([str(LEANRIG), "doctor", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def finished(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        process.kill()  # a no-op when it exited
        process.wait()
    return process.returncode, out, err


def checks_of(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in node["checks"]}


def test_every_node_runs_the_smoke_test_and_passes(cluster: Any, cwd: Path) -> None:
    json_run = doctor("--ray", cluster.address, "--suite", SUITE, "--json", cwd=cwd)
    plain_run = doctor("--ray", cluster.address, "--suite", SUITE, cwd=cwd)
    (code, out, err), plain = finished(json_run), finished(plain_run)
    assert code == 0, out + err
    report = orjson.loads(out)
    assert report["ok"] is True and report["problems"] == []
    nodes = report["nodes"]
    # Each node answered for itself: its own Ray node id, every node of the cluster once.
    assert sorted(n["node_id"] for n in nodes) == sorted(
        node.node_id for node in cluster.list_all_nodes()
    )
    for node in nodes:
        checks = checks_of(node)
        assert all(c["ok"] for c in checks.values()), checks
        assert {"answered", "leanrig", "ray", "lean", "smoke", "sandbox", "suite"} <= set(checks)
        assert node["smoke_ms"] > 0 and node["lean_slots"] == 1
        assert "as on the starting machine" in checks["suite"]["detail"]
    assert report["expected"]["suite_path"] == str((cwd / SUITE).resolve())

    code, out, err = plain
    assert code == 0, out + err
    assert out.splitlines()[-1] == "ok: every node (2) passes", out
    assert sum(line.startswith("  ok    smoke ") for line in out.splitlines()) == 2, out


def test_a_node_with_another_lean_or_harness_fails(cluster: Any, cwd: Path, tmp_path: Path) -> None:
    """The starting machine's Lean at another path (a link to the same Lean), and a harness
    that says another version there than on the nodes: every node fails those two checks,
    and only those."""
    lean = Path(expected_here(None, None, None).lean_path)
    (tmp_path / "lean-elsewhere").symlink_to(lean)
    codex = tmp_path / "codex"
    codex.write_text('#!/bin/sh\necho "codex-cli ${FAKE_CODEX_VERSION:-0.1.0}"\n')
    codex.chmod(0o755)
    env = {**os.environ, "LEANRIG_LEAN": str(tmp_path / "lean-elsewhere"),
           "FAKE_CODEX_VERSION": "0.2.0"}  # fmt: skip
    argv = ["--ray", cluster.address, "--harness", "codex", "--harness-bin", str(codex)]
    code, out, err = finished(doctor(*argv, "--json", cwd=cwd, env=env))
    assert code == 1, out + err
    report = orjson.loads(out)
    assert report["ok"] is False and len(report["nodes"]) == 2
    for node in report["nodes"]:
        checks = checks_of(node)
        failed = sorted(name for name, c in checks.items() if not c["ok"])
        assert failed == ["harness", "lean"], checks
        said = checks["harness"]["detail"]
        assert "'codex-cli 0.1.0', the starting machine's is 'codex-cli 0.2.0'" in said
        assert str(tmp_path / "lean-elsewhere") in checks["lean"]["detail"]
        assert checks["smoke"]["ok"] is True  # the node's own Lean works


@pytest.fixture
def hanging_codex(tmp_path: Path) -> tuple[Path, str]:
    """A harness whose `--version` never returns, waiting on a grandchild in a session of its
    own (as Lean's processes are: out of reach of Ray's and subprocess's kills); the
    grandchild's command line is `sleep MARKER`."""
    marker = f"600.{os.getpid()}"
    program = tmp_path / "codex"
    program.write_text(f"#!/bin/sh\nsetsid sleep {marker}\n")
    program.chmod(0o755)
    return program, marker


def left_running(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", marker]]


def hanging_expectation(program: Path) -> Expected:
    return replace(expected_here(None, None, None), harness="codex",
                   harness_bin=str(program), harness_version="codex-cli 0.1.0")  # fmt: skip


@pytest.mark.anyio
async def test_a_node_whose_check_hangs_answers_within_its_budget(
    cluster: Any, hanging_codex: tuple[Path, str]
) -> None:
    """The harness check times out on the node's own clock: the node answers (not a hung
    doctor), with that check failed, and the harness's grandchild does not outlive it."""
    program, marker = hanging_codex
    # The harness check runs beside the smoke test and uses the whole budget up. Whether the
    # smoke test's Lean finishes within it depends on the machine's load: it is only asked to
    # have run (test_every_node_runs_the_smoke_test_and_passes checks that it passes).
    # The margin (a Ray worker's start, the reaper's sweep) is wide: with the whole suite and
    # two CPU-bound processes on two cores, 30 s was not enough. A node that ignored its budget
    # would still never answer, the harness hanging for ever.
    with anyio.fail_after(150):
        report = await check_cluster(
            cluster.address, hanging_expectation(program), budget=12, margin=120
        )
    assert not report.ok and len(report.nodes) == 2
    for node in report.nodes:
        checks = {c.name: c for c in node.checks}
        assert checks["answered"].ok and "smoke" in checks, checks
        assert not checks["harness"].ok and "timed out" in checks["harness"].detail, checks
    left = left_running(marker)
    for proc in left:
        proc.kill()
    assert left == [], "the check's grandchild outlived it"


@pytest.mark.anyio
async def test_a_node_that_does_not_answer_in_time_fails_and_leaves_nothing_running(
    cluster: Any, hanging_codex: tuple[Path, str]
) -> None:
    """The walk's deadline (the node's budget, no margin) passes before the node answers:
    the node is reported as failed, and what its check started does not outlive it."""
    program, marker = hanging_codex
    with anyio.fail_after(60):
        report = await check_cluster(
            cluster.address, hanging_expectation(program), budget=4, margin=0
        )
    assert not report.ok and len(report.nodes) == 2
    for node in report.nodes:
        assert [(c.name, c.ok, c.detail) for c in node.checks] == [
            ("answered", False, "no answer within 4 s")
        ]
    left = left_running(marker)
    for proc in left:
        proc.kill()
    assert left == [], "the check's grandchild outlived it"


def test_an_address_where_no_cluster_listens_is_exit_2_in_one_line(tmp_path: Path) -> None:
    """Ray's own join waited for ever at such an address (retrying every 30 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # a port nothing listens on (bound, never listening)
        address = f"127.0.0.1:{s.getsockname()[1]}"
        code, out, err = finished(doctor("--ray", address, cwd=tmp_path))
    assert code == 2, out + err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("leanrig:")]
    assert f"cannot join a Ray cluster at '{address}'" in line and "--ray HOST:PORT" in line, line


def test_a_suite_unlike_the_starting_machine_s_is_shipped_if_prelude_else_fails(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "demo"
    shutil.copytree(DEMO, suite)
    here = replace(expected_here(None, None, None), suite_path=str(suite),
                   suite_hash=load_suite(suite).content_hash(), suite_prelude=True)  # fmt: skip
    same = suite_check(here)
    assert same.ok and "as on the starting machine" in same.detail

    other = replace(here, suite_hash="0123456789abcdef")
    missing = replace(here, suite_path=str(tmp_path / "nowhere"))
    for node_side in (other, missing):
        shipped = suite_check(node_side)
        assert shipped.ok and "will be shipped with the run" in shipped.detail, shipped
        full = suite_check(replace(node_side, suite_prelude=False))
        assert not full.ok, full
        assert "a full-toolchain suite (its Lake build) must be at the same path" in full.detail


def test_a_cluster_whose_alive_nodes_offer_no_lean_slots_fails() -> None:
    """As `ray.nodes()` lists nodes: a dead node's lean_slots are no capacity."""
    rows: list[dict[str, Any]] = [
        {"NodeID": "a" * 56, "Alive": True, "NodeManagerAddress": "10.0.0.1",
         "Resources": {"CPU": 4.0, "memory": 8.0 * 2**30}},
        {"NodeID": "b" * 56, "Alive": False, "NodeManagerAddress": "10.0.0.2",
         "Resources": {"CPU": 4.0, "lean_slots": 4.0, "memory": 8.0 * 2**30}},
    ]  # fmt: skip
    nodes = alive_nodes(rows)
    assert [n.node_id for n in nodes] == ["a" * 56]
    (problem,) = cluster_problems(nodes)
    assert "no alive node offers lean_slots" in problem and "--resources" in problem
    rows[0]["Resources"]["lean_slots"] = 2.0
    assert cluster_problems(alive_nodes(rows)) == []


@pytest.mark.parametrize("argv", [["--suite", SUITE], ["--harness", "codex"]])
def test_node_options_without_ray_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", *argv]) == 2
    assert "add --ray ADDRESS" in capsys.readouterr().err
