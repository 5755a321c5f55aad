"""The ``#print axioms`` probe: finds a clean proof relying on ``sorryAx`` or an unlisted axiom.

Pure text: must not run Lean or decide when a step is probed (the elaborator does)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from lsp_bridge import DocumentReport, name_parts

from ..tasks import insert_before_exit
from ..verdict import axioms_outside, escape_name, parse_axioms

SORRY_HELPER = (
    "the proof depends on `sorryAx` through a lemma it uses that is left with `sorry` (the "
    "verdict rejects that); prove it without the unproved lemmas"
)

AXIOM_HELPER = (
    "not complete: the proof depends on axioms outside the suite's allow-list (check_proof "
    "rejects that): "
)

# Lean's own axioms a body may name or a tactic leave (`native_decide`, `decide +native`,
# `bv_decide`): a step whose text names one, or a NATIVE_WORDS word, gets the probe.
INIT_AXIOMS = ("Lean.ofReduceBool", "Lean.ofReduceNat", "Lean.trustCompiler")
NATIVE_WORDS = ("native", "bv_decide")

PROBE_UNREAD = (
    "not complete: Lean's `#print axioms` answer for the target could not be read, so the "
    "axioms this proof depends on are unknown; check_proof decides"
)


def split_probe(
    report: DocumentReport, probe_line: int, displaced: str | None
) -> tuple[DocumentReport, list[str]]:
    """Lean's report without the probe, and the probe's messages; a parse error naming the
    probe's token names ``displaced`` instead (the agent sees no probe)."""
    ours = [d.message for d in report.diagnostics if d.range.start.line >= probe_line]
    kept = tuple(
        dataclasses.replace(d, message=d.message.replace(_PROBE_TOKEN, displaced))
        if displaced is not None and _PROBE_TOKEN in d.message
        else d
        for d in report.diagnostics
        if d.range.start.line < probe_line
    )
    return dataclasses.replace(report, diagnostics=kept), ours


_PROBE_TOKEN = "unexpected token 'set_option'"  # the probe's first token


def probe_objection(messages: Sequence[str], theorem: str, allowed: Sequence[str]) -> str | None:
    """Why a clean step is still not complete, from the probe's ``messages`` (None: nothing);
    judged on full names as the verdict does, and an unreadable answer is not clean."""
    used = parse_axioms([{"data": m} for m in messages], theorem)
    if used is None:
        return PROBE_UNREAD
    if any(name_parts(name) == ("sorryAx",) for name in used):
        return SORRY_HELPER
    extra = axioms_outside(used, allowed)
    return AXIOM_HELPER + ", ".join(extra) if extra else None


def init_pattern(allowed_axioms: Sequence[str]) -> re.Pattern[str]:
    """Text that gets a step probed: an unlisted INIT_AXIOMS name, or a NATIVE_WORDS word."""
    allowed = {name_parts(name) for name in allowed_axioms}
    names = [re.escape(name_parts(n)[-1]) for n in INIT_AXIOMS if name_parts(n) not in allowed]
    if not names:
        return re.compile(r"(?!)")  # matches nothing
    words = "|".join(re.escape(word) for word in NATIVE_WORDS)
    return re.compile("|".join(names) + rf"|(?<![\w'.])(?:{words})(?![\w'])")


def with_probe(
    lean_text: str, theorem: str, task_text: str, exit_at: int | None
) -> tuple[str, int]:
    """``lean_text`` with the probe of ``theorem``, and its line: appended, so no position
    moves, or inserted before an ``#exit`` after the target."""
    # Full names, to compare with the allow-list whatever namespaces are open.
    probe = f"set_option pp.fullNames true in\n#print axioms _root_.{escape_name(theorem)}\n"
    if exit_at is None:
        lean_text = lean_text + "\n\n" + probe
        return lean_text, lean_text.rstrip("\n").count("\n")
    probed, at = insert_before_exit(lean_text, task_text, exit_at, "\n" + probe)
    return probed, lean_text.count("\n", 0, at) + 1


def unlisted(declared: Sequence[str], allowed_axioms: Sequence[str]) -> bool:
    """Is a ``declared`` axiom outside the allow-list (by full name; ``sorryAx`` excepted)?"""
    allowed = {name_parts(name) for name in allowed_axioms}
    return any(
        name_parts(name) not in allowed and name_parts(name) != ("sorryAx",) for name in declared
    )
