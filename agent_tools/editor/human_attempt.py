"""One human attempt at one task: its wall clock, ledger lines, result line and on-disk state.

The state survives restarts and closed editors; the clock runs from the first ``initialize`` to
the first accepted verdict's request or the time limit. Must not talk LSP or start processes."""

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

from lsp_bridge import LeanrigError, replace_file

from ..runs import (
    ATTEMPT_STATE,
    AttemptResult,
    Condition,
    append_result,
    read_results,
)
from ..sessions import Ledger
from ..tasks import Task
from ..verdict import Verdict

CONDITION: Condition = "human"

# "cut off": the wire closed without `shutdown` or a stop signal (a crash or a kill).
Ending = Literal["shutdown", "signal", "cut off", "error"]

log = structlog.get_logger("leanrig.editor")


def body_sha(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:12]


class AttemptState(BaseModel):
    """What a later `leanrig lsp` for the task needs to resume the attempt."""

    model_config = ConfigDict(extra="forbid")
    v: Literal[1] = 1
    task: str
    attempt: int = Field(ge=1)
    session: str  # the attempt's ledger session
    time_limit_s: float | None
    started_at: datetime
    start_wall: float  # time.time()
    end_wall: float | None = None  # accepted (the request's arrival) or out of time
    timed_out: bool = False
    accepted: bool = False
    body: str  # the last body Lean elaborated (at first the task's own)
    verdict: dict[str, Any] | None = None
    verdict_body: str | None = None  # the body the verdict judged
    versions: int = 0
    rejected_edits: int = 0
    checks: int = 0
    lean_ms: float = 0.0
    lean_restarts: int = 0
    worker_stops: int = 0
    connections: int = 0
    changed_before_open: bool = False  # the first open's body was not the task's own
    cut_off: int = 0  # connections that ended without the editor's `shutdown`
    editor: str = "editor"  # the last connection's editor (name and version)

    @property
    def judged(self) -> bool:
        return self.verdict is not None and self.verdict_body == self.body

    @property
    def over(self) -> bool:
        """Accepted, or out of time with the verdict on its last body."""
        return self.accepted or (self.timed_out and self.judged)


def result_of(task: Task, state: AttemptState) -> AttemptResult:
    """The attempt as a ``results.jsonl`` line: the verdict on its last judged body."""
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
        task=spec.id,
        field=spec.field,
        difficulty=spec.difficulty,
        attempt=state.attempt,
        accepted=state.accepted,
        reasons=list(verdict["reasons"]) if "reasons" in verdict else ["no verdict"],
        invocation_s=round(max(0.0, end - state.start_wall), 3),
        timed_out=state.timed_out,
        tool_calls=state.versions + state.checks,
        lean_s=round(state.lean_ms / 1000, 3),
        final_body_sha=body_sha(body),
        condition=CONDITION,
        agent_tool=state.editor,
        verdict_s=round(float(elapsed) / 1000, 3) if elapsed is not None else None,
        started_at=state.started_at,
        notes=notes,
    )


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _outcome(result: AttemptResult) -> tuple[object, ...]:
    return (
        result.accepted,
        result.timed_out,
        result.final_body_sha,
        tuple(result.reasons),
        result.invocation_s,
    )


def repair_line(run_dir: Path, task: Task, state: AttemptState) -> bool:
    """Append the attempt's line if results.jsonl's last one disagrees; True if appended."""
    mine = [
        r for r in read_results(run_dir).results if r.task == task.id and r.attempt == state.attempt
    ]
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
    """The task's attempt state (None: none started); raises `AttemptStateError` if unreadable."""
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
    """A task's attempt state file is unreadable."""


@dataclass(slots=True)
class _Pending:
    received: float  # perf_counter
    forwarded: float


@dataclass(slots=True)
class HumanAttempt:
    task: Task
    ledger: Ledger
    results: Path  # RUN_DIR/results.jsonl
    time_limit: float | None = None
    state: AttemptState | None = None  # None: a new attempt, made at ``open``
    editor: dict[str, Any] = field(default_factory=dict)
    edit_delay_ms: int | None = None
    opened_task: bool = False  # this connection has opened the task file
    closed: bool = False  # this connection's closing lines are written
    _last_line: AttemptResult | None = None
    _connection_wall: float | None = None  # time.time()
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
        replace_file(self.path, data, durable=True)

    @property
    def over(self) -> bool:
        """The attempt's time is fixed: edits no longer count."""
        return self.state is not None and self.state.end_wall is not None

    @property
    def accepted(self) -> bool:
        return self.state is not None and self.state.accepted

    @property
    def timed_out(self) -> bool:
        return self.state is not None and self.state.timed_out

    @property
    def body(self) -> str:
        return self.state.body if self.state is not None else self.task.body.rstrip()

    def open(self, editor: dict[str, Any], edit_delay_ms: int | None) -> None:
        """The editor connected: start the attempt or resume it."""
        if self._connection_wall is not None:
            return
        now = time.time()
        self._connection_wall = now
        self.editor, self.edit_delay_ms = editor, edit_delay_ms
        if self.state is None:
            self.state = AttemptState(
                task=self.task.id,
                attempt=self._attempt_number(),
                session=secrets.token_hex(16),
                time_limit_s=self.time_limit,
                started_at=datetime.fromtimestamp(now, UTC),
                start_wall=now,
                body=self.task.body.rstrip(),
            )
        self.state.connections += 1
        named = " ".join(str(v) for v in (editor.get("name"), editor.get("version")) if v)
        self.state.editor = " ".join(named.split()) or "editor"
        self._save()
        self.ledger.record(
            session=self.id,
            task=self.task.id,
            tool="open_task",
            queue_ms=0.0,
            lean_ms=0.0,
            total_ms=0.0,
            outcome="ok",
            condition=CONDITION,
            editor=editor or None,
            edit_delay_ms=edit_delay_ms,
            connection=self.state.connections,
            attempt_s=round(self.wall_s(), 3),
        )

    def task_opened(self, body: str | None) -> None:
        """The editor opened the task file; a changed first body means work before the clock."""
        if self.state is None or self.opened_task:
            return
        self.opened_task = True
        first = self.state.connections == 1 and self.state.versions == 0
        if first and body is not None and body.rstrip() != self.task.body.rstrip():
            self.state.changed_before_open = True
            self._save()

    def deadline(self) -> float | None:
        """Wall-clock time at which the limit runs out (None: no limit, or not started)."""
        if self.time_limit is None or self.state is None:
            return None
        return self.state.start_wall + self.time_limit

    def wall_s(self) -> float:
        if self.state is None:
            return 0.0
        end = self.state.end_wall if self.state.end_wall is not None else time.time()
        return max(0.0, end - self.state.start_wall)

    def stop_clock(self, *, timed_out: bool = False) -> None:
        """Stop the clock (``timed_out``: at the deadline)."""
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
        """Stop the clock if the deadline has passed; whether the attempt is out of time."""
        if self.out_of_time() and not self.over:
            self.stop_clock(timed_out=True)
        return self.timed_out

    def forwarded(self, version: int, received: float) -> None:
        self._pending[version] = _Pending(received, time.perf_counter())
        for older in [v for v in self._pending if v < version]:
            self._finish_version(older, "superseded", errors=None)

    def elaborated(
        self, version: int, *, errors: int, fatal: bool, body: str, at: float | None = None
    ) -> None:
        """Lean finished ``version`` (``at``: perf_counter, default now)."""
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
        self.ledger.record(
            session=self.id,
            task=self.task.id,
            tool="edit",
            queue_ms=(pending.forwarded - pending.received) * 1000,
            lean_ms=lean_ms,
            total_ms=(now - pending.received) * 1000,
            outcome=outcome,
            **extra,
        )

    def rejected(self, version: int, reason: str) -> None:
        if self.state is not None:
            self.state.rejected_edits += 1
            self._save()
        self.ledger.record(
            session=self.id,
            task=self.task.id,
            tool="edit",
            queue_ms=0.0,
            lean_ms=0.0,
            total_ms=0.0,
            outcome="rejected",
            version=version,
            reason=reason,
        )

    def lean_restarted(self) -> None:
        if self.state is not None:
            self.state.lean_restarts += 1
            self._save()
        self._pending.clear()

    def worker_stopped(self, version: int) -> None:
        """Lean's worker for the task file stopped; counted for the closing ledger line only."""
        if self.state is not None:
            self.state.worker_stops += 1
            self._save()
        log.warning("lean.worker_stopped", task=self.task.id, version=version)

    def judged(self, body: str) -> bool:
        return self.state is not None and self.state.verdict_body == body

    def checked(self, verdict: Verdict, body: str, *, requested: float) -> None:
        """Record a verdict on ``body`` asked for at ``requested`` (wall clock)."""
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
                # The clock stops at the request even if the limit ran out during the verdict.
                state.timed_out = False
                state.end_wall = (
                    requested if state.end_wall is None else min(state.end_wall, requested)
                )
            else:  # asked for after the limit: accepted after the timeout, as for agents
                state.timed_out = True
                state.end_wall = deadline if state.end_wall is None else state.end_wall
        self._save()
        self.ledger.record(
            session=self.id,
            task=self.task.id,
            tool="check_proof",
            queue_ms=0.0,
            lean_ms=verdict.elapsed_ms,
            total_ms=(time.time() - requested) * 1000,
            outcome="ok",
            accepted=verdict.accepted,
            body_sha=body_sha(body),
        )

    def result(self) -> AttemptResult:
        assert self.state is not None
        return result_of(self.task, self.state)

    def write_result(self) -> dict[str, Any] | None:
        """Append the attempt's line unless the last one says the same; None if never started.

        Once the attempt is over, only a changed outcome makes a new line."""
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
        """Write the attempt's line and the connection's closing line once; None if not started."""
        if self.closed or self.state is None:
            return None
        self.closed = True
        if ended == "cut off":
            self.state.cut_off += 1
        self._save()
        line = self.write_result()
        state = self.state
        self.ledger.record(
            session=self.id,
            task=self.task.id,
            tool="close_session",
            queue_ms=0.0,
            lean_ms=0.0,
            total_ms=0.0,
            outcome="ok",
            session_wall_ms=self.wall_s() * 1000,
            accepted=state.accepted,
            condition=CONDITION,
            edit_delay_ms=self.edit_delay_ms,
            versions=state.versions,
            rejected_edits=state.rejected_edits,
            lean_restarts=state.lean_restarts,
            worker_stops=state.worker_stops,
            connection=state.connections,
            over=state.over,
            ended=ended,
            connection_wall_ms=None
            if self._connection_wall is None
            else (time.time() - self._connection_wall) * 1000,
        )
        return line

    def _attempt_number(self) -> int:
        if not self.results.exists():
            return 1
        done = read_results(self.results.parent).results
        return 1 + max((r.attempt for r in done if r.task == self.task.id), default=0)
