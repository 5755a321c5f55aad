"""What a `leanrig run` that was killed leaves behind, and how the next one deals with it: the
attempts under way (`RUN_DIR/started/`, recorded as not accepted on `--resume`), their
processes (killed by the attempt's token), and runners' socket directories (removed when their
runner is gone). Must not: run an attempt.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import orjson
import psutil
import structlog

from ..tasks import Suite
from .attempt_dir import ATTEMPT_TOKEN_VAR
from .invocation import KILL_DEADLINE, kill_attempt
from .options import RunError, RunOptions
from .results import AttemptResult, append_result

log = structlog.get_logger("leanrig.run")

SOCKET_PATH_MAX: Final = 100  # bytes of a Unix socket's path (the kernel's limit is 107)


def socket_parent() -> Path:
    """The per-user directory holding every run's socket directory (short: a socket path has
    at most 107 bytes), private to the user."""
    base = tempfile.gettempdir()
    if len(base) > SOCKET_PATH_MAX - 60:
        base = "/tmp"
    parent = Path(base) / f"leanrig-sockets-{os.getuid()}"
    parent.mkdir(mode=0o700, exist_ok=True)
    if parent.is_symlink() or parent.stat().st_uid != os.getuid():
        raise RunError(f"{parent} is not this user's directory", hint="remove it and run again")
    parent.chmod(0o700)
    return parent


def sweep_socket_dirs(parent: Path) -> None:
    """Remove the socket directories of runners that are gone (a run killed with SIGKILL
    cannot remove its own): each is named ``run-<runner pid>-…``."""
    for entry in parent.glob("run-*-*"):
        pid = entry.name.split("-")[1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


# An attempt under way: ``RUN_DIR/started/<task>.<k>``, written before its agent starts and
# removed once its results line is written or it is cancelled. One left behind is an attempt
# the runner died in (a crash, a disk the agent filled, a kill): `--resume` records it as not
# accepted instead of running it again — an agent able to bring the runner down got another,
# unrecorded try that way (a red-team sweep).
STARTED_DIR = "started"


INTERRUPTED = (
    "interrupted: the runner stopped during this attempt (recorded as not accepted, not run "
    "again: an attempt that could bring the runner down must not earn another try)"
)


def started_marker(run_dir: Path, task_id: str, k: int) -> Path:
    return run_dir / STARTED_DIR / f"{task_id}.{k}"


def mark_started(marker: Path) -> None:
    marker.parent.mkdir(exist_ok=True)
    marker.write_text(datetime.now(UTC).isoformat())


def record_interrupted(
    run_dir: Path, suite: Suite, options: RunOptions, done: set[tuple[str, int]]
) -> set[tuple[str, int]]:
    """The results line of every attempt the runner died in (``STARTED_DIR``): not accepted,
    its time the whole limit. Returns those attempts."""
    recorded: set[tuple[str, int]] = set()
    for marker in sorted((run_dir / STARTED_DIR).glob("*.*")):
        task_id, _, k = marker.name.rpartition(".")
        task = suite.tasks.get(task_id)
        if task is None or not k.isdigit() or (task_id, int(k)) in done:
            marker.unlink(missing_ok=True)
            continue
        try:
            started = datetime.fromisoformat(marker.read_text().strip())
        except (OSError, ValueError):
            started = None
        append_result(run_dir, AttemptResult(
            task=task_id, field=task.spec.field, difficulty=task.spec.difficulty,
            attempt=int(k), accepted=False, reasons=[INTERRUPTED],
            invocation_s=options.time_limit, condition=options.condition, model=options.model,
            agent_tool=options.agent_tool, started_at=started,
        ))  # fmt: skip
        log.warning("run.interrupted_attempt_recorded", task=task_id, attempt=int(k))
        recorded.add((task_id, int(k)))
        marker.unlink(missing_ok=True)
    return recorded


def sweep_interrupted(run_dir: Path, done: set[tuple[str, int]]) -> int:
    """Kill what interrupted attempts left running (a `leanrig run` killed mid-attempt
    leaves its agent, server and Lean behind): every process carrying the token of an attempt
    without a results line. Returns how many were killed."""
    killed = 0
    for config in run_dir.glob("attempts/*/*/workspace/mcp.json"):
        root = config.parent.parent
        attempt = root.name.removesuffix("-retry")
        if not attempt.isdigit() or (root.parent.name, int(attempt)) in done:
            continue
        try:
            servers = orjson.loads(config.read_bytes())["mcpServers"].values()
            tokens = {s["env"][ATTEMPT_TOKEN_VAR] for s in servers}
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            continue
        for token in tokens:
            pids, _ = kill_attempt(None, token, ATTEMPT_TOKEN_VAR, KILL_DEADLINE)
            killed += len(pids)
    if killed:
        log.warning("run.resume_swept", killed=killed)
    return killed
