"""The human attempt's clock in ``leanrig lsp``: its start, its time limit, and its verdicts.

Must not route frames or decide scope."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from ..tasks import Task
from ..verdict import Verdict, Verifier
from .human_attempt import HumanAttempt
from .supervised_lean import INTERNAL_ERROR
from .task_document import TaskDocument

log = structlog.get_logger("leanrig.editor")

TIME_LIMIT_POLL = 1.0  # seconds between looks at the wall clock


class AttemptClock:
    """The clock of ``attempt`` at ``task``, over the task file ``document``."""

    def __init__(
        self,
        task: Task,
        verifier: Verifier,
        attempt: HumanAttempt,
        document: TaskDocument,
        *,
        verdict_timeout: float,
        to_editor: Callable[[dict[str, Any]], Awaitable[None]],
        show: Callable[[str, int], Awaitable[None]],
    ) -> None:
        self.task = task
        self.verifier = verifier
        self.attempt = attempt
        self._document = document
        self._verdict_timeout = verdict_timeout
        self._to_editor = to_editor
        self._show = show
        self._opened = anyio.Event()
        self._checks_running = 0
        self._checks_done = anyio.Event()

    def connected(self, params: Any) -> None:
        """The editor connected (``initialize``'s ``params``, or None): start or resume."""
        init = params if isinstance(params, dict) else {}
        options = init.get("initializationOptions") or {}
        delay = options.get("editDelay") if isinstance(options, dict) else None
        client = init.get("clientInfo")
        self.attempt.open(
            client if isinstance(client, dict) else {}, delay if isinstance(delay, int) else None
        )
        self._opened.set()

    async def check_command(self, rid: Any) -> None:
        """Answer the editor's ``leanrig.checkProof`` request ``rid``, whatever fails."""
        try:
            result = await self.check(requested_by_editor=True)
        except Exception as exc:
            log.exception("editor.check_failed")
            error = {"code": INTERNAL_ERROR, "message": f"leanrig.checkProof failed: {exc}"}
            await self._to_editor({"jsonrpc": "2.0", "id": rid, "error": error})
            return
        await self._to_editor({"jsonrpc": "2.0", "id": rid, "result": result})

    async def check(self, *, requested_by_editor: bool) -> dict[str, Any]:
        """The verdict on the last valid body, also shown to the editor."""
        requested = time.time()
        self.attempt.expire()  # whether or not the timer saw the limit pass
        document = self._document
        document.record_done()
        text = document.lean_text
        self._checks_running += 1
        try:
            with anyio.fail_after(self._verdict_timeout):
                verdict: Verdict = await self.verifier.verify(
                    self.task, document.scope.submission(text)
                )
        finally:
            self._checks_running -= 1
            if not self._checks_running:
                self._checks_done.set()
                self._checks_done = anyio.Event()
        self.attempt.checked(verdict, document.scope.final_body(text), requested=requested)
        if verdict.accepted:
            message = f"leanrig: ACCEPTED — {self.task.id} proved in {self.attempt.wall_s():.1f} s"
        else:
            message = f"leanrig: not accepted: {'; '.join(verdict.reasons) or 'rejected'}"
        # Some editors show a command's raw result: `message` is readable there.
        result = {
            **verdict.to_json(),
            "version": document.lean_version,
            "attempt_s": round(self.attempt.wall_s(), 3),
            "timed_out": self.attempt.timed_out,
            "message": message,
        }
        if self.attempt.accepted or self.attempt.timed_out:
            self.attempt.write_result()
        await self._show(message, 3 if verdict.accepted else 1 if requested_by_editor else 2)
        return result

    async def time_limit(self) -> None:
        """Wait for the limit, then judge the last valid body unless it has its verdict."""
        await self._opened.wait()
        deadline = self.attempt.deadline()
        if deadline is None:
            return
        # Polled: a monotonic sleep stops during suspend, and a closed laptop is time spent.
        while True:
            left = deadline - time.time()
            if left <= 0:
                break
            await anyio.sleep(min(left, TIME_LIMIT_POLL))
        if self.attempt.over:
            return
        self.attempt.expire()
        while self._checks_running:  # one asked for in time may still stop the clock
            await self._checks_done.wait()
        if self.attempt.accepted:
            return
        if self.attempt.judged(self._document.scope.final_body(self._document.lean_text)):
            self.attempt.write_result()
            return
        await self._show("leanrig: the time limit is over; checking your last valid proof", 2)
        try:
            await self.check(requested_by_editor=False)
        except Exception:
            log.exception("editor.final_check_failed")
