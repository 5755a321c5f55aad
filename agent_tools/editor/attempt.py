"""One human attempt at one task: its clock, its ledger lines and its ``results.jsonl`` line.

The clock starts at the editor's first open of the task file and stops at the first accepted
verdict (the command's arrival, so the verdict's own time is excluded, as for agents), at the
time limit, or when the editor goes away. Ledger lines use the agent sessions' schema
(``sessions.Ledger``): one per version Lean elaborated (``tool="edit"``: ``queue_ms`` from the
editor's change to leanrig forwarding it, ``lean_ms`` from forwarding to Lean's final
``$/lean/fileProgress`` for that version, ``errors``), one per refused edit
(``outcome="rejected"``), one per verdict (``tool="check_proof"``) and a closing line with
``session_wall_ms``.

It must not talk LSP or start processes: the proxy calls it.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from ..runs import AttemptResult, Condition, append_result, read_results
from ..sessions import Ledger
from ..tasks import Task
from ..verdict import Verdict

CONDITION: Condition = "human"

log = structlog.get_logger("leanrig.editor")


def body_sha(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:12]


@dataclass(slots=True)
class _Pending:
    received: float  # the editor's change arrived
    forwarded: float  # sent to Lean


@dataclass(slots=True)
class Attempt:
    task: Task
    ledger: Ledger
    results: Path  # RUN_DIR/results.jsonl
    time_limit: float | None = None
    id: str = field(default_factory=lambda: secrets.token_hex(16))
    opened_at: float | None = None  # perf_counter of the first open
    started_at: datetime | None = None
    ended_at: float | None = None
    editor: dict[str, Any] = field(default_factory=dict)
    edit_delay_ms: int | None = None
    accepted: bool = False
    timed_out: bool = False
    verdict: dict[str, Any] | None = None
    body: str = ""
    versions: int = 0
    rejected_edits: int = 0
    checks: int = 0
    lean_restarts: int = 0
    worker_stops: int = 0
    lean_ms: float = 0.0
    written: bool = False
    _pending: dict[int, _Pending] = field(default_factory=dict)

    # -- the clock -------------------------------------------------------------------------

    @property
    def over(self) -> bool:
        """The attempt's time is fixed (accepted or out of time): edits no longer count."""
        return self.ended_at is not None

    def open(self, editor: dict[str, Any], edit_delay_ms: int | None) -> None:
        if self.opened_at is not None:
            return
        self.opened_at = time.perf_counter()
        self.started_at = datetime.now(UTC)
        self.editor, self.edit_delay_ms = editor, edit_delay_ms
        self.ledger.record(session=self.id, task=self.task.id, tool="open_task", queue_ms=0.0,
                           lean_ms=0.0, total_ms=0.0, outcome="ok", condition=CONDITION,
                           editor=editor or None, edit_delay_ms=edit_delay_ms)  # fmt: skip

    def deadline(self) -> float | None:
        """perf_counter time at which the limit runs out (None: no limit or not opened)."""
        if self.time_limit is None or self.opened_at is None:
            return None
        return self.opened_at + self.time_limit

    def wall_s(self) -> float:
        if self.opened_at is None:
            return 0.0
        end = self.ended_at if self.ended_at is not None else time.perf_counter()
        return end - self.opened_at

    def stop_clock(self, *, timed_out: bool = False) -> None:
        if self.ended_at is None:
            deadline = self.deadline()
            self.ended_at = deadline if timed_out and deadline is not None else time.perf_counter()
            self.timed_out = timed_out

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
        self.lean_ms += lean_ms
        if outcome != "superseded":
            self.versions += 1
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
        self.rejected_edits += 1
        self.ledger.record(session=self.id, task=self.task.id, tool="edit", queue_ms=0.0,
                           lean_ms=0.0, total_ms=0.0, outcome="rejected", version=version,
                           reason=reason)  # fmt: skip

    def lean_restarted(self) -> None:
        self.lean_restarts += 1
        self._pending.clear()

    def worker_stopped(self, version: int) -> None:
        """Lean's worker for the task file stopped (crashed, killed) at ``version``: counted
        for the closing ledger line (not a call: no line of its own, whose 0 ms would count
        in the report's timings)."""
        self.worker_stops += 1
        log.warning("lean.worker_stopped", task=self.task.id, version=version)

    # -- verdicts and the result line ---------------------------------------------------------

    def checked(self, verdict: Verdict, body: str, *, requested: float) -> None:
        """A verdict on ``body`` that was asked for at ``requested`` (perf_counter)."""
        self.checks += 1
        if not self.over or self.verdict is None or verdict.accepted:
            self.verdict, self.body = verdict.to_json(), body
        if verdict.accepted and not self.over:
            self.accepted = True
            self.ended_at = requested
        if verdict.accepted and self.timed_out:
            self.accepted = True  # a correct final body counts, as for agents after a timeout
        self.ledger.record(session=self.id, task=self.task.id, tool="check_proof", queue_ms=0.0,
                           lean_ms=verdict.elapsed_ms,
                           total_ms=(time.perf_counter() - requested) * 1000,
                           outcome="ok", accepted=verdict.accepted,
                           body_sha=body_sha(body))  # fmt: skip

    def result(self) -> AttemptResult:
        """This attempt as a ``results.jsonl`` line (the runs layer's model, condition human).

        The editor (name and version from ``initialize``) stands where an agent run records its
        agent tool; human-only facts (``editDelay``, versions, refused edits, Lean restarts) are
        in the ledger's closing line."""
        spec = self.task.spec
        verdict = self.verdict or {}
        editor = " ".join(
            str(v) for v in (self.editor.get("name"), self.editor.get("version")) if v
        )
        elapsed = verdict.get("elapsed_ms")
        return AttemptResult(
            task=spec.id, field=spec.field, difficulty=spec.difficulty,
            attempt=self._attempt_number(), accepted=bool(verdict.get("accepted", False)),
            reasons=list(verdict["reasons"]) if "reasons" in verdict else ["no verdict"],
            invocation_s=round(self.wall_s(), 3), timed_out=self.timed_out,
            tool_calls=self.versions + self.checks, lean_s=round(self.lean_ms / 1000, 3),
            final_body_sha=body_sha(self.body), condition=CONDITION,
            agent_tool=editor or "editor",
            verdict_s=round(float(elapsed) / 1000, 3) if elapsed is not None else None,
            started_at=self.started_at,
        )  # fmt: skip

    def write(self) -> dict[str, Any] | None:
        """Append the result line (once) and the closing ledger line; None if never opened."""
        if self.written or self.opened_at is None:
            return None
        self.written = True
        if self.ended_at is None:
            self.ended_at = time.perf_counter()
        result = self.result()
        self.results.parent.mkdir(parents=True, exist_ok=True)
        append_result(self.results.parent, result)
        self.ledger.record(session=self.id, task=self.task.id, tool="close_session",
                           queue_ms=0.0, lean_ms=0.0, total_ms=0.0, outcome="ok",
                           session_wall_ms=self.wall_s() * 1000, accepted=result.accepted,
                           condition=CONDITION, edit_delay_ms=self.edit_delay_ms,
                           versions=self.versions, rejected_edits=self.rejected_edits,
                           lean_restarts=self.lean_restarts,
                           worker_stops=self.worker_stops)  # fmt: skip
        return result.model_dump(mode="json")

    def _attempt_number(self) -> int:
        if not self.results.exists():
            return 1
        done = read_results(self.results.parent).results
        return 1 + max((r.attempt for r in done if r.task == self.task.id), default=0)
