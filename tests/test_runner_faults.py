"""`leanrig run` against misbehaving agents (tests/agents/fault_agent.py): each is recorded,
killed at the limit, judged on its session's body only, without affecting other tasks; a run
killed with SIGKILL resumes without redoing finished attempts."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from agent_tools.runs import RunOptions, read_results, run_benchmark
from agent_tools.runs.agent_sandbox import agent_sandbox
from agent_tools.runs.invocation import LOG_CAP_BYTES
from agent_tools.tasks import SuiteError

from .test_runner import AGENTS, PY, SUITE, attempt_processes, marked_processes, raw_lines

pytestmark = pytest.mark.anyio

FAULT = AGENTS / "fault_agent.py"
LEANRIG = Path(sys.executable).parent / "leanrig"


def suite_copy(tmp_path: Path, tasks: tuple[str, ...], edit: str = "") -> Path:
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite, ignore=shutil.ignore_patterns("Lib"))
    head, *blocks = (suite / "suite.toml").read_text().split("[[tasks]]")
    head = head.split("[lad]")[0]
    kept = [b for b in blocks if any(f'id = "{t}"\n' in b for t in tasks)]
    (suite / "suite.toml").write_text(head + "".join("[[tasks]]" + b for b in kept) + edit)
    return suite


async def test_misbehaving_agents_are_recorded_killed_and_isolated(tmp_path: Path) -> None:
    tasks = ("refl_z", "and_swap", "true_intro", "false_elim", "add_zero", "length_one")
    suite = suite_copy(tmp_path, tasks)
    original = (suite / "Demo" / "ReflZ.lean").read_text()
    modes = {
        "refl_z": ["vandal", str(suite / "Demo" / "ReflZ.lean")],
        "and_swap": [str(AGENTS / "mcp_agent.py"), "solve"],
        "true_intro": ["exit"],
        "false_elim": ["hang"],
        "add_zero": ["flood"],
        "length_one": ["fork"],
    }
    run_dir = tmp_path / "run"
    limit = 15.0  # the solving agent's MCP start under load; hang and flood wait it out
    agent = f"{PY} {FAULT} by-task '{json.dumps(modes)}'"
    summary = await run_benchmark(
        RunOptions(suite=suite, agent=agent, out=run_dir, time_limit=limit, parallel=3, quiet=True)
    )
    r = {x.task: x for x in raw_lines(run_dir)}
    assert set(r) == set(tasks) and len(summary.results) == len(tasks)
    assert r["and_swap"].accepted and not r["and_swap"].timed_out and not r["and_swap"].notes
    # Exit at once: recorded with its status, the initial file rejected.
    assert (r["true_intro"].exit_code, r["true_intro"].accepted) == (3, False)
    assert r["true_intro"].invocation_s < limit
    # Hang and flood: killed at the limit, rejected; the flood's log is capped.
    for tid in ("false_elim", "add_zero"):
        assert r[tid].timed_out and not r[tid].accepted and r[tid].invocation_s >= limit
    log = run_dir / "attempts" / "add_zero" / "1" / "agent.log"
    assert LOG_CAP_BYTES <= log.stat().st_size < LOG_CAP_BYTES + 100
    assert log.read_bytes().endswith(b"[leanrig: output truncated]\n")
    # Fork: exits 0 at once; its children and setsid grandchild are killed after it.
    assert r["length_one"].exit_code == 0 and not r["length_one"].timed_out
    fork_ws = run_dir / "attempts" / "length_one" / "1" / "workspace"
    assert len((fork_ws / "pids.txt").read_text().split()) == 3
    assert marked_processes(str(fork_ws)) == []
    # Writes outside the workspace and edits its task file: judged on the session's body;
    # without the agent's sandbox both writes land and are recorded.
    vandal = r["refl_z"]
    assert not vandal.accepted and vandal.tool_calls == 0
    assert any("ReflZ.lean was edited" in n for n in vandal.notes), vandal.notes
    blocked = json.loads(
        (run_dir / "attempts" / "refl_z" / "1" / "workspace" / "vandal.json").read_text()
    )
    if agent_sandbox(network=False, mounts=()) is not None:
        assert set(blocked) == {"suite"}, blocked
        assert not (run_dir / "vandal.txt").exists()
        assert (suite / "Demo" / "ReflZ.lean").read_text() == original
        assert not any("suite changed on disk" in n for n in vandal.notes), vandal.notes
    else:
        assert blocked == {} and (run_dir / "vandal.txt").exists()
        assert (suite / "Demo" / "ReflZ.lean").read_text() != original
        assert any("suite changed on disk" in n for n in vandal.notes), vandal.notes
    assert attempt_processes(run_dir) == []


@pytest.mark.parametrize(
    ("edit", "needle"),
    [("field", "without a field"), ("difficulty", "difficulty")],
)
async def test_a_suite_without_fields_or_difficulties_is_refused(
    tmp_path: Path, edit: str, needle: str
) -> None:
    suite = suite_copy(tmp_path, ("refl_z", "and_swap"))
    text = (suite / "suite.toml").read_text()
    line = next(x for x in text.splitlines() if x.startswith(edit + " ="))
    (suite / "suite.toml").write_text(text.replace(line + "\n", "", 1))
    with pytest.raises(SuiteError, match=needle) as info:
        await run_benchmark(
            RunOptions(suite=suite, agent=f"{PY} {FAULT} exit", out=tmp_path / "r", quiet=True)
        )
    assert "refl_z" in str(info.value) or "suite.toml" in str(info.value)
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_a_run_killed_mid_run_resumes_without_redoing_finished_attempts(tmp_path: Path) -> None:
    suite = suite_copy(tmp_path, ("refl_z", "and_swap", "true_intro"))
    run_dir = tmp_path / "run"
    argv = [
        str(LEANRIG),
        "run",
        "--suite",
        str(suite),
        "--agent",
        f"{PY} {FAULT} hang",
        "--time-limit",
        "3",
        "--out",
        str(run_dir),
        "--quiet",
    ]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = run_dir / "results.jsonl"
    try:
        # No event says "a line was appended" to another process's file: poll, bounded.
        deadline = time.monotonic() + 60
        # ...and the second attempt under way (its marker is written after the first's line).
        second = run_dir / "started" / "and_swap.1"
        while time.monotonic() < deadline and process.poll() is None:
            if results.exists() and results.read_bytes().count(b"\n") >= 1 and second.exists():
                break
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()
        killed = process.pid
        os.kill(process.pid, signal.SIGKILL)  # mid-run: the second attempt's agent is running
        process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    first = read_results(run_dir).results
    assert len(first) == 1
    resumed = subprocess.run(
        [*argv, "--resume"], capture_output=True, text=True, timeout=90, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    # Finished: kept. Died in: not accepted, no other try. Not started: runs.
    assert (summary["skipped"], summary["attempts"]) == (2, 1)
    lines = raw_lines(run_dir)
    assert sorted(x.task for x in lines) == ["and_swap", "refl_z", "true_intro"]
    assert lines[0] == first[0]
    assert lines[1].reasons[0].startswith("interrupted:") and not lines[1].accepted
    # The interrupted attempt's orphans were swept on resume, the socket directory included.
    assert attempt_processes(run_dir) == []
    from agent_tools.runs.leftovers import socket_parent

    assert not list(socket_parent().glob(f"run-{killed}-*"))


@pytest.mark.parametrize(
    ("signum", "repeats"), [(signal.SIGTERM, 1), (signal.SIGINT, 1), (signal.SIGINT, 4)]
)
def test_a_run_stopped_by_a_signal_cleans_up_and_says_how_to_resume(
    tmp_path: Path, signum: signal.Signals, repeats: int
) -> None:
    """SIGTERM or Ctrl-C, also again during cleanup and until it exits: processes killed,
    socket directory gone, no traceback."""
    from agent_tools.runs.leftovers import socket_parent

    suite = suite_copy(tmp_path, ("refl_z",))
    run_dir = tmp_path / "run"
    argv = [
        str(LEANRIG),
        "run",
        "--suite",
        str(suite),
        "--agent",
        f"{PY} {FAULT} hang",
        "--time-limit",
        "60",
        "--out",
        str(run_dir),
        "--quiet",
    ]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60  # poll, bounded: the agent has started
        log = run_dir / "attempts" / "refl_z" / "1" / "agent.log"
        while time.monotonic() < deadline and process.poll() is None and not log.exists():
            time.sleep(0.05)
        time.sleep(0.5)
        assert process.poll() is None, process.communicate()
        for _ in range(repeats):
            process.send_signal(signum)
            time.sleep(0.02)
        if repeats > 1:  # and on, every few milliseconds, through the event loop's teardown
            until = time.monotonic() + 60
            while process.poll() is None and time.monotonic() < until:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signum)
                time.sleep(0.005)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    assert f"stopped by signal {int(signum)}" in err and "--resume" in err, err
    # Other runs' socket directories (a parallel test's) may come and go meanwhile.
    assert not list(socket_parent().glob(f"run-{process.pid}-*"))
    assert attempt_processes(run_dir) == []


@pytest.mark.anyio
async def test_an_agent_log_that_cannot_be_written_stops_nothing() -> None:
    """The agent's output is still read to its end, so it never blocks on a full pipe."""
    from agent_tools.runs.invocation import _drain

    sent = [b"x" * 100_000 for _ in range(5)]

    class Output(anyio.abc.ByteReceiveStream):
        async def receive(self, max_bytes: int = 65536) -> bytes:
            if not sent:
                raise anyio.EndOfStream
            return sent.pop()

        async def aclose(self) -> None:
            pass

    with anyio.fail_after(10):
        await _drain(Output(), Path("/dev/full"), 10 * 2**20)  # every write: ENOSPC
    assert sent == []


@pytest.mark.anyio
async def test_an_agent_cancelled_with_its_run_takes_its_children_along(tmp_path: Path) -> None:
    """Without bwrap, whose namespace would end them."""
    from agent_tools.runs.invocation import invoke, marked

    token = "cancelled-run-" + os.urandom(4).hex()
    var = "LEANRIG_TEST_AGENT_TOKEN"
    started = tmp_path / "started"
    argv = ["/bin/sh", "-c", f"sleep 300 & touch {started}; wait"]
    with anyio.move_on_after(20) as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_once_started() -> None:
                while not started.exists():
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()

            tg.start_soon(cancel_once_started)
            await invoke(
                argv,
                cwd=tmp_path,
                env={**os.environ, var: token},
                time_limit=60,
                token=token,
                token_var=var,
                log_path=tmp_path / "agent.log",
            )
    assert not scope.cancelled_caught and started.exists()
    assert [p.cmdline() for p in marked(token, var)] == []


@pytest.mark.anyio
async def test_a_run_stopped_as_its_agent_exits_still_kills_what_the_agent_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio._backends._asyncio as backend

    from agent_tools.runs.invocation import attempt_processes as token_holders
    from agent_tools.runs.invocation import invoke

    token = "stopped-at-exit-" + os.urandom(4).hex()
    var = "LEANRIG_TEST_AGENT_TOKEN"
    real_wait = backend.Process.wait
    stop = anyio.CancelScope()

    async def wait_then_stop(self: Any) -> int:
        code = await real_wait(self)
        stop.cancel()  # the signal arrives as the exit is seen
        return code

    monkeypatch.setattr(backend.Process, "wait", wait_then_stop)
    with stop:
        await invoke(
            ["/bin/sh", "-c", "sleep 300 & exit 0"],
            cwd=tmp_path,
            env={**os.environ, var: token},
            time_limit=60,
            token=token,
            token_var=var,
            log_path=tmp_path / "agent.log",
        )
    monkeypatch.undo()
    left = token_holders(None, token, var)
    for p in left:
        p.kill()
    assert [p.pid for p in left] == []
