"""The task file between editor and Lean: which texts reach Lean, and reverting those that may not.

Edits outside the proof body are reverted with ``workspace/applyEdit``; leanrig's notices are
merged into Lean's diagnostics. Must not route other documents or own Lean."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from lsp_bridge import LineIndex

from ..tasks import Task
from .human_attempt import HumanAttempt
from .supervised_lean import ID_PREFIX, SupervisedLean
from .text_scope import OUTSIDE_MESSAGE, TaskScope, changed_span, diagnostic, replace_edit
from .text_scope import lsp_range as _lsp_range

log = structlog.get_logger("leanrig.editor")

TIME_UP_MESSAGE = "leanrig: the time limit is over; edits are no longer sent to Lean"


@dataclass(slots=True)
class EditorDocument:
    """A document as the editor has sent it."""

    uri: str
    text: str
    version: int


class TaskDocument:
    """The task file of one editor connection (``uri`` once the editor opens it)."""

    def __init__(
        self,
        task: Task,
        scope: TaskScope,
        attempt: HumanAttempt,
        lean: SupervisedLean,
        *,
        docs: Mapping[str, EditorDocument],
        ids: Iterator[int],
        revert_timeout: float,
        to_editor: Callable[[dict[str, Any]], Awaitable[None]],
        show: Callable[[str, int], Awaitable[None]],
        start_soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    ) -> None:
        self.scope = scope
        self.attempt = attempt
        self._lean = lean
        self._docs = docs
        self._ids = ids
        self._revert_timeout = revert_timeout
        self._to_editor = to_editor
        self._show = show
        self._start_soon = start_soon
        self.uri: str | None = None
        self.lean_text: str = task.text
        self.lean_version: int | None = None
        # A revert restores the last text in scope, held typing included.
        self._scoped_text: str = task.text
        self._revert_target: str = task.text
        self._lean_diags: list[dict[str, Any]] = []
        self._lean_diag_version: int | None = None
        # (version, fatal, when, errors): finished by Lean, its ledger line not yet written
        self._done: tuple[int, bool, float, int] | None = None
        self._stop_shown: int | None = None
        self._extra_diags: dict[str, dict[str, Any]] = {}
        self._scope_changed = anyio.Event()
        self._revert_id: str | None = None
        self._revert_tries = 0

    async def opened(
        self, doc: EditorDocument, params: dict[str, Any], body: bytes, received: float
    ) -> None:
        """The editor opened the task file (``body``: its didOpen frame)."""
        self.uri = doc.uri
        decision = self.scope.decide(doc.text)
        self.attempt.task_opened(
            self.scope.final_body(doc.text) if decision.outcome == "ok" else None
        )
        refused = self.attempt.expire() and doc.text != self.lean_text
        if decision.outcome in ("ok", "held") and not refused:
            self._scoped_text = doc.text
        if decision.outcome == "ok" and not refused:
            self.lean_text, self.lean_version = doc.text, doc.version
            self.forwarded(doc.version, received)
            await self._lean.send(body)
            return
        opened = {**params, "textDocument": {**params["textDocument"], "text": self.lean_text}}
        self.lean_version = doc.version
        self.forwarded(doc.version, received)
        await self._lean.send_json(
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": opened}
        )
        await self._refuse(doc, decision.outcome, decision.reason, refused)

    async def changed(self, doc: EditorDocument, before: str, body: bytes, received: float) -> None:
        """The editor changed the task file from ``before`` (``body``: its didChange frame)."""
        decision = self.scope.decide(doc.text)
        refused = self.attempt.expire() and doc.text != self.lean_text
        if decision.outcome in ("ok", "held") and not refused:
            self._scoped_text = doc.text
        restored = self._restored(doc)
        self._scope_changed.set()
        self._scope_changed = anyio.Event()
        if decision.outcome != "ok" or refused:
            await self._refuse(doc, decision.outcome, decision.reason, refused)
            return
        previous = self.lean_text
        # An echo still goes to Lean (editors wait on versions) but is no new ledger version.
        echo = doc.text == previous
        if before == previous:
            await self._lean.send(body)
        else:
            start, end_old, end_new = changed_span(previous, doc.text)
            change = {
                "range": _lsp_range(LineIndex(previous), start, end_old),
                "text": doc.text[start:end_new],
            }
            await self._lean.send_json(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": doc.uri, "version": doc.version},
                        "contentChanges": [change],
                    },
                }
            )
        if not echo:
            self.forwarded(doc.version, received)
        self.lean_text, self.lean_version = doc.text, doc.version
        changed = self._extra_diags.pop("held", None) is not None or restored
        if not echo:
            changed = self._extra_diags.pop("outside", None) is not None or changed
            self._revert_id = None
        if changed:
            await self.publish_merged()

    def _restored(self, doc: EditorDocument) -> bool:
        """If the text is back at the revert target, demote the error to information; True if so."""
        notice = self._extra_diags.get("outside")
        if notice is None or notice.get("severity") != 1 or doc.text != self._revert_target:
            return False
        self._extra_diags["outside"] = {**notice, "severity": 3}
        return True

    def reopened(self, doc: EditorDocument) -> tuple[str, int]:
        """The text and version a restarted Lean gets for the task file."""
        version = self.lean_version if self.lean_version is not None else doc.version
        self.forwarded(version, time.perf_counter())
        return self.lean_text, version

    async def _refuse(
        self, doc: EditorDocument, outcome: str, reason: str | None, time_up: bool
    ) -> None:
        """Keep Lean on its text; revert the editor (outside edits) or explain (held bodies)."""
        if outcome == "held" and not time_up:
            self.attempt.rejected(doc.version, reason or "held")
            rng = self.scope.body_range(doc.text)
            self._extra_diags["held"] = diagnostic(
                f"{reason}. Lean still checks your last valid proof (version {self.lean_version}).",
                rng,
                code="held",
            )
            await self.publish_merged()
            return
        message = TIME_UP_MESSAGE if time_up else OUTSIDE_MESSAGE
        self.attempt.rejected(doc.version, "time limit" if time_up else "outside the proof body")
        target = self._revert_target = self.lean_text if time_up else self._scoped_text
        start, end_target, _ = changed_span(target, doc.text)
        self._extra_diags["outside"] = diagnostic(
            message, _lsp_range(LineIndex(target), start, max(end_target, start))
        )
        self._revert_tries = 0
        await self.publish_merged()
        await self._send_revert(doc)

    async def _send_revert(self, doc: EditorDocument) -> None:
        rid = f"{ID_PREFIX}{next(self._ids)}"
        self._revert_id = rid
        self._revert_tries += 1
        edit = replace_edit(doc.text, self._revert_target)
        await self._to_editor(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "workspace/applyEdit",
                "params": {
                    "label": "leanrig: only the proof body may change",
                    "edit": {
                        "documentChanges": [
                            {
                                "textDocument": {"uri": doc.uri, "version": doc.version},
                                "edits": [edit],
                            }
                        ]
                    },
                },
            }
        )

    def editor_answered(self, rid: str, message: dict[str, Any]) -> None:
        """The editor's answer to leanrig's request ``rid`` (a revert's ``applyEdit``)."""
        if rid != self._revert_id:
            return
        result = message.get("result")
        applied = isinstance(result, dict) and bool(result.get("applied"))
        self._start_soon(functools.partial(self._check_revert, rid, applied))

    async def _check_revert(self, rid: str, applied: bool) -> None:
        """Check the document the editor sends back; retry a skipped revert, then say so."""
        doc = self._docs.get(self.uri or "")
        if doc is None:
            return
        target = self._revert_target
        if applied and doc.text != target:
            with anyio.move_on_after(self._revert_timeout):
                while doc.text != target and self._revert_id == rid:
                    await self._scope_changed.wait()
        if self._revert_id != rid or doc.text == target:
            return
        if self._revert_tries < 3:
            await self._send_revert(doc)
            return
        self._extra_diags["outside"] = diagnostic(
            "leanrig: your editor did not undo the edit outside the proof body; Lean keeps the "
            f"last valid text (version {self.lean_version}). Undo the edit to continue.",
            self._extra_diags.get("outside", {}).get("range")
            or self.scope.body_range(self.lean_text),
        )
        await self.publish_merged()

    async def publish_merged(self) -> None:
        if self.uri is None:
            return
        params: dict[str, Any] = {
            "uri": self.uri,
            "diagnostics": [*self._lean_diags, *self._extra_diags.values()],
        }
        version = self._lean_diag_version
        if version is None:
            version = self.lean_version
        if version is not None:
            params["version"] = version
        await self._to_editor(
            {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": params}
        )

    async def diagnostics_from_lean(self, message: dict[str, Any], params: dict[str, Any]) -> bool:
        """Track Lean's diagnostics; True if sent merged with leanrig's, else the proxy forwards."""
        self._track_diagnostics(params)
        if self._extra_diags and not params.get("isIncremental"):
            merged = {
                **params,
                "diagnostics": [*(params.get("diagnostics") or ()), *self._extra_diags.values()],
            }
            await self._to_editor({**message, "params": merged})
            return True
        return False

    async def progress_from_lean(self, params: dict[str, Any]) -> None:
        """Time a finished version; say once that a worker stopped for good."""
        stopped = self._track_progress(params)
        if (
            stopped is not None
            and stopped != self._stop_shown
            and self.uri is not None
            and not self._lean.worker_alive(self.uri)
        ):
            # A dead worker shows only as a fatal progress; a bad import too, but its worker lives.
            self._stop_shown = stopped
            self.attempt.worker_stopped(stopped)
            await self._show(
                "leanrig: Lean stopped processing the task file (its worker crashed or was "
                "killed); your next edit starts it again",
                2,
            )

    def _track_diagnostics(self, params: dict[str, Any]) -> None:
        version = params.get("version")
        diags = list(params.get("diagnostics") or ())
        if params.get("isIncremental") and version == self._lean_diag_version:
            self._lean_diags.extend(diags)
        else:
            self._lean_diags = diags
            self._lean_diag_version = version if isinstance(version, int) else None
        if self._done is not None and self._done[0] == version:
            self._done = (version, self._done[1], self._done[2], self._lean_errors(version))
            self.record_done()

    def forwarded(self, version: int, received: float) -> None:
        """``version`` of the task file went to Lean (its edit ``received`` then)."""
        self.record_done()
        self.attempt.forwarded(version, received)

    def record_done(self) -> None:
        """Write the ledger line of the version Lean finished, with its errors as last reported.

        Lean sends "done" just before a version's last diagnostics, so this runs after those."""
        if self._done is None:
            return
        version, fatal, at, errors = self._done
        self._done = None
        # Hashed as a submission is, so the ledger and results.jsonl agree.
        body = (self.scope.body_of(self.lean_text) or "").rstrip()
        self.attempt.elaborated(version, errors=errors, fatal=fatal, body=body, at=at)

    def _track_progress(self, params: dict[str, Any]) -> int | None:
        """Time the version Lean finished; that version if it stopped for good, else None."""
        processing = params.get("processing") or []
        version = (params.get("textDocument") or {}).get("version")
        fatal = any(isinstance(p, dict) and p.get("kind") == 2 for p in processing)
        if (processing and not fatal) or not isinstance(version, int):
            return None
        if self._done is not None and self._done[0] == version:
            # Lean may say "done" twice for a version: the first one times it.
            return version if fatal else None
        self.record_done()
        self._done = (version, fatal, time.perf_counter(), self._lean_errors(version))
        return version if fatal else None

    def _lean_errors(self, version: int) -> int:
        if self._lean_diag_version != version:
            return 0
        return sum(1 for d in self._lean_diags if d.get("severity") == 1)
