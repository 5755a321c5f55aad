"""`ProofService`: the agent tools, independent of the wire (MCP and JSON-RPC call the same).

Every tool call: validates its input, serializes on its session, borrows a warm pool slot,
records one ledger line (queue / Lean / total ms), and turns every failure into a `ToolError`
that says what to do next (never a raw stderr or path). Positions are 1-based lines and
1-based Unicode code point columns in the task file.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import structlog

from lsp_bridge import (
    DocumentReport,
    LeanrigError,
    LineIndex,
    Pos,
    RequestTimeout,
    single_errors,
)
from repl_pool import LeanEnvironment, PoolBusy, PoolClosed, Slot, WarmPool

from ..tasks import (
    Suite,
    SuiteError,
    Task,
    check_scope,
    code_end,
    flatten_symbols,
    precheck_body,
    suffix_structure,
)
from ..verdict import Verifier
from .ledger import Ledger, StepTimer
from .session import ProofSession, StepResult, agent_diagnostics, body_sha, is_complete

log = structlog.get_logger("leanrig.tools")

MAX_CANDIDATES = 16


class ToolError(LeanrigError):
    """An agent-facing failure: ``code`` is stable, the message says what to do next."""

    def __init__(self, message: str, *, code: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


@dataclass(slots=True)
class _Call:
    timer: StepTimer = field(default_factory=StepTimer)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Elaborated:
    report: DocumentReport
    goals: list[str]
    rejected: str | None
    complete: bool


class ProofService:
    def __init__(
        self,
        suite: Suite,
        pool: WarmPool,
        environment: LeanEnvironment,
        verifier: Verifier,
        ledger: Ledger,
        *,
        step_timeout: float = 60.0,
    ) -> None:
        self.suite = suite
        self.pool = pool
        self.environment = environment
        self.verifier = verifier
        self.ledger = ledger
        self.step_timeout = step_timeout
        self.sessions: dict[str, ProofSession] = {}
        self._suffix: dict[str, list[str]] = {}  # task id -> Lean's parse after the body

    # -- plumbing -----------------------------------------------------------------------------

    @asynccontextmanager
    async def _call(
        self, tool: str, session: ProofSession | None = None, task: str | None = None
    ) -> AsyncIterator[_Call]:
        call = _Call()
        outcome = "ok"
        try:
            try:
                yield call
            except ToolError:
                raise
            except LeanrigError as exc:
                raise agent_error(exc) from exc
        except ToolError as exc:
            outcome = "rejected" if exc.code == "rejected" else f"error:{exc.code}"
            raise
        except BaseException as exc:
            outcome = f"error:{type(exc).__name__}"
            raise
        finally:
            timer = call.timer
            self.ledger.record(
                session=session.id if session else call.extra.pop("session", None),
                task=session.task.id if session else task,
                tool=tool,
                queue_ms=timer.queue_ms,
                lean_ms=timer.lean_ms,
                total_ms=timer.total_ms(),
                outcome=outcome,
                **call.extra,
            )

    def _session(self, session_id: str, client: str) -> ProofSession:
        session = self.sessions.get(session_id)
        if session is None or session.client != client or session.closed:
            raise ToolError(
                f"unknown session {session_id!r}",
                code="unknown_session",
                hint="open a task with open_task and use the session_id it returns",
            )
        return session

    @asynccontextmanager
    async def _locked(self, session: ProofSession) -> AsyncIterator[None]:
        try:
            with anyio.fail_after(self.step_timeout * 2):
                await session.lock.acquire()
        except TimeoutError:
            raise ToolError(
                "another call on this session is still running",
                code="busy",
                hint="calls on one session run one at a time; retry when the previous returns",
            ) from None
        try:
            if session.closed:
                raise ToolError("the session was closed", code="unknown_session")
            yield
        finally:
            session.lock.release()

    async def _elaborate(
        self, task: Task, body: str, call: _Call, holder: str | None
    ) -> _Elaborated:
        """Elaborate the task with ``body`` on a warm slot: report, scope verdict, goals."""
        text = task.with_body(body)
        key = self.pool.key_for(text, self.environment)
        body_start, body_end = task.span.start, task.span.start + len(body)
        entered = time.perf_counter()
        lean_before = call.timer.lean_ms

        async def operation(slot: Slot) -> _Elaborated:
            call.timer.queue_ms += (time.perf_counter() - entered) * 1000 - (
                call.timer.lean_ms - lean_before
            )
            index = LineIndex(text)
            with call.timer.lean():
                report = await slot.elaborate(text, timeout=self.step_timeout)
                complete = is_complete(report, index, task.span.decl_start, body_end)
                # Goals only for an incomplete proof, fetched beside the symbols. (Sending all
                # queries before the barrier measured no faster: 6.30 vs 6.41 ms, and wastes
                # Lean work on complete proofs.)
                symbols, goals = await both(
                    slot.document_symbols(timeout=self.step_timeout),
                    self._goals_after(slot, text, index, body_start, body_end)
                    if not complete
                    else _no_goals(),
                )
            flat = flatten_symbols(symbols, index)
            if task.id not in self._suffix and body == task.body:
                self._suffix[task.id] = suffix_structure(flat, body_end, len(text))
            rejected = check_scope(
                text=text,
                body_start=body_start,
                body_end=body_end,
                decl_start=task.span.decl_start,
                symbols=flat,
                expected_suffix=self._suffix.get(task.id, []),
                diagnostics=report.diagnostics,
            )
            return _Elaborated(
                report, goals if rejected is None else [], rejected, complete and rejected is None
            )

        return await self.pool.run(key, operation, holder=holder)

    async def _goals_after(
        self, slot: Slot, text: str, index: LineIndex, start: int, end: int
    ) -> list[str]:
        """Tactic goals at the end of the body, else the expected type at its start."""
        last = code_end(text, start, end)
        first = start
        while first < end and text[first].isspace():
            first += 1
        goal, term = await both(
            slot.plain_goal(index.lsp_of_offset(last), timeout=self.step_timeout),
            slot.plain_term_goal(index.lsp_of_offset(first), timeout=self.step_timeout),
        )
        if goal.status == "goals":
            return list(goal.goals)
        return [term.goal] if term.status == "goal" else []

    def _result(self, session: ProofSession, elaborated: _Elaborated) -> StepResult:
        report = elaborated.report
        return StepResult(
            version=session.version,
            diagnostics=agent_diagnostics(session.text, report.diagnostics),
            goals=elaborated.goals,
            complete=elaborated.complete,
        )

    def _body_range(self, session: ProofSession) -> dict[str, Any]:
        index = LineIndex(session.text)
        start, end = index.pos_of(session.body_start), index.pos_of(session.body_end)
        return {
            "start": {"line": start.line, "column": start.column},
            "end": {"line": end.line, "column": end.column},
        }

    # -- tools --------------------------------------------------------------------------------

    async def list_tasks(self) -> dict[str, Any]:
        async with self._call("list_tasks"):
            return {
                "suite": self.suite.name,
                "tasks": [t.summary() for t in self.suite.tasks.values()],
            }

    async def open_task(self, task_id: str, client: str = "local") -> dict[str, Any]:
        async with self._call("open_task", task=task_id) as call:
            try:
                task = self.suite.task(task_id)
            except SuiteError as exc:
                raise ToolError(exc.message, code="unknown_task", hint=exc.hint) from exc
            session = ProofSession(
                id=secrets.token_hex(16), task=task, client=client, text=task.text, body=task.body
            )
            call.extra["session"] = session.id
            elaborated = await self._elaborate(task, task.body, call, session.id)
            session.version = 1
            session.last = self._result(session, elaborated)
            self.sessions[session.id] = session
            return {
                "session_id": session.id,
                "text": session.text,
                "body": session.body,
                "body_range": self._body_range(session),
                **session.last.to_json(),
            }

    async def set_proof(self, session_id: str, body: str, client: str = "local") -> dict[str, Any]:
        session = self._session(session_id, client)
        async with self._call("set_proof", session) as call, self._locked(session):
            return await self._apply_body(session, body, call)

    async def replace_in_proof(
        self, session_id: str, old: str, new: str, client: str = "local"
    ) -> dict[str, Any]:
        session = self._session(session_id, client)
        async with self._call("replace_in_proof", session) as call, self._locked(session):
            if not old:
                raise ToolError(
                    "`old` is empty",
                    code="invalid_argument",
                    hint="give a non-empty piece of the current proof body",
                )
            count = session.body.count(old)
            if count != 1:
                raise ToolError(
                    f"`old` occurs {count} times in the proof body (it must occur exactly once)",
                    code="rejected",
                    hint="include more surrounding text in `old`, or use set_proof",
                )
            return await self._apply_body(session, session.body.replace(old, new, 1), call)

    async def _apply_body(self, session: ProofSession, body: str, call: _Call) -> dict[str, Any]:
        started = time.perf_counter()
        call.extra["body_sha"] = body_sha(body)
        reason = precheck_body(body)
        if reason is not None:
            raise ToolError(f"edit rejected: {reason}", code="rejected",
                            hint="the session stays at its previous version")  # fmt: skip
        elaborated = await self._elaborate(session.task, body, call, session.id)
        if elaborated.rejected is not None:
            raise ToolError(
                f"edit rejected: {elaborated.rejected}",
                code="rejected",
                hint="only the proof body may change; the session stays at its previous version",
            )
        session.body = body
        session.text = session.task.with_body(body)
        session.version += 1
        session.last = self._result(session, elaborated)
        call.extra.update(version=session.version, complete=session.last.complete)
        return {
            **session.last.to_json(),
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 2),
        }

    async def get_goals(
        self, session_id: str, line: int, column: int, client: str = "local"
    ) -> dict[str, Any]:
        session = self._session(session_id, client)
        async with self._call("get_goals", session) as call, self._locked(session):
            index = LineIndex(session.text)
            if (
                not 1 <= line <= index.line_count
                or not 1 <= column <= len(index.line(line - 1)) + 1
            ):
                raise ToolError(
                    f"position {line}:{column} is outside the file",
                    code="invalid_argument",
                    hint=f"lines are 1..{index.line_count}; columns are 1-based code points",
                )
            pos = index.to_lsp(Pos(line, column))
            key = self.pool.key_for(session.text, self.environment)
            entered = time.perf_counter()

            async def operation(slot: Slot) -> dict[str, Any]:
                call.timer.queue_ms += (time.perf_counter() - entered) * 1000
                with call.timer.lean():
                    if slot.text() != session.text:
                        await slot.elaborate(session.text, timeout=self.step_timeout)
                    plain = await slot.plain_goal(pos, timeout=self.step_timeout)
                    term = await slot.plain_term_goal(pos, timeout=self.step_timeout)
                    structured = await slot.interactive_goals(pos, timeout=self.step_timeout)
                return {
                    "line": line,
                    "column": column,
                    "goals": list(plain.goals),
                    "goal_status": plain.status,
                    "term_goal": term.goal if term.status == "goal" else None,
                    "structured": [
                        {
                            "hypotheses": [
                                {"names": list(h.names), "type": h.type, "value": h.value}
                                for h in g.hypotheses
                            ],
                            "target": g.target,
                            "user_name": g.user_name,
                        }
                        for g in structured
                    ],
                }

            return await self.pool.run(key, operation, holder=session.id)

    async def get_proof_state(self, session_id: str, client: str = "local") -> dict[str, Any]:
        session = self._session(session_id, client)
        async with self._call("get_proof_state", session), self._locked(session):
            assert session.last is not None
            return {
                "session_id": session.id,
                "task_id": session.task.id,
                "text": session.text,
                "body": session.body,
                "body_range": self._body_range(session),
                **session.last.to_json(),
            }

    async def try_proofs(
        self, session_id: str, bodies: list[str], client: str = "local"
    ) -> dict[str, Any]:
        session = self._session(session_id, client)
        if not bodies or len(bodies) > MAX_CANDIDATES:
            raise ToolError(f"give 1..{MAX_CANDIDATES} candidate bodies", code="invalid_argument")
        async with self._call("try_proofs", session) as call:
            results: list[dict[str, Any]] = [{} for _ in bodies]

            async def one(i: int, body: str) -> None:
                t = time.perf_counter()
                entry: dict[str, Any] = {"index": i, "rejected": precheck_body(body)}
                if entry["rejected"] is None:
                    try:
                        elaborated = await self._elaborate(session.task, body, call, None)
                    except LeanrigError as exc:
                        err = exc if isinstance(exc, ToolError) else agent_error(exc)
                        entry["error"] = str(err)
                    else:
                        entry["rejected"] = elaborated.rejected
                        text = session.task.with_body(body)
                        entry["diagnostics"] = [
                            d.to_json()
                            for d in agent_diagnostics(text, elaborated.report.diagnostics)
                        ]
                        entry["goals"] = elaborated.goals
                        entry["complete"] = elaborated.complete
                entry.setdefault("complete", False)
                entry["elapsed_ms"] = round((time.perf_counter() - t) * 1000, 2)
                results[i] = entry

            async with anyio.create_task_group() as tg:
                for i, body in enumerate(bodies):
                    tg.start_soon(one, i, body)
            call.extra["candidates"] = len(bodies)
            return {"results": results}

    async def check_proof(self, session_id: str, client: str = "local") -> dict[str, Any]:
        session = self._session(session_id, client)
        async with self._call("check_proof", session) as call, self._locked(session):
            with call.timer.lean():
                verdict = await self.verifier.verify(session.task, session.text)
            call.extra.update(accepted=verdict.accepted, body_sha=body_sha(session.body))
            return verdict.to_json()

    async def get_timings(self, session_id: str, client: str = "local") -> dict[str, Any]:
        session = self._session(session_id, client)
        entries = self.ledger.for_session(session.id)
        totals = {
            "calls": len(entries),
            "total_ms": round(sum(e.get("total_ms", 0.0) for e in entries), 2),
            "queue_ms": round(sum(e.get("queue_ms", 0.0) for e in entries), 2),
            "lean_ms": round(sum(e.get("lean_ms", 0.0) for e in entries), 2),
        }
        totals["overhead_ms"] = round(
            totals["total_ms"] - totals["queue_ms"] - totals["lean_ms"], 2
        )
        return {"session_id": session.id, "session_wall_ms": round(session.wall_ms(), 1),
                "totals": totals, "entries": entries}  # fmt: skip

    async def close_session(self, session_id: str, client: str = "local") -> dict[str, Any]:
        session = self._session(session_id, client)
        async with self._call("close_session", session) as call, self._locked(session):
            session.closed = True
            self.sessions.pop(session.id, None)
            call.extra["session_wall_ms"] = session.wall_ms()
            result = {"closed": True, "session_wall_ms": round(session.wall_ms(), 1)}
        self.ledger.forget(session.id)  # after the close_session line is written
        return result

    async def server_status(self) -> dict[str, Any]:
        return {
            "suite": self.suite.name,
            "lean_version": self.environment.install.version,
            "mode": self.environment.install.mode,
            "sessions": len(self.sessions),
            "pool": self.pool.stats().to_json(),
        }


A = TypeVar("A")
B = TypeVar("B")


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two things concurrently (structured: a task group), returning both results."""
    results: dict[int, Any] = {}

    async def run(i: int, awaitable: Awaitable[Any]) -> None:
        results[i] = await awaitable

    with single_errors():
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, 0, first)
            tg.start_soon(run, 1, second)
    return results[0], results[1]


async def _no_goals() -> list[str]:
    return []


def agent_error(exc: LeanrigError) -> ToolError:
    """One place where lower-level errors become agent-facing messages (no paths, no stderr)."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, RequestTimeout):
        return ToolError(
            f"Lean did not finish within {exc.seconds:g} s",
            code="timeout",
            hint="the proof step is too expensive; simplify it (the session is unchanged)",
        )
    if isinstance(exc, PoolBusy):
        return ToolError("all Lean processes are busy", code="busy", hint="retry in a moment")
    if isinstance(exc, PoolClosed):
        return ToolError("the server is shutting down", code="unavailable")
    return ToolError(
        f"Lean failed: {type(exc).__name__}",
        code="lean_failure",
        hint="retry the call; the Lean process was replaced",
    )
