"""Whether a step's proof is complete: one status with its reason, by the verdict's rules.

Pure: must not run Lean or change a report (the elaborator adds the warnings)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..verdict import PLACEHOLDER_PROVES, forbidden_constructs
from .axiom_probe import probe_objection

CompletenessStatus = Literal[
    "complete",
    "unfinished",  # Lean's report: an error, a sorry, unsolved goals, or the version unfinished
    "task_file_error",  # the task file as written has an error outside the body (wrapped target)
    "axioms",  # the proof depends on sorryAx or an axiom outside the allow-list (the probe)
    "forbidden",  # the proof uses a construct the verdict rejects (verdict.FORBIDDEN)
    "out_of_scope",  # the edit leaves the proof body (the scope check)
    "placeholder",  # the task's own placeholder, unchanged, proves the theorem: a broken suite
]

FORBIDDEN_NOTE = "not complete: check_proof rejects this proof: "

# Share of the verdict's per-stage limit above which a complete step is warned (SLOW_NOTE).
SLOW_SHARE = 0.5
SLOW_NOTE = (
    "complete, but Lean took {took:.1f} s for this step; check_proof elaborates the whole file "
    "again in fresh processes, each stage within {limit:g} s (the suite's limit), and may time "
    "out there: a faster proof is safer"
)


@dataclass(frozen=True, slots=True)
class Completeness:
    """A step's completeness ``status`` and ``reason`` (None: complete, or Lean's report says)."""

    status: CompletenessStatus
    reason: str | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def proof_passes(self) -> bool:
        """Does the proof itself pass every rule (failing at most on scope or placeholder)?"""
        return self.status in ("complete", "out_of_scope", "placeholder")


COMPLETE = Completeness("complete")
UNFINISHED = Completeness("unfinished")


def decide_completeness(
    *,
    lean_complete: bool,
    task_file_error: str | None,
    probe_messages: Sequence[str] | None,
    theorem: str,
    allowed_axioms: Sequence[str],
    body: str,
    scope_rejection: str | None,
    placeholder: bool,
) -> Completeness:
    """The step's completeness: the first rule that fails decides; later ones are not run.
    ``probe_messages``: None means not probed."""
    if not lean_complete:
        return UNFINISHED
    if task_file_error:
        return Completeness("task_file_error", task_file_error)
    if probe_messages is not None:
        objection = probe_objection(probe_messages, theorem, allowed_axioms)
        if objection is not None:
            return Completeness("axioms", objection)
    if forbidden := forbidden_constructs(body):
        return Completeness("forbidden", FORBIDDEN_NOTE + "; ".join(forbidden))
    if scope_rejection is not None:
        return Completeness("out_of_scope", scope_rejection)
    if placeholder:
        return Completeness("placeholder", PLACEHOLDER_PROVES)
    return COMPLETE


def slow_note(lean_s: float, verdict_seconds: float | None) -> str | None:
    """SLOW_NOTE if Lean's ``lean_s`` seconds are slow for the verdict's limit, else None."""
    if verdict_seconds is None or lean_s <= SLOW_SHARE * verdict_seconds:
        return None
    return SLOW_NOTE.format(took=lean_s, limit=verdict_seconds)
