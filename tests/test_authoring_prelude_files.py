"""`suite import | check | lint` with the real Lean on tests/fixtures/corpus: a core-style prelude
library the task files import, with numerals, namespaces, `open … in` and auto-bound implicits;
and a self-contained file declaring `axiom sorryAx`. One imported suite is shared."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_tools.authoring import (
    CheckReport,
    ImportReport,
    LintReport,
    check_suite,
    import_suite,
    lint_suite,
)
from agent_tools.authoring.statements import read_printed, split_signature

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpus"
# Statements with a numeral: without `nat_lit` in the prelude, `#check` cannot print them.
NUMERALS = {
    "Nat.not_lt_zero_task",
    "Nat.zero_le_task",
    "Nat.zero_add_task",
    "Nat.one_mul_task",
    "Nat.ctorIdx_succ_task",
    "Nat.even_zero_task",
    "frac_zero_num_task",
    "Core.Data.Cell28.step_u20of_u20zero_u20task",
}
# Closed by `rfl` or a constructor once names resolve as in the theorem's own scope.
TRIVIAL = {
    "PLift.up_down_task",
    "PLift.down_up_task",
    "PLift.down_up_task_prime",
    "ULift.up_down_task",
    "Point.swap_swap_task",
    "Nat.ctorIdx_succ_task",
    "Nat.le_refl_task",
    "lt_succ_self_task",
    "Nat.even_zero_task",
    "Core.Geometry.Vec1.Vec.swap_swap_task",
    "Core.Geometry.Vec1.add_zero_dx_task",
    "frac_zero_num_task",
    "Core.Time.Clock62.lift_down_task",
    "Core.Data.Cell28.Cell.first_eq_task",
    "Core.Data.Cell28.step_u20of_u20zero_u20task",
    "Core.Order.Span19.diag_snd_task",
}


@dataclass(frozen=True)
class Core:
    suite: Path
    imported: ImportReport
    checked: CheckReport
    linted: LintReport


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Core:
    work = tmp_path_factory.mktemp("core")
    shutil.copytree(FIXTURES / "core", work / "core")
    suite = work / "suites" / "core"
    imported = import_suite([work / "core"], suite)
    return Core(suite, imported, check_suite(suite), lint_suite(suite, budget=20))


def test_every_sorried_theorem_becomes_a_task_and_an_open_in_goes_with_its_theorem(
    core: Core,
) -> None:
    """All 22 placeholder theorems are tasks; an `open Nat in` stays with its own theorem's file
    only."""
    assert core.imported.skipped == []
    assert len(core.imported.tasks) == 22
    assert core.imported.library == ["Core.Prelude", "Core.Library"]
    le_refl = (core.suite / "tasks" / "Nat.le_refl_task.lean").read_text(encoding="utf-8")
    assert "open Nat in" not in le_refl and "lt_succ_self_task" not in le_refl
    own = (core.suite / "tasks" / "lt_succ_self_task.lean").read_text(encoding="utf-8")
    assert "open Nat in\n/-- Every number is strictly below its successor. -/\ntheorem" in own


def test_statements_lean_cannot_print_are_the_same_as_no_other(core: Core) -> None:
    """Unprintable statements get a `check` note and a `statement-unprintable` lint finding each,
    not duplicate findings; the one real duplicate is still found."""
    assert core.checked.ok, [(t.task, t.problems) for t in core.checked.tasks if not t.ok]
    noted = {t.task for t in core.checked.tasks if t.notes}
    assert noted == NUMERALS
    for task in core.checked.tasks:
        if task.task in NUMERALS:
            assert task.statement == ""
            assert "could not print" in task.notes[0] and "rawNatLit" in task.notes[0]
    found = {(f.code, f.task) for f in core.linted.findings}
    assert {t for code, t in found if code == "duplicate-statement"} == {"PLift.down_up_task_prime"}
    unprintable = [f for f in core.linted.findings if f.code == "statement-unprintable"]
    assert {f.task for f in unprintable} == NUMERALS
    assert all(f.severity == "info" and "rawNatLit" in f.message for f in unprintable)


def test_lint_probes_resolve_names_as_the_target_does(core: Core) -> None:
    """Exactly the TRIVIAL targets are `trivial-target` findings, each naming its closing term."""
    trivial = {f.task: f.message for f in core.linted.findings if f.code == "trivial-target"}
    assert set(trivial) == TRIVIAL
    assert "`.refl`" in trivial["Nat.le_refl_task"]
    assert "`.refl`" in trivial["lt_succ_self_task"]
    assert "@Eq.refl" in trivial["PLift.up_down_task"]
    assert "`.zero`" in trivial["Nat.even_zero_task"]
    codes = {f.code for f in core.linted.findings}
    assert codes == {"trivial-target", "duplicate-statement", "statement-unprintable"}


def test_an_axiom_sorryAx_in_a_files_own_preamble_is_kept(tmp_path: Path) -> None:
    """Each of the file's three theorems is a task whose file keeps that preamble; a reference
    solution is accepted."""
    shutil.copytree(FIXTURES / "standalone", tmp_path / "src")
    suite = tmp_path / "suite"
    report = import_suite([tmp_path / "src"], suite)
    assert [t.id for t in report.tasks] == [
        "Connectives.and_swap",
        "Connectives.or_swap",
        "Connectives.not_not_intro",
    ]
    assert report.skipped == []
    task = (suite / "tasks" / "Connectives.and_swap.lean").read_text(encoding="utf-8")
    assert "axiom sorryAx (α : Sort u) (synthetic : Bool) : α" in task
    assert "theorem or_swap" not in task and "theorem not_not_intro" not in task
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    proof = task.replace("sorryAx (And q p) Bool.false", "@And.intro q p h.right h.left")
    (solutions / "Connectives.and_swap.lean").write_text(proof, encoding="utf-8")
    checked = check_suite(suite, solutions)
    assert checked.ok, [(t.task, t.problems) for t in checked.tasks]
    assert {t.task: t.solution for t in checked.tasks}["Connectives.and_swap"] == "accepted"


@pytest.mark.parametrize(
    ("answer", "text", "failure"),
    [
        (
            "∀ (n : Nat), @LT.lt.{0} Nat instLTNat n n",
            "∀ (n : Nat), @LT.lt.{0} Nat instLTNat n n",
            "",
        ),
        (
            "failed to pretty print expression (use 'set_option pp.rawOnError true' for raw "
            "representation)",
            "",
            "failed to pretty print expression",
        ),
        (
            "[Error pretty printing expression: Unknown constant `rawNatLit`. Falling back to raw "
            "printer.]\nforall (n : Nat), LT.lt.{0} Nat instLTNat n (OfNat.ofNat.{0} Nat 0 "
            "(instOfNatNat 0))",
            "",
            "Unknown constant `rawNatLit`",
        ),
    ],
)
def test_a_print_failure_is_no_statement(answer: str, text: str, failure: str) -> None:
    """A pretty-printer failure gives an empty statement and the failure; a raw fallback is kept."""
    printed = read_printed(answer)
    assert (printed.text, printed.failure) == (text, failure)
    assert printed.raw.startswith("forall") == ("raw printer" in answer)


def test_universe_parameters_are_no_binder_group() -> None:
    """`theorem t.{u} {α : Sort u} …`: the `.{u}` after the name is the universe list."""
    sig = split_signature(".{u} {α : Sort u} (a : α) : Eq a a")
    assert sig.universes == ".{u}"
    assert [g.names for g in sig.groups] == [("α",), ("a",)]
    assert sig.binders == "{α : Sort u} (a : α)"


def test_only_theorems_that_hold_a_placeholder_are_located(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading the corpus locates the bodies of only the 22 theorems (of 500+) holding `sorry`."""
    import agent_tools.authoring.sources as sources
    from agent_tools.tasks import locate_body as real

    located: list[str] = []

    def counting(text: str, theorem: str) -> Any:
        located.append(theorem)
        return real(text, theorem)

    monkeypatch.setattr(sources, "locate_body", counting)
    read, _ = sources.read_sources([FIXTURES / "core"])
    theorems = [d for s in read for d in s.declarations if d.keyword == "theorem"]
    assert len(theorems) > 500
    assert len(located) == 22 == sum(len(s.placeholders) for s in read)
