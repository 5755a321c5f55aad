"""Requests about one open document that end when its processing stops, as Lean's watchdog
would answer them: a request raced against the document's fatal state (after a worker crash
the watchdog *queues* requests until the next change, so without the race a request would wait
for its whole deadline), a query asked alone, and when a document counts as stopped (a fatal
progress report, after a grace through the watchdog).

Must not change documents or start processes: the client does; these only ask and end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio

from .channels import DocumentChannels
from .doc_queries import DocQuery
from .errors import (
    ContentModified,
    ElaborationFailed,
    LeanrigError,
    ServerError,
    WorkerCrashed,
    WorkerExited,
)
from .open_document import OpenDocument, find_document
from .pending_requests import unreadable_answer

# After a version's fatal `fileProgress` through the watchdog, how long its requests may still
# be answered before they are ended (``fatal_progress``): a live worker answers within
# milliseconds; a crashed one never.
FATAL_GRACE_SECONDS = 1.0


def mark_fatal(doc: OpenDocument, channels: DocumentChannels) -> None:
    """Processing of ``doc``'s current version stopped for good: its requests under way end
    (``ElaborationFailed``) and later ones are refused until the next change."""
    doc.fatal_version = doc.version
    if not doc.fatal.is_set():
        doc.fatal.set()
        transport = channels.connection_of(doc.uri)
        if transport is not None:
            transport.fail_tagged(doc.uri, doc.stopped_error("request"))


def fatal_progress(
    doc: OpenDocument,
    docs: Mapping[str, OpenDocument],
    channels: DocumentChannels,
    start_soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
) -> None:
    """Lean reported that processing of ``doc``'s current version stopped for good. A worker
    that is alive (a header that does not elaborate: a missing import) still publishes the
    version's error and answers what is asked, after this report; one that crashed is reported
    so by the watchdog, which then holds the document's requests until its next change. So the
    version is fatal at once (its report says so), and only through the watchdog, after
    ``FATAL_GRACE_SECONDS`` (in a task ``start_soon`` runs), are its requests still unanswered
    ended and later ones refused (``mark_fatal``). A direct worker answers a fatal version's
    queries; a dead one ends its requests as it exits. (Ended at once, a missing import was
    reported as a crash: its error had not arrived yet.)"""
    doc.fatal_version = doc.version
    if not channels.direct:
        start_soon(functools.partial(_fatal_after_grace, doc, doc.version, docs, channels))


async def _fatal_after_grace(
    doc: OpenDocument, version: int, docs: Mapping[str, OpenDocument], channels: DocumentChannels
) -> None:
    await anyio.sleep(FATAL_GRACE_SECONDS)
    if docs.get(doc.uri) is doc and doc.version == version:
        mark_fatal(doc, channels)


async def doc_request(
    doc: OpenDocument, channels: DocumentChannels, method: str, params: Any, timeout: float
) -> Any:
    """A request about ``doc`` that also ends if the document's worker dies.

    Lean's watchdog queues requests for a crashed worker until the next change; without
    ending them on the fatal report they would wait for their whole deadline. A superseded or
    fatal ``waitForDiagnostics`` answers None (the barrier reports the version itself).
    """
    if doc.fatal.is_set():
        raise doc.stopped_error(method)
    await channels.settled(doc.uri, timeout, method)
    try:
        conn = channels.conn(doc.uri)
        try:
            return await conn.request(method, params, timeout=timeout, tag=doc.uri)
        except ServerError as exc:
            error = channels.error(doc.uri, exc, conn)
            if error is exc:
                raise
            if isinstance(error, ContentModified) and method == ("textDocument/waitForDiagnostics"):
                return None  # superseded: wait_for goes on with the newest version
            raise error from exc
    except (WorkerCrashed, WorkerExited):
        mark_fatal(doc, channels)
        raise
    except ElaborationFailed:
        if method == "textDocument/waitForDiagnostics":
            return None  # wait_for reports the fatal version itself
        raise


async def ask_alone(
    docs: Mapping[str, OpenDocument],
    uri: str,
    channels: DocumentChannels,
    query: DocQuery,
    timeout: float,
) -> Any:
    """``query`` alone, about document ``uri``'s current version: parsed, or its error if
    optional (also when the document is no longer open)."""
    try:
        doc = find_document(docs, uri)
        raw = await doc_request(doc, channels, query.method, query.params(uri), timeout)
    except LeanrigError as exc:
        if query.optional:
            return exc
        raise
    try:
        return query.parse(raw)
    except Exception as exc:
        error = unreadable_answer(query.method, exc)
        if query.optional:
            return error
        raise error from exc
