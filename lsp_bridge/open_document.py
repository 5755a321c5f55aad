"""One open document as the client knows it (``OpenDocument``): the text and version sent to
Lean, what Lean has reported about it — diagnostics per version (Lean 4.31+ ``isIncremental``
appends), ``$/lean/fileProgress``, the fatal state — and whether a version's last diagnostics
are known to be out (the early barrier's rule: lsp_bridge/README.md), and the report of a
finished version.

Must not send or wait: the client owns the conversation. Every method here is synchronous and
runs on the transport's reader for each notification (~10 per edit), so it looks only at what
it needs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from .errors import DocumentError, ElaborationFailed
from .lean_types import DocumentReport, LeanDiagnostic, ReportStatus
from .positions import lsp_position
from .text_edits import TextEdit, apply_edit


@dataclass(slots=True)
class OpenDocument:
    uri: str
    text: str
    version: int
    diag_version: int = -1
    diagnostics: list[LeanDiagnostic] = field(default_factory=list)
    progress: dict[str, Any] | None = None  # raw $/lean/fileProgress of the current version
    fatal_version: int = -1
    # The early barrier (``LeanClient.update``): the version a step waits for with it, the
    # latest version whose diagnostics are known final before Lean answers the barrier, and
    # the version whose next diagnostics will be (reported done with none published before).
    early_version: int = -1
    final_version: int = -1
    final_after_next: int = -1
    # A change may not have reached Lean (its write was cancelled or failed): the next one
    # sends the whole text.
    resync: bool = False
    # Set when processing of the current version stopped for good (crash, fatal header error);
    # requests the watchdog would queue for a dead worker are not sent.
    fatal: anyio.Event = field(default_factory=anyio.Event)

    def change(self, edits: Sequence[TextEdit]) -> dict[str, Any]:
        """The didChange parameters for ``edits`` (code point ranges, each against the text the
        previous one left); the document moves to the new version (the caller sends them at
        once)."""
        changes: list[dict[str, Any]] = []
        text = self.text
        for e in edits:
            changes.append(
                {
                    "range": {
                        "start": lsp_position(text, e.start).to_json(),
                        "end": lsp_position(text, e.end).to_json(),
                    },
                    "text": e.text,
                }
            )
            text = apply_edit(text, e)
        if self.resync:
            # A previous change may never have reached Lean (its write was cancelled or
            # failed), so range edits could apply to a text Lean does not have: send the
            # whole text once (Lean still re-elaborates only from the first changed command).
            changes = [{"text": text}]
            self.resync = False
        self.version += 1
        self.text = text
        self.progress = None
        if self.fatal.is_set():
            self.fatal = anyio.Event()  # this change restarts the worker
        return {
            "textDocument": {"uri": self.uri, "version": self.version},
            "contentChanges": changes,
        }

    def progress_reported(self, params: dict[str, Any], version: int | None) -> bool:
        """A ``$/lean/fileProgress`` about ``version`` (None: unversioned): kept if it is about
        the current version, and the early barrier's rule applied. True when it says that
        processing of the version stopped for good (a fatal range)."""
        if version is not None and version != self.version:
            return False
        self.progress = params
        processing = params.get("processing")
        if processing:
            return any(p.get("kind") == 2 for p in processing)
        if version is None or version != self.early_version or self.final_version >= version:
            return False
        # Done: Lean's reporter publishes a version's diagnostics as it goes if it ever waited
        # for elaboration (then they are all out by now), else once, right after this
        # (lsp_bridge/README.md, "the early barrier").
        if self.diag_version == version:
            self.final_version = version
        else:
            self.final_after_next = version
        return False

    def diagnostics_reported(self, params: dict[str, Any]) -> bool:
        """A ``publishDiagnostics``: appended to its version's (``isIncremental``) or replacing
        them; a late report of an outdated version is dropped. True when it breaks the early
        barrier's rule: diagnostics of a version whose step already ended early."""
        version = params.get("version")
        if not isinstance(version, int):
            version = self.version
        if version < self.diag_version:
            return False  # late report of an outdated version
        new = [LeanDiagnostic.from_json(d) for d in params.get("diagnostics", ())]
        if params.get("isIncremental") and version == self.diag_version:
            self.diagnostics.extend(new)
        else:
            self.diagnostics = new
            self.diag_version = version
        if version == self.early_version:
            if version == self.final_version:
                return True
            if version == self.final_after_next:
                self.final_version = version
        return False

    def crashed(self, version: int) -> bool:
        """Did processing of ``version`` (finished) stop without an error to say why: a crash?"""
        if self.fatal_version != version:
            return False
        diagnostics = self.diagnostics if self.diag_version == version else ()
        return not any(d.is_error for d in diagnostics)

    def report(self, requested: int, target: int, started: float) -> DocumentReport:
        """The report of version ``target`` (fully elaborated) when ``requested`` was asked,
        ``started`` (``time.perf_counter``) when the caller began waiting."""
        status: ReportStatus = "done" if target == requested else "superseded"
        diagnostics = tuple(self.diagnostics) if self.diag_version == target else ()
        if self.fatal_version == target:
            status = "fatal"
        return DocumentReport(
            uri=self.uri,
            version=target,
            requested_version=requested,
            status=status,
            diagnostics=diagnostics,
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )

    def stopped_error(self, method: str) -> ElaborationFailed:
        """What a request ``method`` about this document meets once its processing stopped."""
        return ElaborationFailed(
            f"{method}: processing of {self.uri} stopped (worker crash or fatal error)",
            hint="send a change to the document to restart its worker",
        )


def find_document(docs: Mapping[str, OpenDocument], uri: str) -> OpenDocument:
    """The open document ``uri`` of ``docs``; ``DocumentError`` when it is not open."""
    try:
        return docs[uri]
    except KeyError:
        raise DocumentError(f"document {uri} is not open", path=uri) from None
