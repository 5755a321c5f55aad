"""What a killed `leanrig run` leaves behind: attempts under way, their processes, socket dirs."""

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

SOCKET_PATH_MAX: Final = 100  # bytes of a Unix socket's path (the kernel allows 107)


def socket_parent() -> Path:
    """The short, private per-user directory holding every run's socket directory."""
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
    """Remove the socket directories (``run-<runner pid>-…``) of runners that are gone."""
    for entry in parent.glob("run-*-*"):
        pid = entry.name.split("-")[1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


# ``RUN_DIR/started/<task>.<k>`` marks an attempt under way. `--resume` records one left behind as
# not accepted: an agent able to bring the runner down must not earn another try.
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
    """Record every attempt the runner died in as not accepted, at the whole limit; returns them."""
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
        append_result(
            run_dir,
            AttemptResult(
                task=task_id,
                field=task.spec.field,
                difficulty=task.spec.difficulty,
                attempt=int(k),
                accepted=False,
                reasons=[INTERRUPTED],
                invocation_s=options.time_limit,
                condition=options.condition,
                model=options.model,
                agent_tool=options.agent_tool,
                started_at=started,
            ),
        )
        log.warning("run.interrupted_attempt_recorded", task=task_id, attempt=int(k))
        recorded.add((task_id, int(k)))
        marker.unlink(missing_ok=True)
    return recorded


def sweep_interrupted(run_dir: Path, done: set[tuple[str, int]]) -> int:
    """Kill the processes of attempts without a results line (by token); returns how many."""
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
