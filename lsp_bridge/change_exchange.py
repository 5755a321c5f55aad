"""A change and its questions in one write (``LeanClient.update``): the didChange, the barrier
for the new version and the queries about it, framed together (``LspTransport.exchange``), and
the early barrier that may end the exchange before Lean answers its barrier (direct workers;
lsp_bridge/README.md: the rule is Lean's reporter's own order, applied per notification in
``open_document.py``).

Must not decide what to change or how to report: the client computes the change and reads the
answers into a report. This only sends, waits and says what a dead worker's errors mean.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from .channels import DocumentChannels
from .doc_queries import DocQuery, framed_requests
from .doc_requests import mark_fatal
from .errors import LeanrigError, ServerError, WorkerCrashed, WorkerExited
from .open_document import OpenDocument
from .pending_requests import Conditional

log = structlog.get_logger("leanrig.lsp")


class EarlyBarrier:
    """Whether a step may end once Lean's reporter is known to have published the version's
    last diagnostics (``enabled``: the command's ``early_barrier``, with direct workers), and
    what it did: ``ends``, steps it ended before Lean's answer; ``faults``, versions whose
    diagnostics came after their step had ended (the rule does not hold for this Lean): it is
    off from the first one on."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.ends = 0
        self.faults = 0

    @property
    def on(self) -> bool:
        return self.enabled and self.faults == 0

    def broken(self, doc: OpenDocument) -> None:
        """Diagnostics of ``doc``'s early version came after its step ended: that step
        reported too few. Steps wait for Lean's own barrier from now on."""
        self.faults += 1
        if self.faults == 1:
            log.warning(
                "lsp.early_barrier_off",
                uri=doc.uri,
                version=doc.early_version,
                detail="diagnostics came after the version was reported done; "
                "steps wait for Lean's barrier from now on",
            )


async def exchange_change(
    doc: OpenDocument,
    version: int,
    changes: list[tuple[str, Any]],
    now: list[DocQuery],
    later: list[DocQuery],
    channels: DocumentChannels,
    early_barrier: EarlyBarrier,
    remaining: Callable[[], float],
) -> tuple[list[Any], bool]:
    """``changes`` (the didChange that made ``version``, or none), the barrier for ``version``
    and the ``now`` queries in one write, with the ``later`` ones (``unless_clean``) as its
    ``Conditional``: the answers in that order (errors in their place; None for a barrier the
    early barrier ended), and whether the ``later`` ones were waited for. A change that may
    not have reached Lean marks the document for a whole-text resync."""
    uri = doc.uri

    def on_error(error: LeanrigError) -> None:
        if isinstance(error, (WorkerCrashed, WorkerExited)):
            mark_fatal(doc, channels)  # ends this document's other requests at once

    def has_problem() -> bool:
        # Asked once the barrier is in: the version's diagnostics are all published.
        return doc.diag_version == version and any(d.is_problem for d in doc.diagnostics)

    conditional = Conditional(framed_requests(uri, later), has_problem) if later else None
    early: Callable[[], bool] | None = None
    if changes and channels.direct and early_barrier.on:
        doc.early_version = version

        def early() -> bool:
            return doc.final_version == version

    conn = channels.conn(uri)
    try:
        answers = await conn.exchange(
            changes,
            [("textDocument/waitForDiagnostics", {"uri": uri, "version": version}, None),
             *framed_requests(uri, now)],
            timeout=remaining(),
            tag=uri,
            on_error=on_error,
            conditional=conditional,
            early=early,
        )  # fmt: skip
    except ServerError as exc:
        if changes:
            doc.resync = True
        error = channels.error(uri, exc, conn)
        if error is exc:
            raise
        if isinstance(error, WorkerCrashed):
            mark_fatal(doc, channels)
        raise error from exc
    except BaseException:
        if changes:
            doc.resync = True  # the change may not have reached Lean
        raise
    if channels.direct:
        answers = [
            channels.error(uri, a, conn) if isinstance(a, LeanrigError) else a for a in answers
        ]
        if any(isinstance(a, WorkerCrashed) for a in answers):
            mark_fatal(doc, channels)
    if early is not None and answers[0] is None:
        early_barrier.ends += 1
    return answers, conditional is not None and conditional.waited
