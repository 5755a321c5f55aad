"""The reference BEq+ (LeanInteract's ``beq_plus``) as tactic proofs: ``beq-plus-tactics/1``.

Needs Mathlib's tactics; the steps are in docs/equivalence.md. Pure: nothing here runs Lean."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .equiv_terms import BASE, Candidate, TermError, parse_term, show, split

TACTIC_PORTFOLIO_VERSION: Final = "beq-plus-tactics/1"
SOLVERS_APPLY: Final = ("tauto", "simp_all_arith!", "noncomm_ring", "exact?")
SOLVERS_HAVE: Final = ("tauto", "simp_all_arith!", "exact? using this")
CONVERT_DEPTHS: Final = range(5)
# In the reference's order; the guards prove the target alone.
STEPS: Final = ("exact?", "assumption", "apply", "have-guard", "have", "convert")
GUARD_STEPS: Final = frozenset({"assumption", "have-guard"})


def prove_all(tactics: Sequence[str]) -> str:
    """The reference's ``prove_all``: each solver on all goals, else all of them in turn."""
    independent = " ; ".join(f"(all_goals try {t})" for t in tactics)
    combined = "all_goals (" + " ; ".join(f"(try {t})" for t in tactics) + ")"
    return f"all_goals intros\nfirst | ({independent}) | ({combined})"


def tactic_proof(*lines: str) -> str:
    """``by``, the reference's prelude, then ``lines``, indented for a two-space proof."""
    body = ["intros", "symm_saturate", *"\n".join(lines).splitlines()]
    return "by\n" + "\n".join(f"    {line}" for line in body)


@dataclass(frozen=True, slots=True)
class TacticPlan:
    candidates: tuple[Candidate, ...]
    notes: tuple[str, ...] = ()


def base_conclusion(source: str | None) -> str | None:
    """The conclusion of the printed statement ``source`` (step 4's ``have``), or None."""
    if source is None:
        return None
    try:
        _, conclusion = split(parse_term(source))
    except TermError:
        return None
    return show(conclusion)


def beq_plus_plan(source: str | None) -> TacticPlan:
    """The reference BEq+'s steps; ``source``: the other statement as printed (None: not)."""
    cands = [
        Candidate("exact?", tactic_proof("exact?")),
        Candidate("assumption", tactic_proof("assumption"), guard=True),
        Candidate("apply", tactic_proof(f"apply {BASE}", prove_all(SOLVERS_APPLY))),
    ]
    notes: list[str] = []
    conclusion = base_conclusion(source)
    if conclusion is None:
        notes.append("step 4 (`have`) left out: the other statement's conclusion is not read")
    else:
        cands.append(Candidate("have-guard", tactic_proof(prove_all(SOLVERS_HAVE)), guard=True))
        have = [f"have : {conclusion} := by", f"  apply_rules [{BASE}]"]
        have += [f"  {line}" for line in prove_all(SOLVERS_APPLY).splitlines()]
        cands.append(Candidate("have", tactic_proof(*have, prove_all(SOLVERS_HAVE))))
    for k in CONVERT_DEPTHS:
        convert = f"convert (config := .unfoldSameFun) {BASE} using {k}"
        cands.append(Candidate(f"convert-{k}", tactic_proof(convert, prove_all(SOLVERS_APPLY))))
    return TacticPlan(tuple(cands), tuple(notes))


def exact_suggestion(messages: Sequence[str]) -> str | None:
    """The proof ``exact?`` suggested ("Try this:"), as the reference reads it."""
    for data in messages:
        if data.startswith("Try this:"):
            return data.split("Try this:", 1)[1].strip()
    return None
