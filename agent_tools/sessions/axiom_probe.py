"""The ``#print axioms`` probe of a session document: a proof Lean reports clean may still
depend on ``sorryAx`` (through a helper lemma left with ``sorry``) or on an axiom outside the
suite's allow-list (declared by the task file or the library, or one of Lean's own that a
tactic such as ``native_decide`` leaves), which the verdict rejects. For such tasks and
steps the session document ends with ``#print axioms`` of the target (``with_probe``); its
messages are split off Lean's report (``split_probe``) and read as the verdict reads them
(``probe_objection``).

Pure text: must not run Lean or decide when a step is probed (the elaborator does, from
``init_pattern`` and what it knows of the task).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from lsp_bridge import DocumentReport, name_parts

from ..tasks import insert_before_exit
from ..verdict import axioms_outside, escape_name, parse_axioms

# A task file (or the suite's own library) may leave helper lemmas with `sorry` (as many
# benchmark files do): a target proved *through* one reports no error and no sorry of its own,
# yet depends on `sorryAx`, and the verdict rejects it. For such tasks the session document
# ends with `#print axioms` of the target (appended: no position moves), and a step whose
# proof depends on `sorryAx` is not complete, with this warning on the target.
SORRY_HELPER = (
    "the proof depends on `sorryAx` through a lemma it uses that is left with `sorry` (the "
    "verdict rejects that); prove it without the unproved lemmas"
)

# Likewise an axiom the task file or the suite's library declares outside the suite's
# allow-list: a target proved through it reports nothing, and the verdict rejects it. Such
# tasks get the same `#print axioms` probe (``sorryAx``, which a prelude library declares
# itself, is covered by Lean's own "declaration uses 'sorry'" and by SORRY_HELPER).
AXIOM_HELPER = (
    "not complete: the proof depends on axioms outside the suite's allow-list (check_proof "
    "rejects that): "
)

# Lean's own library declares axioms beyond the usual allow-list that a body can name (not
# declared in the task file or the suite's library, so not found there): `Lean.ofReduceBool` is
# what `native_decide` leaves, `Lean.ofReduceNat` its Nat twin, `Lean.trustCompiler` what
# compiler-trusting tactics leave. A session document whose text names one outside the
# allow-list gets the probe for that step (AXIOM_HELPER then names it).
INIT_AXIOMS = ("Lean.ofReduceBool", "Lean.ofReduceNat", "Lean.trustCompiler")
# Tactics that leave them without naming them (`native_decide` is forbidden outright, but
# `decide +native` / `decide (config := {native := true})` is the same tactic, and `bv_decide`
# checks its certificate by `Lean.ofReduceBool`): their words in the text probe too.
NATIVE_WORDS = ("native", "bv_decide")

# The probe's answer could not be read (no `#print axioms` message names the target): the
# session cannot tell, so it does not say complete; the verdict decides.
PROBE_UNREAD = (
    "not complete: Lean's `#print axioms` answer for the target could not be read, so the "
    "axioms this proof depends on are unknown; check_proof decides"
)


def split_probe(
    report: DocumentReport, probe_line: int, displaced: str | None
) -> tuple[DocumentReport, list[str]]:
    """Lean's report without the appended ``#print axioms``, and that command's messages.
    A parse error that ran into the probe names it ("unexpected token 'set_option'"), a command
    the agent cannot see: it names what the task file has there instead (``displaced``)."""
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
    """Why a step Lean reported clean is still not complete, from the appended ``#print
    axioms`` probe's ``messages`` (None: nothing against it). Judged on the names Lean lists,
    as the verdict does (a theorem or axiom whose name merely contains ``sorryAx`` is not
    ``sorryAx``); an answer that cannot be read is not taken as clean (PROBE_UNREAD)."""
    used = parse_axioms([{"data": m} for m in messages], theorem)
    if used is None:
        return PROBE_UNREAD
    if any(name_parts(name) == ("sorryAx",) for name in used):
        return SORRY_HELPER
    extra = axioms_outside(used, allowed)
    return AXIOM_HELPER + ", ".join(extra) if extra else None


def init_pattern(allowed_axioms: Sequence[str]) -> re.Pattern[str]:
    """What makes a step probed by its text (the elaborator probes a step whose text matches):
    a name of INIT_AXIOMS outside the allow-list, or a word of NATIVE_WORDS."""
    allowed = {name_parts(name) for name in allowed_axioms}
    names = [re.escape(name_parts(n)[-1]) for n in INIT_AXIOMS if name_parts(n) not in allowed]
    if not names:
        return re.compile(r"(?!)")  # every one allowed: nothing to look for
    words = "|".join(re.escape(word) for word in NATIVE_WORDS)
    return re.compile("|".join(names) + rf"|(?<![\w'.])(?:{words})(?![\w'])")


def with_probe(
    lean_text: str, theorem: str, task_text: str, exit_at: int | None
) -> tuple[str, int]:
    """``lean_text`` (a session document of the task file ``task_text``) with the probe of
    ``theorem``, and the probe's line. Appended, so no position moves — or, in a task file
    that stops with ``#exit`` after the target (``exit_at``), inserted right before that
    ``#exit`` (nothing after it is elaborated, so nothing after it is reported either)."""
    # Full names: `#print axioms` prints them relative to the namespaces open where it runs
    # (`[choice]` after `open Classical`), and they are compared with the allow-list.
    probe = f"set_option pp.fullNames true in\n#print axioms _root_.{escape_name(theorem)}\n"
    if exit_at is None:
        lean_text = lean_text + "\n\n" + probe
        return lean_text, lean_text.rstrip("\n").count("\n")
    # The probe gets a line of its own (the `#exit` may follow other text on its line).
    probed, at = insert_before_exit(lean_text, task_text, exit_at, "\n" + probe)
    return probed, lean_text.count("\n", 0, at) + 1


def unlisted(declared: Sequence[str], allowed_axioms: Sequence[str]) -> bool:
    """Is one of the ``declared`` axioms (full names, ``axioms_declared``) outside the
    allow-list? Compared by full name, as the verdict does: ``Demo.sound`` is not
    ``Quot.sound``. The root ``sorryAx`` is left to SORRY_HELPER."""
    allowed = {name_parts(name) for name in allowed_axioms}
    return any(
        name_parts(name) not in allowed and name_parts(name) != ("sorryAx",) for name in declared
    )
