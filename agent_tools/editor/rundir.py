"""A human run directory's ``run.json``, written by its first attempt, checked by every later one.

Attempts of one run share a suite and a time limit; each task gets one attempt, resumable."""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import anyio
import psutil

from ..runs import (
    ATTEMPT_STATE,
    RUN_FILE,
    Machine,
    ResultsError,
    RunInfo,
    TaskRef,
    read_results,
    read_run_info,
    time_limit_text,
    write_run_info,
)
from ..servers import package_version
from ..tasks import Suite, SuiteError, Task
from .human_attempt import AttemptState, AttemptStateError, read_state, repair_line

HUMAN_RETRY_POLICY = "none: a human attempt is never retried"
# Older human run.json files hold this placeholder limit: their real one is unknown, not compared.
LEGACY_HUMAN_LIMIT = 1800.0
NEXT = "give this attempt another --run-dir"


def check_run_dir(run_dir: Path, suite: Suite, time_limit: float | None) -> None:
    """Raise ``SuiteError`` if ``run_dir``'s run.json describes another run."""
    if not (run_dir / RUN_FILE).exists():
        return
    try:
        info = read_run_info(run_dir)
    except ResultsError as exc:
        raise SuiteError(exc.message, hint=NEXT) from None
    legacy = info.retry_policy != HUMAN_RETRY_POLICY and info.time_limit_s == LEGACY_HUMAN_LIMIT
    if info.condition != "human":
        why = f"it holds a `leanrig run` ({info.condition}), not attempts in an editor"
    elif info.suite_hash and info.suite_hash != (digest := suite.content_hash()):
        why = (
            f"its attempts are on suite {info.suite_name} {info.suite_version} (hash "
            f"{info.suite_hash[:12]}), this one on {suite.name} {suite.spec.version} (hash "
            f"{digest[:12]}): a report would mix the two"
        )
    elif info.time_limit_s != time_limit and not legacy:
        why = (
            f"its attempts had the time limit {time_limit_text(info.time_limit_s)}, this one "
            f"{time_limit_text(time_limit)}"
        )
    else:
        return
    raise SuiteError(f"run directory {run_dir}: {why}", hint=NEXT)


def ensure_run_info(
    run_dir: Path, suite: Suite, lean_version: str, time_limit: float | None, sandbox: str
) -> None:
    """Write the run's run.json if it has none, else check the attempt belongs to the run."""
    if (run_dir / RUN_FILE).exists():
        check_run_dir(run_dir, suite, time_limit)
        return
    tasks = [
        TaskRef(id=t.id, field=t.spec.field, difficulty=t.spec.difficulty)
        for t in suite.tasks.values()
    ]
    write_run_info(
        run_dir,
        RunInfo(
            suite_name=suite.name,
            suite_version=suite.spec.version,
            suite_hash=suite.content_hash(),
            task_count=len(tasks),
            tasks=tasks,
            condition="human",
            agent_tool="editor",
            time_limit_s=time_limit,
            retry_policy=HUMAN_RETRY_POLICY,
            leanrig_version=package_version(),
            lean_version=lean_version,
            sandbox=sandbox,
            machine=Machine(cores=os.cpu_count() or 1, memory_bytes=psutil.virtual_memory().total),
            started_at=datetime.now(UTC),
            agent_command="leanrig lsp (a human in an editor)",
        ),
    )


def attempt_state(run_dir: Path, task: Task, time_limit: float | None) -> AttemptState | None:
    """The task's attempt to resume (None: a new one); raises ``SuiteError`` if it is over."""
    try:
        state = read_state(run_dir, task.id)
    except AttemptStateError as exc:
        raise SuiteError(exc.message, hint=NEXT) from None
    if state is None:
        if any(r.task == task.id for r in read_results(run_dir).results):
            raise SuiteError(
                f"task {task.id} already has an attempt in {run_dir} (results.jsonl): a run "
                "gives each task one attempt",
                hint=NEXT,
            )
        return None
    if state.over:
        repair_line(run_dir, task, state)  # in case it was killed before writing its line
        how = (
            f"accepted after {state.end_wall - state.start_wall:.1f} s"
            if state.accepted and state.end_wall is not None
            else "out of time"
        )
        raise SuiteError(
            f"task {task.id}'s attempt in {run_dir} is over ({how}): a run gives each task one "
            "attempt",
            hint=NEXT,
        )
    if state.time_limit_s != time_limit:
        raise SuiteError(
            f"task {task.id}'s attempt in {run_dir} has the time limit "
            f"{time_limit_text(state.time_limit_s)}, this start {time_limit_text(time_limit)}",
            hint="start it with the attempt's own --time-limit",
        )
    return state


LOCK_WAIT_SECONDS = 15.0  # for another `leanrig lsp` on the attempt (an editor's restart)


@asynccontextmanager
async def attempt_lock(run_dir: Path, task_id: str) -> AsyncIterator[None]:
    """Hold the attempt's ``flock``, waiting up to LOCK_WAIT_SECONDS; else ``SuiteError``."""
    path = run_dir / ATTEMPT_STATE / f"{task_id}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        with anyio.move_on_after(LOCK_WAIT_SECONDS):
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await anyio.sleep(0.1)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise SuiteError(
                f"task {task_id}'s attempt in {run_dir} is open in another editor (leanrig lsp "
                f"pid {holder})",
                hint="close that editor (or its server) first; an attempt has one editor at a time",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
