"""One human attempt at one task: its clock, its ledger lines, its ``results.jsonl`` line, and
its state on disk (``RUN_DIR/attempt-state/<task>.json``), so that one attempt per task survives the
editor: a restart of the server, a crash, a closed editor or laptop.

The clock is the wall clock (it runs while the machine sleeps, and across processes). It starts
when the editor first connects to `leanrig lsp` for the task (``initialize``: before any file is
open, so no Lean work in the proxy precedes it) and stops at the first accepted verdict (the
command's arrival, so the verdict's own time is excluded, as for agents) or at the time limit.
Closing the editor does not stop it: the next `leanrig lsp` for the task resumes the attempt,
with the time away counted (``AttemptState``); an attempt that is over refuses another start.
Ledger lines use the agent sessions' schema (``sessions.Ledger``), one session per attempt: one
per version Lean elaborated (``tool="edit"``: ``queue_ms`` from the editor's change to leanrig
forwarding it, ``lean_ms`` from forwarding to Lean's final ``$/lean/fileProgress`` for that
version, ``errors``), one per refused edit (``outcome="rejected"``), one per verdict
(``tool="check_proof"``), and an ``open_task`` and a ``close_session`` (``session_wall_ms``,
how the connection ``ended``) per editor connection; a connection cut off (no `shutdown`: the
server killed, the editor crashed or killed) is noted on the results line.

It must not talk LSP or start processes: the proxy calls it.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lsp_bridge import LeanrigError

from ..runs import (
    ATTEMPT_STATE,
    AttemptResult,
    Condition,
    append_result,
    read_results,
)
from ..sessions import Ledger, replace_file
from ..tasks import Task
from ..verdict import Verdict

CONDITION: Condition = "human"

# How an editor connection ended: the editor's `shutdown` (or `exit`), a stop signal
# (SIGTERM/SIGINT: an editor's polite stop), its end of the wire closed without either ("cut
# off": the server killed, the editor crashed or was killed), or leanrig failing.
Ending = Literal["shutdown", "signal", "cut off", "error"]

log = structlog.get_logger("leanrig.editor")


def body_sha(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:12]


class AttemptState(BaseModel):
    """What a later `leanrig lsp` for the task needs to go on with the attempt: the clock's
    start and end, the last body Lean elaborated, the verdicts, the counts."""

    model_config = ConfigDict(extra="forbid")
    v: Literal[1] = 1
    task: str
    attempt: int = Field(ge=1)
    session: str  # the attempt's ledger session
    time_limit_s: float | None
    started_at: datetime
    start_wall: float  # time.time() at the start
    end_wall: float | None = None  # accepted (the request's arrival) or out of time
    timed_out: bool = False
    accepted: bool = False
    body: str  # the last body Lean elaborated (at first the task's own), as submitted
    verdict: dict[str, Any] | None = None
    verdict_body: str | None = None  # the body the verdict judged
    versions: int = 0
    rejected_edits: int = 0
    checks: int = 0
    lean_ms: float = 0.0
    lean_restarts: int = 0
    worker_stops: int = 0
    connections: int = 0  # editor connections (`leanrig lsp` starts) so far
    changed_before_open: bool = False  # the first open's body was not the task's own
    # Connections that ended without the editor's `shutdown` (its server killed, the editor
    # crashed or killed): leanrig finished them as for a closed editor.
    cut_off: int = 0
    editor: str = "editor"  # the last connection's editor (name and version)

    @property
    def judged(self) -> bool:
        """Has the last body had its verdict?"""
        return self.verdict is not None and self.verdict_body == self.body

    @property
    def over(self) -> bool:
        """Accepted, or out of time with the verdict on its last body."""
        return self.accepted or (self.timed_out and self.judged)


def result_of(task: Task, state: AttemptState) -> AttemptResult:
    """The attempt as a ``results.jsonl`` line (the runs layer's model, condition human): the
    verdict on its last judged body. The editor (name and version from ``initialize``) stands
    where an agent run records its agent tool; human-only facts (``editDelay``, versions,
    refused edits, Lean restarts) are in the ledger's closing lines."""
    spec, verdict = task.spec, state.verdict or {}
    elapsed = verdict.get("elapsed_ms")
    end = state.end_wall if state.end_wall is not None else time.time()
    notes = []
    if state.connections > 1:
        notes.append(
            f"the editor connected {state.connections} times; the clock ran from the first "
            "(time away included)"
        )
    if state.changed_before_open:
        notes.append(
            "the task file was first opened with a proof already in it (written before the "
            "clock started)"
        )
    if state.cut_off:
        notes.append(
            f"the editor's connection ended {_times(state.cut_off)} without `shutdown` (its "
            "server killed, or the editor crashed or was killed): leanrig closed the attempt "
            "as for a closed editor"
        )
    body = state.verdict_body if state.verdict_body is not None else state.body
    return AttemptResult(
        task=spec.id, field=spec.field, difficulty=spec.difficulty, attempt=state.attempt,
        accepted=state.accepted,
        reasons=list(verdict["reasons"]) if "reasons" in verdict else ["no verdict"],
        invocation_s=round(max(0.0, end - state.start_wall), 3), timed_out=state.timed_out,
        tool_calls=state.versions + state.checks, lean_s=round(state.lean_ms / 1000, 3),
        final_body_sha=body_sha(body), condition=CONDITION, agent_tool=state.editor,
        verdict_s=round(float(elapsed) / 1000, 3) if elapsed is not None else None,
        started_at=state.started_at, notes=notes,
    )  # fmt: skip


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _outcome(result: AttemptResult) -> tuple[object, ...]:
    return (result.accepted, result.timed_out, result.final_body_sha, tuple(result.reasons),
            result.invocation_s)  # fmt: skip


def repair_line(run_dir: Path, task: Task, state: AttemptState) -> bool:
    """Append the attempt's line when results.jsonl's last one for it says otherwise (the
    process was killed between saving the state and writing the line); True if appended."""
    mine = [r for r in read_results(run_dir).results
            if r.task == task.id and r.attempt == state.attempt]  # fmt: skip
    want = result_of(task, state)
    last = mine[-1] if mine else None
    if last is not None and (last.accepted, last.timed_out, last.final_body_sha) == (
        want.accepted,
        want.timed_out,
        want.final_body_sha,
    ):
        return False
    append_result(run_dir, want)
    return True


def state_path(run_dir: Path, task_id: str) -> Path:
    return run_dir / ATTEMPT_STATE / f"{task_id}.json"


def read_state(run_dir: Path, task_id: str) -> AttemptState | None:
    """The task's attempt state in ``run_dir`` (None: no attempt has started, or the file is
    unreadable: then ``AttemptStateError``)."""
    path = state_path(run_dir, task_id)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return AttemptState.model_validate(orjson.loads(data))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise AttemptStateError(f"{path} is unreadable ({str(exc)[:200]})") from None


class AttemptStateError(LeanrigError):
    """A task's attempt state file is unreadable (`read_state`). (No hint of its own: the
    editor re-raises it as a `SuiteError` with its own.)"""


@dataclass(slots=True)
class _Pending:
    received: float  # the editor's change arrived (perf_counter)
    forwarded: float  # sent to Lean


@dataclass(slots=True)
class HumanAttempt:
    task: Task
    ledger: Ledger
    results: Path  # RUN_DIR/results.jsonl
    time_limit: float | None = None
    # The attempt's state so far (a resumed attempt: read from its file; None: a new one,
    # made at ``open``).
    state: AttemptState | None = None
    editor: dict[str, Any] = field(default_factory=dict)
    edit_delay_ms: int | None = None
    opened_task: bool = False  # this connection has opened the task file
    closed: bool = False  # this connection's closing lines are written
    _last_line: AttemptResult | None = None
    _connection_wall: float | None = None  # this connection's start (time.time())
    _pending: dict[int, _Pending] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return state_path(self.results.parent, self.task.id)

    @property
    def id(self) -> str:
        return self.state.session if self.state is not None else ""

    @property
    def opened(self) -> bool:
        return self.state is not None and self._connection_wall is not None

    @property
    def resumed(self) -> bool:
        return self.state is not None and self.state.connections > 1

    def _save(self) -> None:
        if self.state is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = orjson.dumps(self.state.model_dump(mode="json"))
        replace_file(self.path, data, durable=True)  # the clock survives a crash of the machine

    # -- the clock -------------------------------------------------------------------------

    @property
    def over(self) -> bool:
        """The attempt's time is fixed (accepted or out of time): edits no longer count."""
        return self.state is not None and self.state.end_wall is not None

    @property
    def accepted(self) -> bool:
        return self.state is not None and self.state.accepted

    @property
    def timed_out(self) -> bool:
        return self.state is not None and self.state.timed_out

    @property
    def body(self) -> str:
        """The last body Lean elaborated in this attempt (at first the task's own)."""
        return self.state.body if self.state is not None else self.task.body.rstrip()

    def open(self, editor: dict[str, Any], edit_delay_ms: int | None) -> None:
        """The editor connected: the attempt starts (or goes on, resumed)."""
        if self._connection_wall is not None:
            return
        now = time.time()
        self._connection_wall = now
        self.editor, self.edit_delay_ms = editor, edit_delay_ms
        if self.state is None:
            self.state = AttemptState(
                task=self.task.id, attempt=self._attempt_number(), session=secrets.token_hex(16),
                time_limit_s=self.time_limit, started_at=datetime.fromtimestamp(now, UTC),
                start_wall=now, body=self.task.body.rstrip(),
            )  # fmt: skip
        self.state.connections += 1
        named = " ".join(str(v) for v in (editor.get("name"), editor.get("version")) if v)
        self.state.editor = " ".join(named.split()) or "editor"  # (Emacs's has line breaks)
        self._save()
        self.ledger.record(session=self.id, task=self.task.id, tool="open_task", queue_ms=0.0,
                           lean_ms=0.0, total_ms=0.0, outcome="ok", condition=CONDITION,
                           editor=editor or None, edit_delay_ms=edit_delay_ms,
                           connection=self.state.connections,
                           attempt_s=round(self.wall_s(), 3))  # fmt: skip

    def task_opened(self, body: str | None) -> None:
        """The editor opened the task file with ``body`` (None: out of scope). A first open,
        before any version of the attempt, whose body is not the task's own means work done
        before the clock started; it is recorded (the result's notes)."""
        if self.state is None or self.opened_task:
            return
        self.opened_task = True
        first = self.state.connections == 1 and self.state.versions == 0
        if first and body is not None and body.rstrip() != self.task.body.rstrip():
            self.state.changed_before_open = True
            self._save()

    def deadline(self) -> float | None:
        """Wall-clock time at which the limit runs out (None: no limit or not started)."""
        if self.time_limit is None or self.state is None:
            return None
        return self.state.start_wall + self.time_limit

    def wall_s(self) -> float:
        if self.state is None:
            return 0.0
        end = self.state.end_wall if self.state.end_wall is not None else time.time()
        return max(0.0, end - self.state.start_wall)

    def stop_clock(self, *, timed_out: bool = False) -> None:
        """Out of time (``timed_out``: the clock stops at the deadline), or a final stop."""
        if self.state is None or self.state.end_wall is not None:
            return
        deadline = self.deadline()
        self.state.end_wall = deadline if timed_out and deadline is not None else time.time()
        self.state.timed_out = timed_out
        self._save()

    def out_of_time(self) -> bool:
        deadline = self.deadline()
        return deadline is not None and time.time() >= deadline

    def expire(self) -> bool:
        """Stop the clock at the deadline if it has passed (whoever notices first: the timer,
        an edit, a verdict's request); whether the attempt is out of time."""
        if self.out_of_time() and not self.over:
            self.stop_clock(timed_out=True)
        return self.timed_out

    # -- versions ----------------------------------------------------------------------------

    def forwarded(self, version: int, received: float) -> None:
        self._pending[version] = _Pending(received, time.perf_counter())
        for older in [v for v in self._pending if v < version]:
            self._finish_version(older, "superseded", errors=None)

    def elaborated(
        self, version: int, *, errors: int, fatal: bool, body: str, at: float | None = None
    ) -> None:
        """Lean finished ``version`` (at ``at``: perf_counter, default now)."""
        if version in self._pending:
            outcome = "fatal" if fatal else "ok"
            self._finish_version(version, outcome, errors=errors, body=body, at=at)

    def _finish_version(
        self,
        version: int,
        outcome: str,
        *,
        errors: int | None,
        body: str | None = None,
        at: float | None = None,
    ) -> None:
        pending = self._pending.pop(version)
        now = at if at is not None else time.perf_counter()
        lean_ms = (now - pending.forwarded) * 1000
        if self.state is not None:
            self.state.lean_ms += lean_ms
            if outcome != "superseded":
                self.state.versions += 1
            if body is not None and not self.over:
                self.state.body = body
            self._save()
        extra: dict[str, Any] = {"version": version}
        if errors is not None:
            extra["errors"] = errors
        if body is not None:
            extra["body_sha"] = body_sha(body)
        self.ledger.record(session=self.id, task=self.task.id, tool="edit",
                           queue_ms=(pending.forwarded - pending.received) * 1000,
                           lean_ms=lean_ms, total_ms=(now - pending.received) * 1000,
                           outcome=outcome, **extra)  # fmt: skip

    def rejected(self, version: int, reason: str) -> None:
        if self.state is not None:
            self.state.rejected_edits += 1
            self._save()
        self.ledger.record(session=self.id, task=self.task.id, tool="edit", queue_ms=0.0,
                           lean_ms=0.0, total_ms=0.0, outcome="rejected", version=version,
                           reason=reason)  # fmt: skip

    def lean_restarted(self) -> None:
        if self.state is not None:
            self.state.lean_restarts += 1
            self._save()
        self._pending.clear()

    def worker_stopped(self, version: int) -> None:
        """Lean's worker for the task file stopped (crashed, killed) at ``version``: counted
        for the closing ledger line (not a call: no line of its own, whose 0 ms would count
        in the report's timings)."""
        if self.state is not None:
            self.state.worker_stops += 1
            self._save()
        log.warning("lean.worker_stopped", task=self.task.id, version=version)

    # -- verdicts and the result line ---------------------------------------------------------

    def judged(self, body: str) -> bool:
        """Has ``body`` had its verdict in this attempt already (the last one)?"""
        return self.state is not None and self.state.verdict_body == body

    def checked(self, verdict: Verdict, body: str, *, requested: float) -> None:
        """A verdict on ``body`` that was asked for at ``requested`` (wall clock)."""
        state = self.state
        if state is None:
            return
        state.checks += 1
        deadline = self.deadline()
        in_time = deadline is None or requested <= deadline
        if not state.accepted or verdict.accepted:  # an accepted verdict is never replaced
            state.verdict, state.verdict_body = verdict.to_json(), body
        if verdict.accepted and not state.accepted:
            state.accepted = True
            if in_time:
                # The clock stops at the request, even if the limit ran out while the
                # verdict ran (the timer stopped it at the deadline meanwhile).
                state.timed_out = False
                state.end_wall = (
                    requested if state.end_wall is None else min(state.end_wall, requested)
                )
            else:  # asked for after the limit: accepted after the timeout, as for agents
                state.timed_out = True
                state.end_wall = deadline if state.end_wall is None else state.end_wall
        self._save()
        self.ledger.record(session=self.id, task=self.task.id, tool="check_proof", queue_ms=0.0,
                           lean_ms=verdict.elapsed_ms,
                           total_ms=(time.time() - requested) * 1000,
                           outcome="ok", accepted=verdict.accepted,
                           body_sha=body_sha(body))  # fmt: skip

    def result(self) -> AttemptResult:
        assert self.state is not None
        return result_of(self.task, self.state)

    def write_result(self) -> dict[str, Any] | None:
        """Append the attempt's line unless the last one written says the same (the last
        line of an attempt counts; once the attempt is over, only a changed outcome makes a
        new line — what the editor does after its end, a version Lean still elaborates,
        changes no result); None if the attempt never started."""
        if self.state is None:
            return None
        result = self.result()
        last = self._last_line
        settled = last is not None and self.state.over and _outcome(last) == _outcome(result)
        if result != last and not settled:
            self.results.parent.mkdir(parents=True, exist_ok=True)
            append_result(self.results.parent, result)
            self._last_line = result
        return result.model_dump(mode="json")

    def close(self, ended: Ending = "shutdown") -> dict[str, Any] | None:
        """The connection ends (``ended``: how): the attempt's line and this connection's
        closing ledger line (once); None if the attempt never started."""
        if self.closed or self.state is None:
            return None
        self.closed = True
        if ended == "cut off":
            self.state.cut_off += 1
        self._save()
        line = self.write_result()
        state = self.state
        self.ledger.record(session=self.id, task=self.task.id, tool="close_session",
                           queue_ms=0.0, lean_ms=0.0, total_ms=0.0, outcome="ok",
                           session_wall_ms=self.wall_s() * 1000, accepted=state.accepted,
                           condition=CONDITION, edit_delay_ms=self.edit_delay_ms,
                           versions=state.versions, rejected_edits=state.rejected_edits,
                           lean_restarts=state.lean_restarts, worker_stops=state.worker_stops,
                           connection=state.connections, over=state.over, ended=ended,
                           connection_wall_ms=None if self._connection_wall is None
                           else (time.time() - self._connection_wall) * 1000)  # fmt: skip
        return line

    def _attempt_number(self) -> int:
        if not self.results.exists():
            return 1
        done = read_results(self.results.parent).results
        return 1 + max((r.attempt for r in done if r.task == self.task.id), default=0)
