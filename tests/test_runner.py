"""`leanrig run` against real agents and Lean, the runner's own service per attempt: the run
protocol's files, verdicts after every invocation, the whole-tree kill, resume, and the
infrastructure retry."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import orjson
import psutil
import pytest

from agent_tools.runs import (
    AttemptResult,
    RunInfo,
    RunOptions,
    RunSummary,
    read_results,
    read_run_info,
    run_benchmark,
    write_report,
)
from agent_tools.runs.attempt_dir import ATTEMPT_TOKEN_VAR, RELAY_SCRIPT
from agent_tools.servers import ServeOptions, open_service
from agent_tools.sessions import ProofService, body_sha
from agent_tools.tasks import load_suite

pytestmark = pytest.mark.anyio


ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "lean_project" / "suites" / "demo"
AGENTS = Path(__file__).resolve().parent / "agents"
TWO = ("refl_z", "and_swap")
PY = sys.executable


def mcp_agent(mode: str) -> str:
    return f"{PY} {AGENTS / 'mcp_agent.py'} {mode}"


def options(out: Path, agent: str, **kw: object) -> RunOptions:
    base: dict[str, object] = {"tasks": TWO, "quiet": True, "time_limit": 120.0}
    base.update(kw)
    return RunOptions(suite=SUITE, agent=agent, out=out, **base)  # type: ignore[arg-type]


def raw_lines(run_dir: Path) -> list[AttemptResult]:
    """Every line of results.jsonl, validated against the model (no line dropped)."""
    lines = (run_dir / "results.jsonl").read_bytes().splitlines()
    return [AttemptResult.model_validate(orjson.loads(line)) for line in lines]


def attempt_processes(run_dir: Path) -> list[int]:
    """Live processes carrying any attempt token of this run (agent, server, Lean)."""
    tokens = set()
    for config in run_dir.glob("attempts/*/*/workspace/mcp.json"):
        env = orjson.loads(config.read_bytes())["mcpServers"]["leanrig"]["env"]
        tokens.add(env[ATTEMPT_TOKEN_VAR])
    alive = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(ATTEMPT_TOKEN_VAR) in tokens and p.status() != "zombie":
                alive.append(p.pid)
        except psutil.Error:
            continue
    return alive


def marked_processes(marker: str) -> list[int]:
    """Live processes whose last argument is ``marker``."""
    alive = []
    for p in psutil.process_iter():
        try:
            if p.cmdline()[-1:] == [marker] and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p.pid)
        except psutil.Error:
            continue
    return alive


def live_children() -> list[psutil.Process]:
    """This process's live descendants: the runner's services' Lean, verifiers, agents."""
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            continue
    return alive


def check_common(summary: RunSummary, run_dir: Path) -> None:
    assert attempt_processes(run_dir) == []
    assert live_children() == []
    info = read_run_info(run_dir)
    assert isinstance(info, RunInfo)
    assert info.ended_at is not None and info.suite_name == "demo" and info.task_count == 2
    assert info.lean_version and info.leanrig_version and info.sandbox
    assert info.machine is not None and info.machine.cores >= 1
    assert {t.id for t in info.tasks} == set(TWO)
    assert len(raw_lines(run_dir)) == len(summary.results)


async def test_serial_run_solves_two_tasks_and_reports(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = await run_benchmark(
        options(run_dir, mcp_agent("solve"), model="scripted", agent_tool="mcp_agent")
    )
    check_common(summary, run_dir)
    info = read_run_info(run_dir)
    assert info.agent_command == mcp_agent("solve") and info.parallel == 1
    results = {r.task: r for r in raw_lines(run_dir)}
    assert set(results) == set(TWO)
    suite = load_suite(SUITE)
    proofs = orjson.loads((ROOT / "tests" / "demo_reference_proofs.json").read_bytes())
    for task_id, r in results.items():
        assert r.accepted and not r.timed_out and r.exit_code == 0 and not r.infra_retry
        assert r.final_body_sha == body_sha("\n  " + proofs[task_id])
        assert r.tool_calls >= 3 and r.lean_s > 0 and r.verdict_s is not None
        assert (r.input_tokens, r.cached_input_tokens, r.output_tokens) == (1000, 200, 50)
        assert r.model == "scripted" and r.difficulty == suite.tasks[task_id].spec.difficulty
        ws = run_dir / "attempts" / task_id / "1" / "workspace"
        assert (ws / "Submission.lean").read_text() == suite.tasks[task_id].with_body(
            "\n  " + proofs[task_id]
        )
        listed = orjson.loads((ws / "tasks.json").read_bytes())
        assert [t["id"] for t in listed["tasks"]] == [task_id]
        # The agent's MCP server is the relay to the runner's socket; its env carries only the
        # attempt's token.
        config = orjson.loads((ws / "mcp.json").read_bytes())["mcpServers"]["leanrig"]
        assert Path(config["command"]).is_absolute() and config["cwd"] == str(ws)
        assert config["args"][:3] == ["-I", "-S", str(RELAY_SCRIPT)]
        socket = Path(config["args"][3])
        assert socket.is_absolute() and not socket.parent.exists()
        assert list(config["env"]) == [ATTEMPT_TOKEN_VAR]
    # The run's ledger has every attempt's calls, and the server's closing lines for the
    # sessions the agent left open.
    ledger = [orjson.loads(x) for x in (run_dir / "ledger.jsonl").read_bytes().splitlines()]
    agents = [e for e in ledger if e.get("closed_by") != "server"]
    assert len(agents) == sum(r.tool_calls for r in results.values())
    closed = {e["session"] for e in ledger if e["tool"] == "close_session"}
    assert closed == {e["session"] for e in ledger if e["tool"] == "open_task"}
    report = write_report(run_dir, tmp_path / "report", plots=False)
    assert report["tasks"] == 2 and report["accepted"] == 2 and report["score"] == 100.0


async def test_parallel_attempts_give_pass_at_k(tmp_path: Path) -> None:
    # "alternate": attempt 1 solves, attempt 2 submits a wrong proof.
    run_dir = tmp_path / "run"
    summary = await run_benchmark(options(run_dir, mcp_agent("alternate"), parallel=2, attempts=2))
    check_common(summary, run_dir)
    results = raw_lines(run_dir)
    assert sorted((r.task, r.attempt, r.accepted) for r in results) == sorted(
        [(t, 1, True) for t in TWO] + [(t, 2, False) for t in TWO]
    )
    wrong = [r for r in results if r.attempt == 2]
    assert all(r.reasons and r.exit_code == 0 and not r.timed_out for r in wrong)
    report = write_report(run_dir, tmp_path / "report", plots=False)
    assert report["pass_at_k"] == {"1": 50.0, "2": 100.0}
    # Each attempt had its own service.
    sessions: list[set[str]] = []
    for ledger in run_dir.glob("attempts/*/*/ledger.jsonl"):
        lines = [orjson.loads(x) for x in ledger.read_bytes().splitlines()]
        assert {e["task"] for e in lines if e.get("task")} == {ledger.parent.parent.name}
        sessions.append({e["session"] for e in lines if e.get("session")})
    assert len(sessions) == 4 and all(sessions)
    assert sum(map(len, sessions)) == len(set().union(*sessions))


async def test_timeout_kills_the_whole_tree_and_a_correct_body_counts(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    limit = 10.0
    summary = await run_benchmark(
        options(run_dir, mcp_agent("linger"), tasks=("refl_z",), time_limit=limit)
    )
    [r] = raw_lines(run_dir)
    assert r.timed_out and r.accepted, r
    assert r.invocation_s >= limit
    ws = run_dir / "attempts" / "refl_z" / "1" / "workspace"
    assert (ws / "grandchild.pid").is_file()
    assert marked_processes(str(ws)) == []
    assert attempt_processes(run_dir) == []
    assert len(summary.kill_s) == 1  # one kill, timed (bench judges the figure)


async def test_never_opened_session_submits_the_initial_file(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = await run_benchmark(
        options(run_dir, f"{PY} {AGENTS / 'no_session_agent.py'}", tasks=("refl_z",))
    )
    [r] = summary.results
    suite = load_suite(SUITE)
    assert not r.accepted and r.reasons and r.exit_code == 0 and r.tool_calls == 0
    assert r.final_body_sha == body_sha(suite.tasks["refl_z"].body)
    ws = run_dir / "attempts" / "refl_z" / "1" / "workspace"
    assert (ws / "Submission.lean").read_text() == suite.tasks["refl_z"].text
    assert r.input_tokens is None and r.cost_usd is None  # no usage.json: unknown, not zero


async def test_resume_skips_finished_attempts(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    agent = f"{PY} {AGENTS / 'no_session_agent.py'}"
    await run_benchmark(options(run_dir, agent))
    # Interrupted after the first attempt: its line is there, the second's is not.
    lines = (run_dir / "results.jsonl").read_bytes().splitlines(keepends=True)
    first = AttemptResult.model_validate(orjson.loads(lines[0]))
    (run_dir / "results.jsonl").write_bytes(lines[0])
    with pytest.raises(Exception, match="already holds a run"):
        await run_benchmark(options(run_dir, agent))
    summary = await run_benchmark(options(run_dir, agent, resume=True))
    assert summary.skipped == 1 and [r.task for r in summary.results] != [first.task]
    assert {r.task for r in read_results(run_dir).results} == set(TWO)
    assert len(raw_lines(run_dir)) == 2


async def test_an_attempt_the_runner_died_in_is_recorded_not_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded as not accepted; one the user stopped is run again (test_runner_faults.py)."""
    import agent_tools.runs.runner as runner_module

    run_dir = tmp_path / "run"
    agent = mcp_agent("solve")

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner_module, "append_result", full_disk)
    with pytest.raises(BaseException):  # noqa: B017, PT011 (the run dies, however it says it)
        await run_benchmark(options(run_dir, agent, tasks=("refl_z",)))
    monkeypatch.undo()
    summary = await run_benchmark(options(run_dir, agent, tasks=("refl_z",), resume=True))
    assert summary.results == []
    (line,) = raw_lines(run_dir)
    assert (line.task, line.attempt, line.accepted) == ("refl_z", 1, False)
    assert line.reasons[0].startswith("interrupted: the runner stopped during this attempt")
    assert not list((run_dir / "started").iterdir())


@asynccontextmanager
async def dying_service(options: ServeOptions) -> AsyncIterator[ProofService]:
    """The runner's service, raising once its first session's body is set, except in a retry's
    attempt directory."""
    async with open_service(options) as service:
        if options.run_dir.parent.name.endswith("-retry"):
            yield service
            return

        async def die() -> None:
            # Once the agent's body is set and it only sleeps: a read cancelled while a request
            # arrives trips anyio's Unix socket wait (an InvalidStateError in the event loop).
            # No event says so; poll the service's table, bounded.
            with anyio.fail_after(60):
                while not any(s.version > 1 for s in service.sessions.values()):
                    await anyio.sleep(0.01)
            raise RuntimeError("the service died")

        async with anyio.create_task_group() as tg:
            tg.start_soon(die)
            yield service


async def test_infrastructure_failure_is_retried_once(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    limit = 10.0
    summary = await run_benchmark(
        options(
            run_dir, mcp_agent("linger"), tasks=("refl_z",), service=dying_service, time_limit=limit
        )
    )
    [r] = raw_lines(run_dir)
    # The runner saw the service die at once and retried; the retry's agent lingers to the
    # limit with a correct body.
    assert r.infra_retry and r.accepted and r.timed_out and summary.infra_retries == 1
    assert summary.elapsed_s < 2 * limit
    assert (run_dir / "attempts" / "refl_z" / "1").is_dir()  # the failed try is kept
    assert (run_dir / "attempts" / "refl_z" / "1-retry" / "workspace" / "Submission.lean").exists()
    assert attempt_processes(run_dir) == []


def test_agent_command_substitution(tmp_path: Path) -> None:
    from agent_tools.runs.attempt_dir import agent_argv, create_attempt_dir

    suite = load_suite(SUITE)
    ws = create_attempt_dir(
        tmp_path, suite, suite.tasks["refl_z"], 1, token="t", socket=tmp_path / "s" / "mcp.sock"
    )
    argv = agent_argv(["agent", "--p={prompt}", "{task}", "{workspace}", "{mcp_config}", "{x}"], ws)
    assert argv == [
        "agent",
        f"--p={ws.prompt}",
        "refl_z",
        str(ws.workspace),
        str(ws.mcp_config),
        "{x}",
    ]
    env = ws.agent_env(os.environ)
    assert env["LEANRIG_TASK"] == "refl_z" and env["LEANRIG_MCP_CONFIG"] == str(ws.mcp_config)
    assert (ws.workspace / "ReflZ.lean").read_text() == suite.tasks["refl_z"].text
    assert "refl_z" in ws.prompt.read_text()


def test_a_relative_agent_program_is_made_absolute_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents start in their workspace; missing or non-executable programs are refused."""
    from agent_tools.runs import RunError
    from agent_tools.runs.options import agent_words as _agent_words

    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunError, match="not executable"):
        _agent_words("./agent.sh {mcp_config}")
    script.chmod(0o755)
    assert _agent_words("./agent.sh {mcp_config}") == [str(script), "{mcp_config}"]
    assert _agent_words("sh -c true") == ["sh", "-c", "true"]
    with pytest.raises(RunError, match="cannot find"):
        _agent_words("./missing.sh")
