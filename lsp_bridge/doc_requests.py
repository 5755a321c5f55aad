"""Requests about one open document that end when its processing stops, not at their deadline.

Must not change documents or start processes: the client does; these only ask and end."""

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

# After a fatal `fileProgress` through the watchdog: a live worker still answers, a crashed never.
FATAL_GRACE_SECONDS = 1.0


def mark_fatal(doc: OpenDocument, channels: DocumentChannels) -> None:
    """End ``doc``'s requests under way and refuse later ones until the next change."""
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
    """Lean reported ``doc``'s current version fatal; through the watchdog, ``mark_fatal`` later.

    The grace lets a live worker (e.g. a missing import) still publish its error and answer."""
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

    A superseded or fatal ``waitForDiagnostics`` answers None (the barrier reports it)."""
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
                return None
            raise error from exc
    except (WorkerCrashed, WorkerExited):
        mark_fatal(doc, channels)
        raise
    except ElaborationFailed:
        if method == "textDocument/waitForDiagnostics":
            return None
        raise


async def ask_alone(
    docs: Mapping[str, OpenDocument],
    uri: str,
    channels: DocumentChannels,
    query: DocQuery,
    timeout: float,
) -> Any:
    """``query`` alone about ``uri``'s current version: parsed, or its error if optional."""
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
