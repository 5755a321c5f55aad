"""The session's reading of its `#print axioms` probe (axiom_probe.probe_objection): judged on
the axiom names Lean lists, and not clean when it cannot be read."""

from __future__ import annotations

from agent_tools.sessions.axiom_probe import (
    AXIOM_HELPER,
    PROBE_UNREAD,
    SORRY_HELPER,
    probe_objection,
)

ALLOWED = ("propext", "Classical.choice", "Quot.sound")


def test_a_clean_answer_has_no_objection() -> None:
    assert probe_objection(["'T.main' does not depend on any axioms"], "T.main", ALLOWED) is None
    listed = "'T.main' depends on axioms: [propext, Quot.sound]"
    assert probe_objection([listed], "T.main", ALLOWED) is None


def test_sorryax_is_judged_by_name_not_substring() -> None:
    theorem = "Demo.sorryAx_free"
    clean = f"'{theorem}' depends on axioms: [propext]"
    assert probe_objection([clean], theorem, ALLOWED) is None
    used = f"'{theorem}' depends on axioms: [propext,\n sorryAx]"
    assert probe_objection([used], theorem, ALLOWED) == SORRY_HELPER


def test_an_axiom_outside_the_allow_list_is_named() -> None:
    # `Demo.sorryAx` is not the root sorryAx: an axiom of its own, outside the allow-list.
    used = "'T.main' depends on axioms: [Demo.sorryAx, Demo.sound]"
    assert probe_objection([used], "T.main", ALLOWED) == AXIOM_HELPER + "Demo.sorryAx, Demo.sound"


def test_an_unreadable_answer_is_not_clean() -> None:
    assert probe_objection([], "T.main", ALLOWED) == PROBE_UNREAD
    assert probe_objection(["unknown constant 'T.main'"], "T.main", ALLOWED) == PROBE_UNREAD
    other = "'T.other' does not depend on any axioms"
    assert probe_objection([other], "T.main", ALLOWED) == PROBE_UNREAD
