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


def test_import_as_statement_tasks_takes_references_and_claims(tmp_path: Path) -> None:
    from agent_tools.authoring import import_suite
    from agent_tools.tasks import load_suite, reference_statement

    demo = CLAIMS.parent / "demo"
    shutil.copytree(demo / "Demo", tmp_path / "src" / "Demo")
    (tmp_path / "meta.toml").write_text(
        '["Demo.AndSwap.main"]\nclaim = "p and q imply q and p"\n'
        '["Demo.OrSwap.main"]\nclaim = "p or q implies q or p"\n',
        encoding="utf-8",
    )
    report = import_suite([tmp_path / "src"], tmp_path / "out", meta=tmp_path / "meta.toml",
                          kind="statement")  # fmt: skip
    assert sorted(t.theorem for t in report.tasks) == ["Demo.AndSwap.main", "Demo.OrSwap.main"]
    assert all("no claim" in s.reason for s in report.skipped)
    suite = load_suite(tmp_path / "out")
    original = load_suite(demo).task("and_swap")
    task = next(t for t in suite.tasks.values() if t.spec.theorem == "Demo.AndSwap.main")
    assert task.kind == "statement" and task.claim == "p and q imply q and p"
    assert task.statement == " : True " and task.body.strip() == "sorryAx _ Bool.false"
    reference = suite.reference_path(task)
    assert reference.parent in suite.hidden_paths
    assert reference_statement(reference.read_text(encoding="utf-8")) == original.statement
    assert check_suite(tmp_path / "out").ok


PROVED = """prelude
import Claims.Basic

namespace Thms

/-- Conjunction commutes. -/
theorem and_swap {p q : Prop} (h : And p q) : And q p :=
  And.intro (And.right h) (And.left h)

theorem swap_inner {p q r : Prop} (h : And p (And q r)) : And p (And r q) :=
  And.intro (And.left h) (and_swap (And.right h))

theorem helper : True := True.intro

end Thms
"""


def test_import_as_statement_tasks_takes_proved_theorems_with_claims(tmp_path: Path) -> None:
    from agent_tools.authoring import import_suite
    from agent_tools.tasks import load_suite, reference_statement

    src = tmp_path / "src"
    (src / "Claims").mkdir(parents=True)
    shutil.copy(CLAIMS / "Claims" / "Basic.lean", src / "Claims" / "Basic.lean")
    (src / "Thms.lean").write_text(PROVED, encoding="utf-8")
    (tmp_path / "meta.toml").write_text(
        '["Thms.and_swap"]\nclaim = "p and q imply q and p"\n'
        '["swap_inner"]\nclaim = "p and (q and r) imply p and (r and q)"\n',
        encoding="utf-8",
    )
    report = import_suite([src], tmp_path / "out", meta=tmp_path / "meta.toml", kind="statement")
    assert sorted(t.theorem for t in report.tasks) == ["Thms.and_swap", "Thms.swap_inner"]
    assert report.skipped == []  # `helper` has no claim: a lemma, not a task
    suite = load_suite(tmp_path / "out")
    by_theorem = {t.spec.theorem: t for t in suite.tasks.values()}
    swap = by_theorem["Thms.and_swap"]
    assert swap.statement == " : True " and swap.body.strip() == "sorryAx _ Bool.false"
    # Its proof is gone, and so is the theorem that used it; the rest of the file stays.
    assert "And.intro (And.right h)" not in swap.text and "swap_inner" not in swap.text
    assert "theorem helper" in swap.text
    reference = reference_statement(suite.reference_path(swap).read_text(encoding="utf-8"))
    assert reference.strip() == "{p q : Prop} (h : And p q) : And q p"
    assert check_suite(tmp_path / "out").ok
