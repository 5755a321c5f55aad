"""One open document as the client knows it: text and version sent, and what Lean reported.

Must not send or wait: every method is synchronous and runs on the transport's reader."""

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
    # The early barrier (lsp_bridge/README.md): the version a step waits for with it, the latest
    # one with diagnostics known final, and the one whose next diagnostics will be.
    early_version: int = -1
    final_version: int = -1
    final_after_next: int = -1
    resync: bool = False  # a change may not have reached Lean: the next sends the whole text
    # Processing of the current version stopped for good: requests about it are not sent.
    fatal: anyio.Event = field(default_factory=anyio.Event)

    def change(self, edits: Sequence[TextEdit]) -> dict[str, Any]:
        """The didChange params for code point ``edits``; moves to the new version: send them."""
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
            # Lean still re-elaborates only from the first changed command.
            changes = [{"text": text}]
            self.resync = False
        self.version += 1
        self.text = text
        self.progress = None
        if self.fatal.is_set():
            self.fatal = anyio.Event()
        return {
            "textDocument": {"uri": self.uri, "version": self.version},
            "contentChanges": changes,
        }

    def progress_reported(self, params: dict[str, Any], version: int | None) -> bool:
        """Record a ``$/lean/fileProgress`` (``version`` None: unversioned); True if fatal."""
        if version is not None and version != self.version:
            return False
        self.progress = params
        processing = params.get("processing")
        if processing:
            return any(p.get("kind") == 2 for p in processing)
        if version is None or version != self.early_version or self.final_version >= version:
            return False
        # Done: diagnostics are all out now, or come once right after (the early barrier).
        if self.diag_version == version:
            self.final_version = version
        else:
            self.final_after_next = version
        return False

    def diagnostics_reported(self, params: dict[str, Any]) -> bool:
        """Record a ``publishDiagnostics``; True if it breaks the early barrier's rule."""
        version = params.get("version")
        if not isinstance(version, int):
            version = self.version
        if version < self.diag_version:
            return False
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
        """Did finished ``version`` stop without an error to say why (a crash)?"""
        if self.fatal_version != version:
            return False
        diagnostics = self.diagnostics if self.diag_version == version else ()
        return not any(d.is_error for d in diagnostics)

    def report(self, requested: int, target: int, started: float) -> DocumentReport:
        """The report of finished ``target``; ``started`` is the caller's ``time.perf_counter``."""
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
        return ElaborationFailed(
            f"{method}: processing of {self.uri} stopped (worker crash or fatal error)",
            hint="send a change to the document to restart its worker",
        )


def find_document(docs: Mapping[str, OpenDocument], uri: str) -> OpenDocument:
    """The open document ``uri``; raises ``DocumentError`` when it is not open."""
    try:
        return docs[uri]
    except KeyError:
        raise DocumentError(f"document {uri} is not open", path=uri) from None
