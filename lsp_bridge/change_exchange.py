"""A change, its barrier and its queries in one write, and the early barrier that may end it.

Must not decide what to change or how to report: this only sends, waits and maps errors."""

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
    """Whether a step may end once its version's last diagnostics are known to be published.

    ``ends``: steps ended before Lean's answer; ``faults``: rule broken (off from the first one)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.ends = 0
        self.faults = 0

    @property
    def on(self) -> bool:
        return self.enabled and self.faults == 0

    def broken(self, doc: OpenDocument) -> None:
        """Diagnostics came after ``doc``'s early step ended: use Lean's barrier from now on."""
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
    """Send ``changes``, the barrier for ``version``, ``now`` and (conditionally) ``later``.

    Returns the answers in that order (errors in place; None for a barrier ended early) and
    whether ``later`` was waited for."""
    uri = doc.uri

    def on_error(error: LeanrigError) -> None:
        if isinstance(error, (WorkerCrashed, WorkerExited)):
            mark_fatal(doc, channels)

    def has_problem() -> bool:
        # Asked once the barrier is in: all the version's diagnostics are published.
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
            [
                ("textDocument/waitForDiagnostics", {"uri": uri, "version": version}, None),
                *framed_requests(uri, now),
            ],
            timeout=remaining(),
            tag=uri,
            on_error=on_error,
            conditional=conditional,
            early=early,
        )
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
            doc.resync = True
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
