"""What an attempt left, read by the runner after its agent: the final body (the service's
submission record), the submission file written for the reader, the ledger's tool calls and
Lean time (appended to the run's), and what the agent changed that counts for nothing.
Blocking file I/O (the runner calls these in worker threads). Must not: trust anything in the
agent's workspace beyond noting it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import orjson
import structlog

from lsp_bridge import LeanrigError

from ..sessions import body_sha, replace_file
from ..tasks import Task, load_suite
from .attempt_dir import AttemptDir
from .results import read_agent_file

log = structlog.get_logger("leanrig.run")

# Ledger outcomes that mean Lean died under a call (the pool replaced the process).
INFRA_OUTCOMES: Final = frozenset({"error:lean_failure"})


def write_submission(path: Path, text: str) -> str | None:
    """Write the judged file as the workspace's ``Submission.lean`` (for the reader: the
    verdict judges the text itself); None, or the note for the results line when the agent
    left something there that cannot be replaced by a file (a directory: the runner crashed on
    it and `--resume` gave the agent another try, unrecorded, as often as it liked)."""
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
    """The last (body, statement) any session of this attempt's service accepted (the task's
    own when none was opened): its submission record, in the runner's own directory (never
    the agent's to write where the sandbox works)."""
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
    """The last body any session of this attempt's service accepted (``final_edit``)."""
    return final_edit(ws)[0]


def ledger_totals(ws: AttemptDir, run_ledger: Path) -> tuple[int, float, list[str]]:
    """Tool calls and Lean seconds from the attempt's ledger (appended to the run's), and
    whether Lean died under a call."""
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
        calls += entry.get("closed_by") != "server"  # (the server's own closing lines)
        lean = entry.get("lean_ms")
        if isinstance(lean, int | float):
            lean_ms += lean
        if entry.get("outcome") in INFRA_OUTCOMES:
            died += 1
    append_run_ledger(run_ledger, data)
    return calls, lean_ms / 1000, [f"Lean died under {died} call(s)"] if died else []


def append_run_ledger(run_ledger: Path, data: bytes) -> None:
    """An attempt's ledger lines appended to the run's (one write, whole lines)."""
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
    """Files the agent changed that count for nothing (recorded in the results line):
    its copy of the task file, the suite on disk (every verdict uses the tasks as loaded
    when the run started). Returns the notes and the suite's hash now (a change is noted
    once: the caller keeps the new hash)."""
    notes = []
    try:
        data = read_agent_file(ws.task_file, len(task.text.encode()) + 1)
        if data is None:
            notes.append(f"the workspace's {ws.task_file.name} was removed or replaced by a "
                         "non-file")  # fmt: skip
        elif data.decode("utf-8") != task.text:
            notes.append(f"the workspace's {ws.task_file.name} was edited (ignored)")
    except (OSError, UnicodeDecodeError):
        notes.append(f"the workspace's {ws.task_file.name} was removed or made unreadable")
    try:
        now = load_suite(suite_root).content_hash()
    except LeanrigError as exc:
        now = f"unreadable: {exc}"
    if now != suite_hash:
        notes.append("the suite changed on disk during the attempt (ignored: verdicts use "
                     "the tasks as loaded when the run started)")  # fmt: skip
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
