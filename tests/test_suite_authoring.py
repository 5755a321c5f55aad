"""`leanrig suite import|check|lint` (docs/cli.md, docs/suite-format.md "From your files to a
suite"), run as a user types them: a subprocess from a temporary working directory holding a
benchmark's Lean files at `bench/` (tests/fixtures/benchmark_src: prelude files with
namespaces, `universe`s, doc comments, unicode, several sorried theorems per file, a statement
over a sorried definition, and planted statement defects), relative paths, default options.

One imported suite is shared by the module; the linter's probes run with a small budget.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_tools.authoring.sources import is_placeholder, read_meta, task_id
from agent_tools.authoring.statements import canonical, split_signature
from lsp_bridge import declarations

from .test_as_typed import leanrig, leanrig_exe, sandbox_or_skip

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "benchmark_src"
SUITE = "suites/bench"
CLEAN = {"Bench.Logic.and_swap", "Bench.Logic.or_swap", "Bench.Equality.trans",
         "Bench.Equality.congr__u3c6", "Bench.Algebra.succ_congr"}  # fmt: skip
PLANTED = {
    ("trivial-target", "Bench.Algebra.add_zero_right"),
    ("unfolds-to-true", "Bench.Algebra.all_tame"),
    ("contradictory-hypotheses", "Bench.Logic.modus_clash"),
    ("unused-variable", "Bench.Logic.and_right_stray"),
    ("duplicate-statement", "Bench.Equality.trans_prime"),
}
AND_SWAP_PROOF = "@And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


@dataclass(frozen=True)
class Imported:
    cwd: Path
    done: subprocess.CompletedProcess[str]

    @property
    def manifest(self) -> dict[str, Any]:
        return tomllib.loads((self.cwd / SUITE / "suite.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Imported:
    sandbox_or_skip()
    cwd = tmp_path_factory.mktemp("author")
    shutil.copytree(FIXTURE, cwd / "bench")
    done = leanrig("suite", "import", "bench", "--out", SUITE, "--meta", "bench/meta.csv", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return Imported(cwd, done)


def suite_copy(imported: Imported, name: str) -> Path:
    copy = imported.cwd / name
    shutil.copytree(imported.cwd / SUITE, copy)
    return copy


def test_every_sorried_theorem_becomes_a_task_but_one_over_a_sorried_definition(
    imported: Imported,
) -> None:
    tasks = {t["id"]: t for t in imported.manifest["tasks"]}
    assert set(tasks) == CLEAN | {task for _, task in PLANTED} | {"Bench.Equality.trans"}
    assert tasks["Bench.Equality.congr__u3c6"]["theorem"] == "Bench.Equality.congr_φ"
    # The sorried definition's theorem is reported, not written; the proved lemma is no task.
    out = imported.done.stdout
    assert "skipped Bench.Algebra.double_zero" in out and "Bench.Algebra.double" in out
    assert "zero_add_zero" not in json.dumps(tasks)
    assert imported.manifest["library"] == ["Bench.Prelude"]
    # Each task's file keeps its preamble (the proved lemma, the definitions) and drops the
    # other sorried theorems: one placeholder, its own.
    text = (imported.cwd / SUITE / tasks["Bench.Algebra.all_tame"]["file"]).read_text("utf-8")
    assert "def Tame" in text and "theorem zero_add_zero" in text and "universe u" in text
    assert text.count("sorryAx") == 1 and "double" not in text


def test_metadata_comes_from_the_meta_file_else_doc_comments_and_directories(
    imported: Imported,
) -> None:
    tasks = {t["id"]: t for t in imported.manifest["tasks"]}
    swap = tasks["Bench.Logic.and_swap"]
    assert (swap["title"], swap["field"], swap["difficulty"]) == ("Swap a conjunction", "logic", 3)
    trans = tasks["Bench.Equality.trans"]
    assert (trans["title"], trans["field"], trans["difficulty"]) == (
        "Equality is transitive", "equality", 1,
    )  # fmt: skip
    # The summary names the tasks that used a default, and which.
    lines = imported.done.stdout.splitlines()
    assert any("Bench.Equality.trans " in x and "(default title, field, difficulty)" in x
               for x in lines)  # fmt: skip
    assert any("Bench.Logic.and_swap" in x and "default" not in x for x in lines)


def test_the_imported_suite_checks_with_reference_solutions(imported: Imported) -> None:
    solutions = imported.cwd / "solutions"
    solutions.mkdir(exist_ok=True)
    task_file = imported.cwd / SUITE / "tasks" / "Bench.Logic.and_swap.lean"
    text = task_file.read_text(encoding="utf-8")
    (solutions / "Bench.Logic.and_swap.lean").write_text(
        text.replace("sorryAx (And q p) Bool.false", AND_SWAP_PROOF), encoding="utf-8"
    )
    done = leanrig("suite", "check", SUITE, "--solutions", "solutions", cwd=imported.cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(imported.manifest["tasks"]) + 1  # one per task, and the total
    assert "ok   Bench.Logic.and_swap: reference solution accepted" in lines
    # The tasks without a solution file are listed and counted, not passed over silently...
    others = len(imported.manifest["tasks"]) - 1
    assert sum(line.endswith(": no reference solution") for line in lines) == others
    assert lines[-1].endswith(f"; 1 with a reference solution, {others} without"), lines[-1]
    # ... and fail the check when solutions are required.
    required = leanrig("suite", "check", SUITE, "--solutions", "solutions",
                       "--require-solutions", cwd=imported.cwd)  # fmt: skip
    assert required.returncode == 1 and "FAIL " in required.stdout, required.stdout
    # A --solutions directory that is not there is an error, not "every task ok".
    typo = leanrig("suite", "check", SUITE, "--solutions", "solution", cwd=imported.cwd)
    assert typo.returncode == 2 and "no such directory" in typo.stderr, typo.stdout + typo.stderr
    # A wrong reference solution fails the check, with the verdict's reason.
    (solutions / "Bench.Logic.and_swap.lean").write_text(
        text.replace("sorryAx (And q p) Bool.false", "h"), encoding="utf-8"
    )
    done = leanrig("suite", "check", SUITE, "--solutions", "solutions", "--json",
                   cwd=imported.cwd)  # fmt: skip
    assert done.returncode == 1
    report = json.loads(done.stdout)
    failed = [t for t in report["tasks"] if not t["ok"]]
    assert [t["task"] for t in failed] == ["Bench.Logic.and_swap"]
    assert "reference solution is rejected" in failed[0]["problems"][0]


def test_lint_finds_each_planted_defect_and_nothing_in_the_clean_tasks(imported: Imported) -> None:
    done = leanrig("suite", "lint", SUITE, "--json", "--budget", "20", cwd=imported.cwd)
    assert done.returncode == 1, done.stderr
    findings = json.loads(done.stdout)["findings"]
    assert {(f["code"], f["task"]) for f in findings} == PLANTED
    for f in findings:
        assert f["location"].startswith(f"tasks/{f['task']}.lean:")
        assert f["severity"] in ("error", "warning")
    unused = next(f for f in findings if f["code"] == "unused-variable")
    assert "`k`" in unused["message"]


def test_the_demo_suite_lints_clean_with_its_accepted_findings(imported: Imported) -> None:
    demo = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "demo"
    shutil.copytree(demo, imported.cwd / "lean_project/suites/demo", dirs_exist_ok=True)
    done = leanrig("suite", "lint", "lean_project/suites/demo", cwd=imported.cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "0 finding(s), 5 allowed"
    # The allowed findings print as allowed, never as an "error" beside "0 finding(s)".
    shown = done.stdout.splitlines()[:-1]
    assert len(shown) == 5 and all(" allowed " in line for line in shown), shown
    assert not any(" error " in line for line in shown), shown


def test_preamble_give_aways_are_findings_and_fail_the_check(imported: Imported) -> None:
    suite = suite_copy(imported, "giveaway")
    task = suite / "tasks" / "Bench.Logic.or_swap.lean"
    text = task.read_text(encoding="utf-8")
    task.write_text(text.replace("namespace Bench.Logic\n", "namespace Bench.Logic\n\n"
                                 "axiom cheat (p : Prop) : p\n\n"
                                 "opaque secret : N := N.z\n"), encoding="utf-8")  # fmt: skip
    # An unproved helper left in another task's file: a second placeholder.
    other = suite / "tasks" / "Bench.Logic.and_swap.lean"
    other.write_text(other.read_text(encoding="utf-8").replace(
        "namespace Bench.Logic\n",
        "namespace Bench.Logic\n\ntheorem helper (p : Prop) : p :=\n  sorryAx p Bool.false\n\n",
    ), encoding="utf-8")  # fmt: skip
    done = leanrig("suite", "lint", "giveaway", "--json", "--budget", "20", cwd=imported.cwd)
    codes = {(f["code"], f["task"]) for f in json.loads(done.stdout)["findings"]}
    findings = json.loads(done.stdout)["findings"]
    axiom = next(f for f in findings if f["code"] == "preamble-axiom")
    assert axiom["location"] == "tasks/Bench.Logic.or_swap.lean:12:1"
    assert {("preamble-axiom", "Bench.Logic.or_swap"),
            ("preamble-opaque", "Bench.Logic.or_swap")} <= codes  # fmt: skip
    done = leanrig("suite", "check", "giveaway", cwd=imported.cwd)
    assert done.returncode == 1
    assert ("FAIL Bench.Logic.or_swap: the file declares axioms outside the allow-list: "
            "Bench.Logic.cheat") in done.stdout  # fmt: skip
    assert "FAIL Bench.Logic.and_swap: another declaration uses sorry (line 12)" in done.stdout
    assert sum(line.startswith("FAIL") for line in done.stdout.splitlines()) == 2


def test_lint_against_an_older_version_reports_changed_statements(imported: Imported) -> None:
    new = suite_copy(imported, "v2")
    # Definitionally equal (N.add x N.z reduces to x); a real change; a renamed binder only.
    edits = {
        "Bench.Algebra.succ_congr": [("(N.s b)", "(N.add (N.s b) N.z)")],
        "Bench.Logic.or_swap": [("Or q p", "Or p q")],
        "Bench.Logic.and_swap": [("(p q : Prop) (h : And p q)", "(a b : Prop) (h : And a b)"),
                                 ("And q p", "And b a")],
    }  # fmt: skip
    for ident, replacements in edits.items():
        path = new / "tasks" / f"{ident}.lean"
        text = path.read_text(encoding="utf-8")
        for old, changed in replacements:
            text = text.replace(old, changed)
        path.write_text(text, encoding="utf-8")
    done = leanrig("suite", "lint", "v2", "--against", SUITE, "--json", "--budget", "20",
                   cwd=imported.cwd)  # fmt: skip
    changes = {
        f["task"]: (f["code"], f["severity"]) for f in json.loads(done.stdout)["findings"]
        if f["code"].startswith("statement")
    }  # fmt: skip
    assert changes == {
        "Bench.Algebra.succ_congr": ("statement-changed", "info"),
        "Bench.Logic.or_swap": ("statement-changed", "warning"),
        "Bench.Logic.and_swap": ("statement-text-changed", "info"),
    }


def test_reimporting_keeps_hand_edited_metadata_and_ids(imported: Imported) -> None:
    out = suite_copy(imported, "reimport")
    manifest = (out / "suite.toml").read_text(encoding="utf-8")
    edited = manifest.replace('title = "Equality is transitive"\n',
                              'title = "Transitivity, by hand"\n', 1)  # fmt: skip
    edited = edited.replace('version = "1.0"', 'version = "2.0"')
    (out / "suite.toml").write_text(edited, encoding="utf-8")
    done = leanrig("suite", "import", "bench", "--out", "reimport", cwd=imported.cwd)
    assert done.returncode == 0, done.stderr
    again = tomllib.loads((out / "suite.toml").read_text(encoding="utf-8"))
    assert [t["id"] for t in again["tasks"]] == [t["id"] for t in imported.manifest["tasks"]]
    tasks = {t["id"]: t for t in again["tasks"]}
    assert tasks["Bench.Equality.trans"]["title"] == "Transitivity, by hand"
    assert tasks["Bench.Logic.and_swap"]["difficulty"] == 3  # kept, though no --meta now
    assert again["version"] == "2.0"


def test_the_imported_suite_runs_under_leanrig_run_with_the_search_agent(
    imported: Imported,
) -> None:
    agent = f"{leanrig_exe()} agent search --mcp-config {{mcp_config}}"
    done = leanrig("run", "--suite", SUITE, "--agent", agent, "--tasks",
                   "Bench.Algebra.add_zero_right", "--time-limit", "60", "--model", "none",
                   "--agent-tool", "leanrig agent search", "--quiet", "--out", "runs/search",
                   cwd=imported.cwd)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = (imported.cwd / "runs/search/results.jsonl").read_text().splitlines()
    results = [json.loads(line) for line in lines if line.strip()]
    assert [(r["task"], r["accepted"]) for r in results] == [("Bench.Algebra.add_zero_right", True)]


# -- the parts, without Lean ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "placeholder"),
    [
        (" sorry", True),
        (" by sorry", True),
        ("\n  by\n    sorry -- later", True),
        ("\n  sorryAx (@Eq N N.z N.z) Bool.false", True),
        (" (sorryAx p Bool.false)", True),
        (" by first | rfl | sorry", False),  # a proof that mentions sorry is no placeholder
        (" @Eq.refl N N.z", False),
        (" sorry_lemma h", False),
    ],
)
def test_placeholders_are_sorry_alone(body: str, placeholder: bool) -> None:
    assert is_placeholder(body) is placeholder


def test_task_ids_are_stable_ascii_from_theorem_names() -> None:
    assert task_id("Bench.Equality.congr_φ") == "Bench.Equality.congr__u3c6"
    assert task_id("Bench.Equality.trans'") == "Bench.Equality.trans_prime"
    assert task_id("A.«my thm»") == "A.my_u20thm"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("m.toml", '["Bench.Logic.and_swap"]\ntitle = "T"\nfield = "f"\ndifficulty = 4\n'),
        ("m.jsonl", '{"theorem": "Bench.Logic.and_swap", "title": "T", "field": "f", '
                    '"difficulty": 4}\n'),
        ("m.csv", "theorem,title,field,difficulty\nBench.Logic.and_swap,T,f,4\n"),
    ],
)  # fmt: skip
def test_meta_files_in_toml_csv_and_jsonl_read_alike(
    tmp_path: Path, name: str, content: str
) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    assert read_meta(tmp_path / name) == {
        "Bench.Logic.and_swap": {"title": "T", "field": "f", "difficulty": 4}
    }


def test_declarations_are_read_with_their_namespaces() -> None:
    text = (FIXTURE / "Bench" / "Algebra" / "Naturals.lean").read_text(encoding="utf-8")
    found = [(d.keyword, d.full_name) for d in declarations(text)]
    assert found[:3] == [
        ("def", "Bench.Algebra.double"),
        ("theorem", "Bench.Algebra.zero_add_zero"),
        ("theorem", "Bench.Algebra.double_zero"),
    ]


def test_alpha_equivalent_statements_print_alike() -> None:
    one = "∀ {α : Sort u_1} {a b : α} (h : @Eq.{u_1} α a b), @Eq.{u_1} α b a"
    two = "∀ {β : Sort u_1} {x y : β} (e : @Eq.{u_1} β x y), @Eq.{u_1} β y x"
    other = "∀ {β : Sort u_1} {x y : β} (e : @Eq.{u_1} β x y), @Eq.{u_1} β x y"
    assert canonical(one) == canonical(two) != canonical(other)
    sig = split_signature(" {α : Sort u} (x : α) [inst : C α] : P x ")
    assert [g.names for g in sig.groups] == [("α",), ("x",), ("inst",)]
    assert sig.conclusion == "P x"


@pytest.mark.toolchain
@pytest.mark.skipif(shutil.which("lake") is None, reason="needs a full Lean toolchain")
def test_on_a_full_toolchain_lint_also_tries_tactics(tmp_path: Path) -> None:
    """Where Lean has Init: `decide`, `simp`, `omega`, `aesop` are probes too. `n + m = m + n`
    is no `rfl` (the term candidates fail) and `omega` proves it."""
    suite = tmp_path / "full"
    (suite / "Full").mkdir(parents=True)
    (suite / "Full" / "Arith.lean").write_text(
        "theorem Full.add_comm' (n : Nat) (m : Nat) : n + m = m + n := by\n  sorry\n",
        encoding="utf-8",
    )
    (suite / "suite.toml").write_text(
        'name = "full"\nlean = "full"\n\n[[tasks]]\nid = "add_comm"\nfile = "Full/Arith.lean"\n'
        'theorem = "Full.add_comm\'"\ndifficulty = 1\n', encoding="utf-8",
    )  # fmt: skip
    done = subprocess.run([str(leanrig_exe()), "suite", "lint", "full", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    findings = json.loads(done.stdout)["findings"]
    trivial = [f for f in findings if (f["code"], f["task"]) == ("trivial-target", "add_comm")]
    assert trivial and "`by " in trivial[0]["message"]
