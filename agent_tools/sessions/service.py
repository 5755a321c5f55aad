"""`ProofService`: the agent tools, independent of the wire (MCP and JSON-RPC call the same).

Every call writes one ledger line and fails only with a `ToolError` (never raw stderr or paths)."""

from __future__ import annotations

import dataclasses
import secrets
import sys
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import orjson
import structlog

from lsp_bridge import TRACE_EVENT, LeanrigError, replace_file
from repl_pool import LeanEnvironment, Pool

from ..library import LibraryError, LibraryIndex
from ..tasks import (
    Suite,
    SuiteError,
    axioms_declared,
    library_sources,
    sorry_outside,
    writes_proof,
    writes_statement,
)
from ..verdict import Verifier
from .body_text import as_lean_reads, occurrences, refusal, short
from .elaborate import Elaborated, Elaborator
from .errors import ToolError, agent_error, rejected_edit
from .ledger import Ledger, StepTimer
from .output_builders import (
    agent_diagnostics,
    body_range,
    candidate_outcome,
    node_status,
    pool_status,
    step_state,
    timings,
)
from .prefix import MIN_PREFIX_COMMANDS, PrefixModules
from .question_lean import LeanQuestions
from .questions import QuestionTools, position_in
from .session import ProofSession, body_sha
from .statement_tools import StatementTools
from .tool_calls import Call, Calls
from .tool_inputs import MAX_CANDIDATES, MAX_QUERY_CHARS
from .tool_outputs import (
    Candidate,
    CandidateTiming,
    CloseResult,
    EditResult,
    GoalsResult,
    LibraryDeclaration,
    ListTasksResult,
    OpenTaskResult,
    ProofStateResult,
    ReadLibraryResult,
    SearchLibraryResult,
    ServerStatusResult,
    StepState,
    TaskSummary,
    TimingsResult,
    ToolFailure,
    TryProofsResult,
    VerdictResult,
)

log = structlog.get_logger("leanrig.tools")


MAX_SESSIONS_PER_CLIENT = 64  # open sessions per connection: each holds text and a Lean document
SHARED_CLIENT_SESSIONS = 1024  # all of streamable HTTP's clients together (one client here)
TRY_TIMEOUTS = 2  # a try_proofs call's whole Lean budget, in step timeouts


class ProofService(QuestionTools, StatementTools):
    def __init__(
        self,
        suite: Suite,
        pool: Pool,
        environment: LeanEnvironment,
        verifier: Verifier,
        ledger: Ledger,
        *,
        step_timeout: float = 60.0,
        task: str | None = None,
        submission: Path | None = None,
        prefix_min_commands: int | None = MIN_PREFIX_COMMANDS,
        library: LibraryIndex | None = None,
        sessions_per_client: int = MAX_SESSIONS_PER_CLIENT,
    ) -> None:
        """``task``: serve only this task. ``submission``: a JSON file rewritten atomically after
        every open and accepted edit. ``prefix_min_commands``: None never compiles a prefix.
        ``library``: the LAD index (None: the baseline condition)."""
        if task is not None:
            suite.task(task)  # raises SuiteError when unknown
        self.suite = suite
        self.task = task
        self.submission = submission
        self.pool = pool
        self.environment = environment
        self.verifier = verifier
        self.ledger = ledger
        self.step_timeout = step_timeout
        self.library = library
        self.sessions_per_client = sessions_per_client
        self.sessions: dict[str, ProofSession] = {}
        self.calls = Calls(ledger, self.sessions)
        prefixes = (
            PrefixModules(environment, min_commands=prefix_min_commands)
            if prefix_min_commands is not None
            else None
        )
        own_library = [src.read_text(encoding="utf-8") for _, src in library_sources(suite)]
        self.elaborator = Elaborator(
            pool,
            environment,
            step_timeout,
            prefixes,
            library_sorry=any(sorry_outside(text, 0, 0) for text in own_library),
            library_axioms=[name for text in own_library for name in axioms_declared(text)],
            allowed_axioms=suite.spec.axioms,
            verdict_seconds=suite.spec.limits.wall_seconds,
        )
        self.questions = LeanQuestions(self.elaborator, suite, library)
        self._submission_lock = anyio.Lock()

    def _on_session(  # (QuestionTools' too)
        self,
        tool: str,
        session_id: str,
        client: str,
        *,
        lock: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[Call]:
        """A session tool's call: its ledger line, the caller's session resolved and, with
        ``lock``, held (the next call waits at most two step timeouts)."""
        wait = self.step_timeout * 2 if lock else None
        return self.calls.call(tool, session_id=session_id, client=client, lock=wait, extra=extra)

    def record_invalid(self, tool: str, arguments: Any, client: str, error: ToolError) -> None:
        """Ledger line for a call whose arguments the wire refused."""
        self.calls.record_invalid(tool, arguments, client, error)

    async def list_tasks(self) -> ListTasksResult:
        async with self.calls.call("list_tasks"):
            return ListTasksResult(
                suite=self.suite.name,
                tasks=[
                    TaskSummary.model_validate(t.summary())
                    for t in self.suite.tasks.values()
                    if self.task is None or t.id == self.task
                ],
            )

    async def warm(self) -> None:
        """A task-bound service: start its task's Lean process before the first `open_task`."""
        if self.task is not None:
            await self.elaborator.warm(self.suite.task(self.task))

    async def open_task(self, task_id: str, client: str = "local") -> OpenTaskResult:
        async with self.calls.call("open_task", task=task_id, client=client) as call:
            if self.task is not None and task_id != self.task:
                raise ToolError(
                    f"unknown task {short(task_id)!r}",
                    code="unknown_task",
                    hint=f"this server serves one task: {self.task!r}",
                )
            try:
                task = self.suite.task(task_id)
            except SuiteError as exc:
                raise ToolError(exc.message, code="unknown_task", hint=exc.hint) from exc
            mine = sum(1 for s in self.sessions.values() if s.client == client)
            if mine >= self.sessions_per_client:
                raise ToolError(
                    f"this connection has {mine} open sessions, the most it may have",
                    code="busy",
                    hint="close_session the sessions you no longer need, then open_task again",
                )
            session = ProofSession(
                id=secrets.token_hex(16),
                task=task,
                client=client,
                text=task.text,
                body=task.body,
                statement=task.statement,
            )
            call.extra["session"] = session.id
            # Deciding the view may compile and check a prefix module: Lean's time, not ours.
            with call.timer.lean():
                view = await self.elaborator.view(task)
            call.extra["mode"] = view.mode
            session.version = 1
            if task.kind == "statement":
                session.last = await self._open_statement(task, session, call)
            else:
                elaborated = await self.elaborator.elaborate(
                    task, task.body, [call.timer], session.id
                )
                if writes_statement(task.kind):
                    # set_statement's scope check compares with this untouched parse.
                    view_task = task.statement_view()
                    await self.elaborator.elaborate(view_task, view_task.body, [call.timer], None)
                session.last = self._state(session.version, elaborated)
            self.sessions[session.id] = session
            await self._record_submission(session)
            return OpenTaskResult(
                session_id=session.id,
                text=session.text,
                body=session.body,
                body_range=body_range(session),
                mode=view.mode,
                mode_reason=view.reason,
                kind=task.kind,
                claim=task.claim,
                statement=task.statement,
                **dict(session.last),
            )

    async def set_proof(self, session_id: str, body: str, client: str = "local") -> EditResult:
        async with self._on_session("set_proof", session_id, client) as call:
            return await self._apply_body(call, body)

    async def replace_in_proof(
        self, session_id: str, old: str, new: str, client: str = "local"
    ) -> EditResult:
        async with self._on_session("replace_in_proof", session_id, client) as call:
            session = call.open_session
            if not old:
                raise ToolError(
                    "`old` is empty",
                    code="invalid_argument",
                    hint="give a non-empty piece of the current proof body",
                )
            old, new = as_lean_reads(old), as_lean_reads(new)
            count = occurrences(session.body, old)
            if count != 1:
                raise ToolError(
                    f"`old` occurs {count} times in the proof body (it must occur exactly once)",
                    code="rejected",
                    hint="include more surrounding text in `old`, or use set_proof",
                )
            return await self._apply_body(call, session.body.replace(old, new, 1))

    async def _apply_body(self, call: Call, body: str) -> EditResult:
        session = call.open_session
        if not writes_proof(session.task.kind):
            raise ToolError(
                "this task's proof body stays the placeholder: an attempt writes its statement",
                code="rejected",
                hint="use set_statement and check_statement (open_task gives the claim)",
            )
        started = time.perf_counter()
        body = as_lean_reads(body)
        call.extra["body_sha"] = body_sha(body)
        reason = refusal(body)
        if reason is not None:
            mend = "send the body again, mended as this says"
            raise rejected_edit("edit", reason, mend, session.version)
        elaborated = await self.elaborator.elaborate(session.task, body, [call.timer], session.id)
        if elaborated.rejected is not None:
            mend = (
                "keep the edit inside the proof (only the proof body may change: no commands or "
                "declarations in it)"
            )
            raise rejected_edit("edit", elaborated.rejected, mend, session.version)
        session.body = body
        session.text = elaborated.text
        session.version += 1
        session.last = self._state(session.version, elaborated)
        call.extra.update(version=session.version, complete=session.last.complete)
        await self._record_submission(session)
        sys.audit(TRACE_EVENT, "result built")
        return EditResult(
            **dict(session.last), elapsed_ms=round((time.perf_counter() - started) * 1000, 2)
        )

    async def _record_submission(self, session: ProofSession) -> None:
        """Write the session's last accepted body to ``submission`` before the call answers."""
        if self.submission is None:
            return
        assert session.last is not None
        record = {
            "v": 1,
            "task": session.task.id,
            "session": session.id,
            "version": session.version,
            "body": session.body,
            "kind": session.task.kind,
            "statement": session.statement,
            "body_sha": body_sha(session.body),
            "complete": session.last.complete,
            "ts_ns": time.time_ns(),
        }
        data = orjson.dumps(record)
        async with self._submission_lock:  # sessions' records never interleave their renames
            await anyio.to_thread.run_sync(replace_file, self.submission, data)

    def _state(self, version: int, elaborated: Elaborated) -> StepState:
        return step_state(
            version,
            elaborated.index,
            elaborated.report.diagnostics,
            elaborated.goals,
            elaborated.completeness,
        )

    async def get_goals(
        self, session_id: str, line: int, column: int, client: str = "local"
    ) -> GoalsResult:
        async with self._on_session("get_goals", session_id, client) as call:
            session = call.open_session
            at = position_in(session.text, line, column)
            return await self.elaborator.goals_at(
                session.task, session.text, at, call.timer, session.id
            )

    async def get_proof_state(self, session_id: str, client: str = "local") -> ProofStateResult:
        async with self._on_session("get_proof_state", session_id, client) as call:
            session = call.open_session
            assert session.last is not None
            return ProofStateResult(
                session_id=session.id,
                task_id=session.task.id,
                text=session.text,
                body=session.body,
                body_range=body_range(session),
                **dict(session.last),
            )

    async def try_proofs(
        self, session_id: str, bodies: list[str], client: str = "local"
    ) -> TryProofsResult:
        async with self._on_session("try_proofs", session_id, client, lock=False) as call:
            session = call.open_session
            if not 1 <= len(bodies) <= MAX_CANDIDATES:
                raise ToolError(
                    f"`bodies` needs 1 to {MAX_CANDIDATES} items ({len(bodies)} given)",
                    code="invalid_argument",
                    hint="send between 1 and 16 candidate bodies",
                )
            results: list[Candidate | None] = [None] * len(bodies)
            per_candidate: list[CandidateTiming | None] = [None] * len(bodies)

            async def one(i: int, body: str) -> None:
                timer = StepTimer()
                body = as_lean_reads(body)
                rejected = refusal(body)
                elaborated: Elaborated | None = None
                failure: ToolFailure | None = None
                if rejected is None:
                    try:
                        elaborated = await self.elaborator.elaborate(
                            session.task, body, [timer], None
                        )
                    except LeanrigError as exc:
                        err = agent_error(exc)
                        failure = ToolFailure(code=err.code, message=err.message, hint=err.hint)
                    else:
                        rejected = elaborated.rejected
                    finally:
                        call.timer.absorb(timer)  # also when the call's budget cut it short
                else:
                    call.timer.absorb(timer)
                elapsed = timer.total_ms()
                per_candidate[i] = CandidateTiming(
                    index=i,
                    queue_ms=round(timer.queue_ms, 3),
                    lean_ms=round(timer.lean_ms, 3),
                    total_ms=round(elapsed, 3),
                )
                shown = (
                    agent_diagnostics(elaborated.index, elaborated.report.diagnostics)
                    if elaborated
                    else []
                )
                status, reason = candidate_outcome(shown, rejected, failure, elaborated)
                results[i] = Candidate(
                    index=i,
                    status=status,
                    status_reason=reason,
                    rejected=rejected,
                    error=failure,
                    diagnostics=shown,
                    goals=elaborated.goals if elaborated else [],
                    complete=elaborated.complete if elaborated else False,
                    elapsed_ms=round(elapsed, 2),
                )

            # One round of candidates at a time, so other sessions' steps do not wait behind all.
            parallel = anyio.CapacityLimiter(max(1, self.pool.config.max_processes))
            budget = TRY_TIMEOUTS * self.step_timeout

            async def limited(i: int, body: str) -> None:
                async with parallel:
                    await one(i, body)

            with anyio.move_on_after(budget):
                async with anyio.create_task_group() as tg:
                    for i, body in enumerate(bodies):
                        tg.start_soon(limited, i, body)
            for i in range(len(bodies)):
                if results[i] is None:
                    results[i] = Candidate(
                        index=i,
                        status="not_checked",
                        status_reason="not tried: the call's time ran out first",
                        rejected=None,
                        diagnostics=[],
                        goals=[],
                        complete=False,
                        elapsed_ms=0.0,
                        error=ToolFailure(
                            code="timeout",
                            message=f"not tried: the call's time ({budget:g} s, "
                            f"{TRY_TIMEOUTS} step timeouts) ran out first",
                            hint="send fewer candidates, or faster ones (each is elaborated "
                            "in full)",
                        ),
                    )
            call.extra["candidates"] = [t.model_dump() for t in per_candidate if t is not None]
            return TryProofsResult(
                results=[r for r in results if r is not None],
                elapsed_ms=round(call.timer.total_ms(), 2),
            )

    async def check_proof(self, session_id: str, client: str = "local") -> VerdictResult:
        async with self._on_session("check_proof", session_id, client) as call:
            session = call.open_session
            if not writes_proof(session.task.kind):
                raise ToolError(
                    "a statement task has no proof to check",
                    code="rejected",
                    hint="check_statement checks the statement",
                )
            with call.timer.lean():
                verdict = await self.verifier.verify(session.task, session.text)
            call.extra.update(accepted=verdict.accepted, body_sha=body_sha(session.body))
            return VerdictResult.model_validate(verdict.to_json())

    async def get_timings(self, session_id: str, client: str = "local") -> TimingsResult:
        async with self._on_session("get_timings", session_id, client, lock=False) as call:
            session = call.open_session
            return timings(session, self.ledger.totals(session.id))

    async def close_session(
        self, session_id: str, client: str = "local", *, by_server: bool = False
    ) -> CloseResult:
        """``by_server``: the service is ending; the ledger line says no client asked."""
        closed_by = {"closed_by": "server"} if by_server else None
        async with self._on_session("close_session", session_id, client, extra=closed_by) as call:
            session = call.open_session
            session.closed = True
            self.sessions.pop(session.id, None)
            call.extra["session_wall_ms"] = session.wall_ms()
            result = CloseResult(closed=True, session_wall_ms=round(session.wall_ms(), 1))
        self.ledger.forget(session.id)  # after the close_session line is written
        return result

    async def close_all(self) -> None:
        """Close every open session, each with its ledger line; a busy one gets a moment."""

        for sid, session in list(self.sessions.items()):
            with anyio.move_on_after(1.0):
                try:
                    await self.close_session(sid, session.client, by_server=True)
                except ToolError:
                    pass  # closed meanwhile, or busy past the moment

    def _library(self) -> LibraryIndex:
        if self.library is None:
            raise ToolError(
                "this server has no library (the baseline condition)",
                code="unavailable",
                hint="library tools exist only in LAD runs (`leanrig serve --condition lad`)",
            )
        return self.library

    async def search_library(self, query: str, limit: int) -> SearchLibraryResult:
        async with self.calls.call("search_library"):
            library = self._library()
            if not query.strip() or len(query) > MAX_QUERY_CHARS:
                raise ToolError(
                    f"`query` must have 1 to {MAX_QUERY_CHARS} characters ({len(query)} given)",
                    code="invalid_argument",
                    hint="give a few words: a concept, part of a name, constants of the goal",
                )
            hits = await library.search(query, limit)
            results = [LibraryDeclaration.model_validate(dataclasses.asdict(h)) for h in hits]
            return SearchLibraryResult(results=results)

    async def read_library(self, name: str) -> ReadLibraryResult:
        async with self.calls.call("read_library"):
            library = self._library()
            try:
                d = await library.read(name)
            except LibraryError as exc:
                raise ToolError(exc.message, code="invalid_argument", hint=exc.hint) from exc
            return ReadLibraryResult(
                name=d.name, kind=d.kind, file=d.file, line=d.line, source=d.source
            )

    async def server_status(self) -> ServerStatusResult:
        async with self.calls.call("server_status"):
            return ServerStatusResult(
                suite=self.suite.name,
                lean_version=self.environment.install.version,
                mode=self.environment.install.mode,
                sessions=len(self.sessions),
                pool=pool_status(self.pool.stats()),
                nodes=node_status(self.pool),
            )
