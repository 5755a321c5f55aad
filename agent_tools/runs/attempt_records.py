"""What an attempt left, read by the runner after its agent: final body, ledger, ignored edits.

Blocking file I/O, for worker threads. Must not trust the agent's workspace beyond noting it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import orjson
import structlog

from lsp_bridge import LeanrigError, replace_file

from ..sessions import body_sha
from ..tasks import Task, load_suite
from .attempt_dir import AttemptDir
from .results import read_agent_file

log = structlog.get_logger("leanrig.run")

INFRA_OUTCOMES: Final = frozenset({"error:lean_failure"})  # Lean died under the call


def write_submission(path: Path, text: str) -> str | None:
    """Write the judged file for the reader; None, or a note when the agent blocked the path."""
    try:
        replace_file(path, text.encode())
    except OSError as exc:
        log.warning("run.submission_unwritten", path=str(path), error=str(exc))
        return (
            f"the workspace's {path.name} could not be written ({exc.strerror or exc}: the "
            "agent left something there); the verdict judged the final body as usual"
        )
    return None


def final_edit(ws: AttemptDir) -> tuple[str, str]:
    """The last (body, statement) this attempt's service accepted, else the task's own."""
    best: tuple[int, str, str] | None = None
    for path in ws.submission_records():
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if not isinstance(record, dict) or record.get("task") != ws.task.id:
            continue
        body, ts = record.get("body"), record.get("ts_ns")
        statement = record.get("statement", ws.task.statement)
        if (
            isinstance(body, str)
            and isinstance(statement, str)
            and isinstance(ts, int)
            and (best is None or ts > best[0])
        ):
            best = (ts, body, statement)
    return (best[1], best[2]) if best else (ws.task.body, ws.task.statement)


def final_body(ws: AttemptDir) -> str:
    return final_edit(ws)[0]


def ledger_totals(ws: AttemptDir, run_ledger: Path) -> tuple[int, float, list[str]]:
    """Tool calls, Lean seconds and Lean deaths from the attempt's ledger, appended to the run's."""
    try:
        data = ws.ledger.read_bytes()
    except FileNotFoundError:
        return 0, 0.0, []
    calls, lean_ms, died = 0, 0.0, 0
    for line in data.splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict):
            continue
        calls += entry.get("closed_by") != "server"  # not the server's own closing lines
        lean = entry.get("lean_ms")
        if isinstance(lean, int | float):
            lean_ms += lean
        if entry.get("outcome") in INFRA_OUTCOMES:
            died += 1
    append_run_ledger(run_ledger, data)
    return calls, lean_ms / 1000, [f"Lean died under {died} call(s)"] if died else []


def append_run_ledger(run_ledger: Path, data: bytes) -> None:
    """Append an attempt's ledger lines to the run's in one write."""
    if not data:
        return
    if not data.endswith(b"\n"):
        data += b"\n"
    fd = os.open(run_ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def ignored_edits(
    task: Task, ws: AttemptDir, suite_root: Path, suite_hash: str
) -> tuple[list[str], str]:
    """Notes on the agent's edits that count for nothing, and the suite's hash now (keep it)."""
    notes = []
    try:
        data = read_agent_file(ws.task_file, len(task.text.encode()) + 1)
        if data is None:
            notes.append(
                f"the workspace's {ws.task_file.name} was removed or replaced by a non-file"
            )
        elif data.decode("utf-8") != task.text:
            notes.append(f"the workspace's {ws.task_file.name} was edited (ignored)")
    except (OSError, UnicodeDecodeError):
        notes.append(f"the workspace's {ws.task_file.name} was removed or made unreadable")
    try:
        now = load_suite(suite_root).content_hash()
    except LeanrigError as exc:
        now = f"unreadable: {exc}"
    if now != suite_hash:
        notes.append(
            "the suite changed on disk during the attempt (ignored: verdicts use "
            "the tasks as loaded when the run started)"
        )
        log.warning("run.suite_changed", task=task.id, attempt=ws.attempt)
    return notes, now


__all__ = [
    "append_run_ledger",
    "body_sha",
    "final_body",
    "final_edit",
    "ignored_edits",
    "ledger_totals",
    "write_submission",
]
