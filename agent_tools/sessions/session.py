"""Proof sessions: per-session state, and what `complete` means.

A session holds no Lean process: each step borrows a pool slot."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field

import anyio

from lsp_bridge import DocumentReport, LeanDiagnostic, LeanTag, LineIndex

from ..tasks import Task
from .tool_outputs import StepState

# Lean quotes the sorry 'sorry' (older) or `s`, where s may be a whole `sorryAx …` term.
_USES_SORRY = re.compile(r"declaration uses (?:'sorry'|`)")


def leaves_proof_open(d: LeanDiagnostic) -> bool:
    """Does Lean say the declaration is not proved (unsolved goals, or a `sorry`)?"""
    return LeanTag.UNSOLVED_GOALS in d.lean_tags or _USES_SORRY.search(d.message) is not None


def is_complete(report: DocumentReport, index: LineIndex, start: int, end: int) -> bool:
    """No errors anywhere; no sorry or unsolved goals in the target (``[start, end)``, code
    points). Other declarations may use sorry (helper lemmas left to the prover)."""
    if report.status != "done" and report.status != "superseded":
        return False
    for d in report.diagnostics:
        if d.is_error:
            return False
        in_target = start <= index.offset_of_lsp(d.range.start) <= end
        if in_target and leaves_proof_open(d):
            return False
    return True


def body_sha(body: str) -> str:
    # A body with a lone surrogate is refused, but its ledger line still needs a hash.
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:12]


@dataclass(slots=True)
class ProofSession:
    id: str
    task: Task
    client: str  # which connection opened it (sessions of different clients are isolated)
    text: str
    body: str
    statement: str = ""  # the target's statement as this session has it (statement kinds)
    version: int = 0
    last: StepState | None = None
    opened_at: float = field(default_factory=time.perf_counter)
    # fast_acquire: an uncontended call does not yield to the loop first.
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    closed: bool = False

    @property
    def body_start(self) -> int:
        return self.task.span.start

    @property
    def body_end(self) -> int:
        return self.task.span.start + len(self.body)

    def wall_ms(self) -> float:
        return (time.perf_counter() - self.opened_at) * 1000
