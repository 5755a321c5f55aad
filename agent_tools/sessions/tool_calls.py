"""Per-call plumbing: resolve and lock the caller's session, write exactly one ledger line per
call (failures included), and translate lower-level errors to `ToolError`. No Lean calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import anyio

from lsp_bridge import LeanrigError
from repl_pool import Placements, recording

from .errors import ToolError, agent_error, unknown_session
from .ledger import Ledger, StepTimer
from .session import ProofSession


@dataclass(slots=True)
class Call:
    """One tool call in flight: its timer, its session (once known), extra ledger fields."""

    tool: str
    timer: StepTimer = field(default_factory=StepTimer)
    session: ProofSession | None = None
    task: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    placements: Placements = field(default_factory=Placements)  # where the pool ran its steps

    @property
    def open_session(self) -> ProofSession:
        assert self.session is not None
        return self.session


class Calls:
    def __init__(self, ledger: Ledger, sessions: dict[str, ProofSession]) -> None:
        self.ledger = ledger
        self.sessions = sessions

    def find(self, session_id: str, client: str) -> ProofSession:
        session = self.sessions.get(session_id)
        if session is None or session.client != client or session.closed:
            raise unknown_session(session_id)
        return session

    @asynccontextmanager
    async def call(
        self,
        tool: str,
        *,
        session_id: str | None = None,
        client: str = "local",
        task: str | None = None,
        lock: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> AsyncIterator[Call]:
        """Run one call and record its ledger line; ``lock``: hold the session's lock, waiting
        at most this many seconds for it."""
        call = Call(tool, task=task, extra=dict(extra or {}))
        outcome = "ok"
        try:
            try:
                if session_id is not None:
                    call.session = self.find(session_id, client)
                held = (
                    locked(call.session, lock)
                    if call.session is not None and lock is not None
                    else nullcontext()
                )
                async with held:
                    with recording() as call.placements:
                        yield call
            except ToolError:
                raise
            except LeanrigError as exc:
                raise agent_error(exc) from exc
        except ToolError as exc:
            outcome = "rejected" if exc.code == "rejected" else f"error:{exc.code}"
            raise
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"  # the client cancelled or went, or the server is stopping
            raise
        except BaseException as exc:
            outcome = f"error:{type(exc).__name__}"
            raise
        finally:
            self.record(call, outcome)

    def record(self, call: Call, outcome: str) -> None:
        session = call.session
        timer = call.timer
        self.ledger.record(
            session=session.id if session else call.extra.pop("session", None),
            task=session.task.id if session else call.task,
            tool=call.tool,
            queue_ms=timer.queue_ms,
            lean_ms=timer.lean_ms,
            total_ms=timer.total_ms(),
            outcome=outcome,
            **call.placements.fields(),
            **call.extra,
        )

    def record_invalid(self, tool: str, arguments: Any, client: str, error: ToolError) -> None:
        """Record a call refused before it reached its tool."""
        call = Call(tool)
        session_id = arguments.get("session_id") if isinstance(arguments, dict) else None
        if isinstance(session_id, str):
            try:
                call.session = self.find(session_id, client)
            except ToolError:
                pass
        self.record(call, f"error:{error.code}")


@asynccontextmanager
async def locked(session: ProofSession, wait: float) -> AsyncIterator[None]:
    """Serialize calls on ``session``; waits at most ``wait`` seconds for the previous one."""
    try:
        # The usual free lock is taken without a deadline's cancel scope.
        session.lock.acquire_nowait()
    except anyio.WouldBlock:
        await _wait_for_lock(session, wait)
    try:
        if session.closed:
            raise ToolError("the session was closed", code="unknown_session")
        yield
    finally:
        session.lock.release()


async def _wait_for_lock(session: ProofSession, wait: float) -> None:
    try:
        with anyio.fail_after(wait):
            await session.lock.acquire()
    except TimeoutError:
        raise ToolError(
            "another call on this session is still running",
            code="busy",
            hint="calls on one session run one at a time; retry when the previous returns",
        ) from None
