"""The human attempt's clock as ``leanrig lsp`` runs it: started when the editor connects
(``initialize``, or the task file's didOpen from an editor that sends none first), its time
limit kept on the wall clock, and the verdicts on the text Lean has — asked by the editor
(``leanrig.checkProof``) or called once when the time is up.

Must not route frames or decide scope: it reads the task file's state from ``TaskDocument``
and records in ``HumanAttempt`` (human_attempt.py keeps the clock's readings and the result line).
"""

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

# The time-limit timer's longest sleep between looks at the wall clock.
TIME_LIMIT_POLL = 1.0


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
        """The editor connected (``initialize``'s ``params``, or None): the attempt's clock
        starts, or goes on."""
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
        except Exception as exc:  # the editor must get an answer, whatever failed
            log.exception("editor.check_failed")
            error = {"code": INTERNAL_ERROR, "message": f"leanrig.checkProof failed: {exc}"}
            await self._to_editor({"jsonrpc": "2.0", "id": rid, "error": error})
            return
        await self._to_editor({"jsonrpc": "2.0", "id": rid, "result": result})

    async def check(self, *, requested_by_editor: bool) -> dict[str, Any]:
        """The verdict on the text Lean has (the last valid body); shown to the editor too (a
        ``window/showMessage``, and the answer's ``message``: the same line)."""
        requested = time.time()  # the attempt's clock (human_attempt.py)
        self.attempt.expire()  # a request after the limit is one, whether the timer saw it or not
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
        # The answer carries the human-readable line too: an editor that shows a command's
        # result (lsp-mode: the raw object) can show this instead.
        result = {**verdict.to_json(), "version": document.lean_version,
                  "attempt_s": round(self.attempt.wall_s(), 3),
                  "timed_out": self.attempt.timed_out, "message": message}  # fmt: skip
        if self.attempt.accepted or self.attempt.timed_out:
            self.attempt.write_result()  # the attempt's line as it stands (a later one replaces it)
        await self._show(message, 3 if verdict.accepted else 1 if requested_by_editor else 2)
        return result

    async def time_limit(self) -> None:
        """Once the attempt is open: wait for its limit; then edits stop reaching Lean, and
        the last valid body gets its verdict unless it has one."""
        await self._opened.wait()
        deadline = self.attempt.deadline()
        if deadline is None:
            return
        # The wall clock, polled: a monotonic sleep stops while the machine is suspended, and
        # the attempt's clock does not (a closed laptop is time spent).
        while True:  # (a sleep polling a clock, not a wait for an event)
            left = deadline - time.time()
            if left <= 0:
                break
            await anyio.sleep(min(left, TIME_LIMIT_POLL))
        if self.attempt.over:
            return
        self.attempt.expire()
        while self._checks_running:  # asked for in time: it may still stop the clock there
            await self._checks_done.wait()
        if self.attempt.accepted:
            return
        if self.attempt.judged(self._document.scope.final_body(self._document.lean_text)):
            self.attempt.write_result()  # the last body's verdict is in: no second one
            return
        await self._show("leanrig: the time limit is over; checking your last valid proof", 2)
        try:
            await self.check(requested_by_editor=False)
        except Exception:
            log.exception("editor.final_check_failed")
