"""`suite check` and `suite lint` on statement tasks: a task is checked as its hidden reference
states it (statements compared across tasks are the references'), and a claim that spells out
its reference's Lean text is a finding."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_tools.authoring import check_suite, lint_suite

CLAIMS = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "claims"


def test_check_reads_each_statement_task_as_its_reference_states_it() -> None:
    report = check_suite(CLAIMS)
    assert report.ok, [(t.task, t.problems) for t in report.tasks if not t.ok]
    statements = {t.task: t.statement for t in report.tasks}
    assert len(set(statements.values())) == len(statements)  # (the placeholders are all `True`)
    assert "N.add" in statements["add_comm"] and "True" not in statements["add_comm"]


def test_a_claim_that_spells_out_its_reference_is_a_finding(tmp_path: Path) -> None:
    root = tmp_path / "claims"
    shutil.copytree(CLAIMS, root)
    manifest = root / "suite.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace(
            'claim = "Addition of natural numbers is commutative: for all m and n, m + n = n + m."',
            'claim = "Show (m n : N) : Eq (N.add m n) (N.add n m) holds."',
        ),
        encoding="utf-8",
    )
    report = lint_suite(root)
    spelled = [f for f in report.findings if f.code == "claim-spells-reference"]
    assert [f.task for f in spelled] == ["add_comm"] and not report.ok
    assert lint_suite(CLAIMS).findings == []


def test_a_reference_the_grader_cannot_match_with_itself_is_a_problem(tmp_path: Path) -> None:
    root = tmp_path / "claims"
    shutil.copytree(CLAIMS, root)
    # `assumption` closes it: BEq+ counts no proof of a direction such a statement closes.
    (root / "References" / "FalseElim.lean").write_text(
        "theorem reference (p : Prop) (h : p) : p :=\n  sorryAx _ Bool.false\n", encoding="utf-8"
    )
    report = check_suite(root)
    (failed,) = [t for t in report.tasks if not t.ok]
    assert failed.task == "false_elim"
    assert "does not show the reference equivalent to itself" in failed.problems[0]
