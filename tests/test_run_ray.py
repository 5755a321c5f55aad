"""`leanrig run --ray`: each attempt placed on a node of a local two-node Ray cluster
(`ray.cluster_utils.Cluster`, one ``lean_slots`` per node), run as a user types it — a
subprocess from a temporary working directory, the demo suite at a relative path, the sandbox
on where bwrap works.

- docs/scale-out.md's sweep as typed (doctor, the demo suite with the search agent over
  ``--parallel 4``, report): both nodes used, every verdict equal to a local run's, each
  attempt's records home (ledger, transcript, final body, workspace);
- Ctrl-C mid-run: exit 130, no attempt's process left on any node, ``--resume`` finishes;
- a node added, then killed mid-run: every attempt ends with one results line, and those it
  held say they were retried (from a fresh invocation, on a live node);
- Codex through each attempt's gateway on its node: tokens, calls and network policy as a
  local run's.

Runs in `make test` when the `ray` extra is installed; skipped (and reported) without it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from .suites import SWEPT, cut_suite
from .test_as_typed import ROOT, SUITE, leanrig_exe
from .test_as_typed import cwd as cwd  # the fixture: the demo suite at its README path
from .test_harness_runs import harnesses_or_skip, model_serve, plan

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install .[ray])")

pytestmark = [pytest.mark.ray, pytest.mark.timeout(150)]

ATTEMPT_VAR = "LEANRIG_RAY_ATTEMPT"  # what every process of an attempt on a node carries


def search_agent(delay: float = 0.0) -> str:
    """The model-free search agent as `--agent`; ``delay``: it first sleeps (an attempt that
    holds its node long enough to be interrupted there)."""
    search = f"{leanrig_exe()} agent search --mcp-config"
    if not delay:
        return f"{search} {{mcp_config}}"
    return f"sh -c 'sleep {delay}; exec {search} \"$0\"' {{mcp_config}}"


def run_argv(out: str, *extra: str, agent: str | None = None) -> list[str]:
    return [str(leanrig_exe()), "run", "--suite", SUITE, "--agent", agent or search_agent(),
            "--time-limit", "60", "--model", "none", "--quiet", "--out", out,
            *extra]  # fmt: skip


def results(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (run_dir / "results.jsonl").read_bytes().splitlines()]


def attempt_processes() -> list[psutil.Process]:
    """Processes of attempts placed on a node (the agent, its relay, Lean: each carries the
    attempt's tag) and the attempts' actors themselves."""
    found = []
    for proc in psutil.process_iter():
        try:
            if ATTEMPT_VAR in proc.environ() or "AttemptOnNode" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def agent_on(raylet: int) -> bool:
    """Is an attempt's process (its agent, relay or Lean) running on the node of ``raylet``?"""
    for proc in attempt_processes():
        try:
            if ATTEMPT_VAR in proc.environ() and on_node(proc, raylet):
                return True
        except psutil.Error:
            continue
    return False


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


def raylet_pid(node: Any) -> int:
    (info,) = node.all_processes["raylet"]
    return int(info.process.pid)


def on_node(proc: psutil.Process, raylet: int) -> bool:
    try:
        return any(p.pid == raylet for p in proc.parents())
    except psutil.Error:
        return False


@pytest.fixture
def cluster(two_node_cluster: Any) -> Any:
    """Head + one worker node, 1 lean_slots each (tests/conftest.py, shared)."""
    return two_node_cluster


def sweep_lines() -> list[str]:
    """docs/scale-out.md's sweep: its `.venv/bin/leanrig` lines (doctor, run, report)."""
    page = (ROOT / "docs" / "scale-out.md").read_text()
    block = next(b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "leanrig run" in b)
    lines = [
        x for x in block.replace("\\\n", " ").splitlines() if x.startswith(".venv/bin/leanrig ")
    ]
    assert [x.split()[1] for x in lines] == ["doctor", "run", "report"], lines
    return lines


# Four CLI runs (doctor, the sweep, its report, the local run): 150 s was not enough with two
# CPU-bound processes beside the suite.
@pytest.mark.timeout(400)
def test_the_demo_suite_on_two_nodes_matches_a_local_run(cluster: Any, cwd: Path) -> None:
    """docs/scale-out.md's sweep as typed — `doctor --ray auto`, `run … --ray auto --parallel
    4`, `report` — on the two-node cluster (`auto` finds it through RAY_ADDRESS, as on a
    machine of a cluster), beside a local run of the same suite."""
    (cwd / ".venv").symlink_to(ROOT / ".venv")
    cut_suite(cwd / SUITE, SWEPT)
    env = {**os.environ, "RAY_ADDRESS": cluster.address}
    script = "\n".join(sweep_lines())
    placed = subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    local = subprocess.run(run_argv("local", "--parallel", "2"), cwd=cwd, capture_output=True,
                           text=True, timeout=120, check=False)  # fmt: skip
    out, err = placed.communicate(timeout=140)
    assert placed.returncode == 0, out[-3000:] + err[-3000:]
    assert local.returncode == 0, local.stderr[-3000:]
    assert "ok: every node (2) passes" in out  # the doctor's verdict
    assert (cwd / "runs" / "sweep" / "report" / "report.md").is_file()  # the report's
    summary = next(orjson.loads(x) for x in out.splitlines() if x.startswith('{"run_dir"'))
    on_ray, here = results(cwd / "runs" / "sweep"), results(cwd / "local")
    tasks = {t["id"] for t in orjson.loads((cwd / "local" / "run.json").read_bytes())["tasks"]}
    assert [r["task"] for r in on_ray].count("and_swap") == 1
    assert {r["task"] for r in on_ray} == tasks and len(on_ray) == len(tasks)
    differ = {r["task"]: (r["accepted"], r["timed_out"], r["reasons"], r.get("infra_failures"))
              for r in on_ray if r["accepted"] != next(h["accepted"] for h in here
                                                         if h["task"] == r["task"])}  # fmt: skip
    assert differ == {}, differ  # (the cluster's verdicts, and why, where they differ)
    assert any(r["accepted"] for r in on_ray) and not all(r["accepted"] for r in on_ray)
    # Both nodes took attempts, and each line names its node.
    nodes = {r["node"] for r in on_ray}
    assert len(nodes) == 2 and None not in nodes, nodes
    assert len(summary["nodes"]) == 2 and summary["placement_s_median"] > 0, summary
    assert not any(r["infra_retry"] for r in on_ray)
    info = orjson.loads((cwd / "runs" / "sweep" / "run.json").read_bytes())
    assert info["cluster"] == {"address": "auto", "attempt_memory_mb": 2048,
                               "nodes": info["cluster"]["nodes"]}  # fmt: skip
    assert len(info["cluster"]["nodes"]) == 2
    # Records came home: each attempt's directory as a local run writes it, the run's ledger
    # holds every attempt's tool calls, and a solved task's final body is its submission.
    for r in on_ray:
        attempt = cwd / "runs" / "sweep" / "attempts" / r["task"] / "1"
        assert (attempt / "agent.log").is_file() and (attempt / "ledger.jsonl").is_file()
        assert (attempt / "workspace" / "Submission.lean").is_file()
        assert (attempt / "workspace" / "PROMPT.md").is_file()
        assert list((attempt / "serve").glob("submission-*.json")), attempt
        assert r["tool_calls"] > 0
    ledger = (cwd / "runs" / "sweep" / "ledger.jsonl").read_bytes().splitlines()
    each = [(cwd / "runs" / "sweep" / "attempts" / r["task"] / "1" / "ledger.jsonl").read_bytes()
            for r in on_ray]  # fmt: skip
    assert sorted(ledger) == sorted(line for data in each for line in data.splitlines())
    solved = next(r for r in on_ray if r["accepted"])
    body = cwd / "runs" / "sweep" / "attempts" / solved["task"] / "1" / "workspace"
    assert "sorry" not in (body / "Submission.lean").read_text()
    assert attempt_processes() == []


def test_ctrl_c_leaves_no_process_on_any_node_and_resume_finishes(cluster: Any, cwd: Path) -> None:
    agent = search_agent(delay=5)
    argv = run_argv("stopped", "--parallel", "2", "--ray", cluster.address, "--tasks",
                    "refl_z,and_swap", agent=agent)  # fmt: skip
    run = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    try:
        # Both nodes hold an attempt whose agent is running.
        raylets = [raylet_pid(n) for n in cluster.list_all_nodes()]
        wait_for(lambda: all(agent_on(r) for r in raylets), 60, "an agent running on each node")
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err[-3000:]
    assert "--resume" in err
    left = wait_for(lambda: attempt_processes() == [] or None, 30, "every attempt process gone")
    assert left
    assert not (cwd / "stopped" / "results.jsonl").exists() or results(cwd / "stopped") == []
    resumed = subprocess.run(
        run_argv("stopped", "--parallel", "2", "--ray", cluster.address, "--resume",
                 agent=agent),
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    done = results(cwd / "stopped")
    assert sorted(r["task"] for r in done) == ["and_swap", "refl_z"]
    assert all(r["accepted"] for r in done), done


def test_a_node_killed_mid_run_retries_its_attempts_once_elsewhere(cluster: Any, cwd: Path) -> None:
    added = cluster.add_node(num_cpus=1, resources={"lean_slots": 1})
    cluster.wait_for_nodes()
    tasks = "refl_z,and_swap,or_swap"
    argv = run_argv("killed", "--parallel", "3", "--ray", cluster.address, "--tasks", tasks,
                    agent=search_agent(delay=3))  # fmt: skip
    run = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    try:
        raylet = raylet_pid(added)
        wait_for(lambda: agent_on(raylet), 60, "an agent running on the added node")
        cluster.remove_node(added, allow_graceful=False)
        out, err = run.communicate(timeout=140)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err[-3000:]
    lines = results(cwd / "killed")
    # One line per attempt, none twice (a dead attempt's files never reach results.jsonl).
    assert sorted(r["task"] for r in lines) == sorted(tasks.split(","))
    retried = [r for r in lines if r["infra_retry"]]
    assert retried, lines
    for r in retried:
        assert any("was lost" in why for why in r["infra_failures"]), r
        assert r["node"] is not None and r["accepted"] is not None
        assert (cwd / "killed" / "attempts" / r["task"] / "1-retry" / "agent.log").is_file()
    summary = orjson.loads(out.strip().splitlines()[-1])
    assert summary["infra_retries"] == len(retried)
    why = {r["task"]: (r["reasons"], r["timed_out"], r.get("infra_failures")) for r in lines}
    assert {r["task"]: r["accepted"] for r in lines} == {
        t: t != "or_swap" for t in tasks.split(",")
    }, why
    assert wait_for(lambda: attempt_processes() == [] or None, 30, "no attempt process left")


def test_without_lean_slots_the_run_says_what_to_start(cwd: Path, cluster: Any) -> None:
    done = subprocess.run(
        run_argv("big", "--ray", cluster.address, "--attempt-memory", "64T"),
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "offers a lean_slots unit" in done.stderr and "--attempt-memory" in done.stderr


def test_a_harness_on_the_cluster_meters_its_model_as_a_local_run(cluster: Any, cwd: Path) -> None:
    """Codex through the attempt's own gateway on its node: the same tokens, calls and network
    policy as the same attempts run here, and the model calls' records home."""
    harnesses_or_skip()
    (cwd / "plan.json").write_text(orjson.dumps(plan("baseline")).decode())
    model = model_serve(cwd, "plan.json", "served.jsonl")
    try:
        common = ("--harness", "codex", "--model", "replay", "--model-endpoint", model.url,
                  "--tasks", "eq_symm")  # fmt: skip
        argv = [a for a in run_argv("x") if a not in ("--agent", search_agent(), "--model",
                                                      "none")]  # fmt: skip
        here, there = [[*argv[:-1], out, *common, *extra] for out, extra in
                       (("local", ()), ("on-ray", ("--ray", cluster.address)))]  # fmt: skip
        placed = subprocess.Popen(there, cwd=cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)  # fmt: skip
        local = subprocess.run(here, cwd=cwd, capture_output=True, text=True, timeout=140,
                               check=False)  # fmt: skip
        _, err = placed.communicate(timeout=140)
    finally:
        model.stop()
    assert local.returncode == 0 and placed.returncode == 0, (local.stderr[-2000:], err[-2000:])
    # The same metering: the gateway's counts equal what the harness itself reported
    # (usage_mismatch empty) and the local run's, but for the input's paths (the prompt names
    # the attempt's workspace: a node's is another directory).
    metered = ("accepted", "usage_source", "model_calls", "output_tokens", "usage_mismatch")
    by_task = [{r["task"]: r for r in results(cwd / d)} for d in ("local", "on-ray")]
    assert sorted(by_task[0]) == sorted(by_task[1]) == ["eq_symm"]
    for task, r in by_task[1].items():
        mine = by_task[0][task]
        assert {k: r[k] for k in metered} == {k: mine[k] for k in metered}, (r, mine)
        assert r["accepted"] and r["model_calls"] and r["usage_mismatch"] == [], r
        assert abs(r["input_tokens"] - mine["input_tokens"]) < 0.01 * mine["input_tokens"]
        assert r["harness_usage"]["input_tokens"] == r["input_tokens"]
        assert r["model_s"] > 0 and r["node"] is not None
    for d in ("local", "on-ray"):
        info = orjson.loads((cwd / d / "run.json").read_bytes())
        assert info["agent_network"] == "model", info
    attempt = cwd / "on-ray" / "attempts" / "eq_symm" / "1"
    assert (attempt / "model_calls.jsonl").is_file() and (attempt / "harness.json").is_file()


def test_an_agent_on_a_node_cannot_reach_the_starting_machine_s_run_directory(
    cluster: Any, cwd: Path, request: pytest.FixtureRequest
) -> None:
    """The nodes here are the starting machine: an agent that writes a forged results line and
    reads the run's files (its path given to it) finds neither; its attempt counts as the
    search agent's after it. (The run directory is in the user's home, which agents may write:
    the agent's /tmp and /var/tmp are its own, the rest of the file system read-only.)"""
    run_dir = Path(tempfile.mkdtemp(prefix="leanrig-test-run-", dir=Path.home())) / "guarded"
    request.addfinalizer(lambda: shutil.rmtree(run_dir.parent, ignore_errors=True))
    forged = orjson.dumps({"v": 1, "task": "refl_z", "difficulty": 1, "accepted": True,
                           "invocation_s": 0}).decode()  # fmt: skip
    script = cwd / "cheat.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"echo '{forged}' >> {run_dir}/results.jsonl\n"
        f"ls {run_dir}\n"
        f'exec {leanrig_exe()} agent search --mcp-config "$1"\n'
    )
    script.chmod(0o755)
    done = subprocess.run(
        run_argv(str(run_dir), "--ray", cluster.address, "--tasks", "eq_symm",
                 agent=f"{script} {{mcp_config}}"),
        cwd=cwd, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = results(run_dir)
    assert line["task"] == "eq_symm" and line["accepted"] is False and line["node"]
    log = (run_dir / "attempts" / "eq_symm" / "1" / "agent.log").read_text()
    # What it saw there was its own empty directory (where its write went), not the run's.
    assert "run.json" not in log and "started" not in log, log


def test_an_address_where_no_cluster_listens_is_refused_at_once(cwd: Path) -> None:
    """Ray's join retried such an address for ever (a run that never started, silent)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    t = time.monotonic()
    done = subprocess.run(run_argv("nowhere", "--ray", f"127.0.0.1:{port}"), cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2 and time.monotonic() - t < 60, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("leanrig:")]
    assert f"cannot join a Ray cluster at '127.0.0.1:{port}'" in line, line
    assert not (cwd / "nowhere" / "results.jsonl").exists()


def test_statement_tasks_on_the_cluster_are_graded_as_a_local_run_grades_them(
    cluster: Any, tmp_path: Path
) -> None:
    """The claims suite's statement tasks placed on the nodes: each results line has its
    node, kind, statement and equivalence grade, and the verdicts are a local run's
    (tests/test_statement_runs.py's)."""
    from .test_statement_runs import SUITE as CLAIMS_SUITE
    from .test_statement_runs import TASKS, user_dir

    cwd = user_dir(tmp_path)
    agent = f"{leanrig_exe()} agent scripted --plan {cwd / 'plan.json'} --mcp-config " + (
        "{mcp_config} --task {task}"
    )
    typed = (
        f"{leanrig_exe()} run --suite {CLAIMS_SUITE} --tasks {','.join(TASKS)} --model none "
        f"--quiet --parallel 2 --time-limit 60 --out on-ray --ray {cluster.address}"
    )
    argv = [*shlex.split(typed), "--agent", agent]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=140, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    got = {r["task"]: r for r in results(cwd / "on-ray")}
    assert {t: r["accepted"] for t, r in got.items()} == TASKS
    for r in got.values():
        assert r["kind"] == "statement" and r["statement"] and r["node"], r
        assert r["equivalence"]["outcome"] in ("equivalent", "not_equivalent"), r
    assert len({r["node"] for r in got.values()}) == 2
    assert attempt_processes() == []
