"""A step's completeness is one status, decided by the first rule that fails (Lean's report, the
task file, axioms, forbidden constructs, scope, placeholder), with its reason."""

from __future__ import annotations

from typing import Any

from agent_tools.sessions.axiom_probe import SORRY_HELPER
from agent_tools.sessions.completeness import FORBIDDEN_NOTE, decide_completeness, slow_note
from agent_tools.verdict import PLACEHOLDER_PROVES

CLEAN_PROBE = ["'T.main' does not depend on any axioms"]
SORRY_PROBE = ["'T.main' depends on axioms: [sorryAx]"]


def judged(**changes: Any) -> Any:
    facts: dict[str, Any] = {
        "lean_complete": True,
        "task_file_error": None,
        "probe_messages": None,
        "theorem": "T.main",
        "allowed_axioms": ("propext",),
        "body": "\n  h",
        "scope_rejection": None,
        "placeholder": False,
    }
    return decide_completeness(**{**facts, **changes})


def test_a_proof_every_rule_passes_is_complete() -> None:
    completeness = judged(probe_messages=CLEAN_PROBE)
    assert completeness.complete and completeness.reason is None and completeness.proof_passes


def test_leans_own_report_decides_first_and_says_no_reason_of_ours() -> None:
    completeness = judged(lean_complete=False, task_file_error="broken", body="native_decide")
    assert completeness.status == "unfinished" and completeness.reason is None
    assert not completeness.proof_passes


def test_the_first_failing_rule_is_the_reason() -> None:
    assert judged(task_file_error="broken", probe_messages=SORRY_PROBE).reason == "broken"
    axioms = judged(probe_messages=SORRY_PROBE, body="native_decide")
    assert (axioms.status, axioms.reason) == ("axioms", SORRY_HELPER)
    forbidden = judged(body="\n  native_decide", scope_rejection="outside")
    assert forbidden.status == "forbidden" and forbidden.reason is not None
    assert forbidden.reason.startswith(FORBIDDEN_NOTE)


def test_where_the_edit_is_and_the_placeholder_come_after_the_proofs_own_rules() -> None:
    outside = judged(scope_rejection="the body declares `x`", placeholder=True)
    assert (outside.status, outside.reason) == ("out_of_scope", "the body declares `x`")
    placeholder = judged(placeholder=True)
    assert (placeholder.status, placeholder.reason) == ("placeholder", PLACEHOLDER_PROVES)
    assert outside.proof_passes and placeholder.proof_passes
    assert not outside.complete and not placeholder.complete


def test_a_slow_step_is_noted_only_past_its_share_of_the_verdicts_limit() -> None:
    assert slow_note(4.0, None) is None
    assert slow_note(5.0, 10.0) is None
    note = slow_note(5.5, 10.0)
    assert note is not None and "5.5 s" in note and "10 s" in note
