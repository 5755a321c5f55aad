"""Whether a step's proof is complete, as one explicit status with its reason
(``Completeness``, decided once by ``decide_completeness``): Lean's own report first, then
the rules a proof Lean accepts must also pass — the verdict's, so a session never calls
complete what check_proof rejects —, then where the edit is and what the body is. The first
rule that fails decides; the later ones are not looked at (the forbidden constructs cost
0.25-0.5 ms of a step: only a proof that passed the rest pays for them).

Pure: must not run Lean or change a report (the elaborator adds the warnings that say why).
"""

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

# A proof Lean accepts that uses a construct the verdict forbids (verdict.FORBIDDEN) is not
# complete either: the step says so with this warning, before the verdict would.
FORBIDDEN_NOTE = "not complete: check_proof rejects this proof: "

# A complete step that took Lean more than this share of the verdict's time limit gets a warning
# (SLOW_NOTE): the verdict elaborates the whole file again, in fresh processes that compete
# for the cores, each stage within the suite's ``limits.wall_seconds`` — and a step's time is
# only what Lean re-elaborated for it, so the verdict's is longer.
SLOW_SHARE = 0.5
SLOW_NOTE = (
    "complete, but Lean took {took:.1f} s for this step; check_proof elaborates the whole file "
    "again in fresh processes, each stage within {limit:g} s (the suite's limit), and may time "
    "out there: a faster proof is safer"
)


@dataclass(frozen=True, slots=True)
class Completeness:
    """A step's completeness: ``status``, and ``reason`` — the warning on the target that says
    why it is not complete (``task_file_error``, ``axioms``, ``forbidden``, ``placeholder``),
    or the step's scope rejection (``out_of_scope``); None when Lean's own diagnostics say it
    (``unfinished``) or it is complete."""

    status: CompletenessStatus
    reason: str | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def proof_passes(self) -> bool:
        """Does the proof itself pass every rule — complete, or not only for where the edit is
        or for the suite's placeholder? (A slow one is then warned; no goals are shown.)"""
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
    """The step's completeness: ``lean_complete`` (``session.is_complete`` of Lean's report),
    the task file's error as written (wrapped targets), the probe's messages (None: not
    probed), the ``body`` (for the forbidden constructs), the scope check's rejection, and
    whether the body is the task's own placeholder."""
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
        return Completeness("placeholder", PLACEHOLDER_PROVES)  # the verdict's own rule
    return COMPLETE


def slow_note(lean_s: float, verdict_seconds: float | None) -> str | None:
    """SLOW_NOTE for a step that took Lean ``lean_s`` against the verdict's limit per stage
    (None: not slow, or no limit)."""
    if verdict_seconds is None or lean_s <= SLOW_SHARE * verdict_seconds:
        return None
    return SLOW_NOTE.format(took=lean_s, limit=verdict_seconds)
