"""The reference BEq+ as tactic proofs, for a full toolchain with Mathlib (its tactics:
``symm_saturate``, ``tauto``, ``noncomm_ring``, ``simp_all_arith!``): portfolio
``beq-plus-tactics/1``, ported from LeanInteract's ``examples/beq_plus.py`` (``beq_plus``).

Per direction, every step's proof starts with ``intros`` and ``symm_saturate``, as there; the
grader checks them all in one Lean run and decides in the reference's order
(``equivalence.py``):

1. ``exact?``: counted only if the proof it suggests needs ``base`` (the suggestion, re-checked
   with ``base`` and without it: Lean decides, not the text);
2. ``assumption`` closes the target alone: the direction is not counted (a guard);
3. ``apply base``, then the solvers on every goal;
4. ``have : <base's conclusion> := by apply_rules [base]; …`` then the solvers, skipped when the
   solvers prove the target without the ``have`` (a guard);
5. ``convert (config := .unfoldSameFun) base using k``, k = 0…4, then the solvers.

Differences from the reference: ``base`` is a hypothesis of the direction's theorem (there a
sorried lemma), and step 4's conclusion is Lean's printed conclusion of ``base``'s statement
with its binder names (there the source text's); where leanrig cannot read the printed
statement, step 4 is left out.

Pure: builds the proofs' text; nothing here runs Lean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .equiv_terms import BASE, Candidate, TermError, parse_term, show, split

TACTIC_PORTFOLIO_VERSION: Final = "beq-plus-tactics/1"
SOLVERS_APPLY: Final = ("tauto", "simp_all_arith!", "noncomm_ring", "exact?")
SOLVERS_HAVE: Final = ("tauto", "simp_all_arith!", "exact? using this")
CONVERT_DEPTHS: Final = range(5)
# The steps, in the reference's order; the guards' proofs are of the target alone.
STEPS: Final = ("exact?", "assumption", "apply", "have-guard", "have", "convert")
GUARD_STEPS: Final = frozenset({"assumption", "have-guard"})


def prove_all(tactics: Sequence[str]) -> str:
    """The reference's ``prove_all``: each solver on all goals, else all of them in turn."""
    independent = " ; ".join(f"(all_goals try {t})" for t in tactics)
    combined = "all_goals (" + " ; ".join(f"(try {t})" for t in tactics) + ")"
    return f"all_goals intros\nfirst | ({independent}) | ({combined})"


def tactic_proof(*lines: str) -> str:
    """``by``, the reference's prelude (``intros``, ``symm_saturate``), then ``lines``,
    indented for a declaration whose proof starts two spaces in."""
    body = ["intros", "symm_saturate", *"\n".join(lines).splitlines()]
    return "by\n" + "\n".join(f"    {line}" for line in body)


@dataclass(frozen=True, slots=True)
class TacticPlan:
    """A direction's steps: ``candidates`` (``guard`` ones without ``base``), in order."""

    candidates: tuple[Candidate, ...]
    notes: tuple[str, ...] = ()


def base_conclusion(source: str | None) -> str | None:
    """The conclusion of the statement Lean printed as ``source``, with its binder names (what
    the reference's step 4 states), or None where it is not read."""
    if source is None:
        return None
    try:
        _, conclusion = split(parse_term(source))
    except TermError:
        return None
    return show(conclusion)


def beq_plus_plan(source: str | None) -> TacticPlan:
    """The reference BEq+'s steps for a direction whose other statement Lean printed as
    ``source`` (None: not printed)."""
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
    """The proof ``exact?`` found (its "Try this:" message), as the reference reads it."""
    for data in messages:
        if data.startswith("Try this:"):
            return data.split("Try this:", 1)[1].strip()
    return None
