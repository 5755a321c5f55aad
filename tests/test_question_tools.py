"""The question tools against the bootstrap Lean on a benchmark-like task file: what each
answers, that none edits the session, timeouts, and hostile questions (hidden or LAD-only
names, paths, terms escaping their parentheses, huge or endless terms)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from agent_tools.servers import ServeOptions, open_service
from agent_tools.sessions import ProofService, ToolError

from .lean_snippets import ARITH
from .suites import demo_with_tasks

pytestmark = pytest.mark.anyio

REALISTIC = (
    """prelude
import Demo.Basic

/-! A benchmark-style file: a preamble of definitions and lemmas, then the target. -/

universe u v

namespace Bench.Realistic

/-- Composition of two functions (universe polymorphic). -/
noncomputable def comp {α : Sort u} {β : Sort v} {γ : Sort u} (g : β → γ) (f : α → β) :
    α → γ :=
  fun x => g (f x)

/-- Swap a conjunction: the lemma the target may use. -/
theorem and_swap' (p q : Prop) (h : And p q) : And q p :=
  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h

"""
    + re.sub(r"\b(add|mul|two|pow|ten)\b", "ℕ\\1", ARITH)
    + """
section Greek
variable {𝔸 𝔹 : Prop}

/-- The target: both sides from their conjunction, swapped. -/
theorem main (h𝔸𝔹 : And 𝔸 𝔹) : And 𝔹 𝔸 :=
  sorryAx (And 𝔹 𝔸) Bool.false

end Greek
end Bench.Realistic
"""
)
SECRET = """prelude
import Demo.Basic

theorem secret_solution (p : Prop) (h : p) : p := h
"""


def realistic_suite(root: Path) -> Path:
    suite = demo_with_tasks(
        root, {"realistic": ("Realistic.lean", "Bench.Realistic.main", REALISTIC)}
    )
    (suite / "Solutions").mkdir()
    (suite / "Solutions" / "Secret.lean").write_text(SECRET, encoding="utf-8")
    toml = (suite / "suite.toml").read_text(encoding="utf-8")
    (suite / "suite.toml").write_text(
        toml.replace(
            'library = ["Demo.Basic"]', 'library = ["Demo.Basic"]\nhidden = ["Solutions"]'
        ),
        encoding="utf-8",
    )
    return suite


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return realistic_suite(tmp_path_factory.mktemp("questions") / "suite")


@pytest.fixture
async def service(suite_dir: Path, tmp_path: Path) -> AsyncIterator[ProofService]:
    options = ServeOptions(suite=suite_dir, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        yield service


def position_of(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """1-based (line, column) of ``needle``'s first occurrence, plus ``offset`` columns."""
    at = text.index(needle)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1 + offset


async def test_each_question_answers_about_the_realistic_task(service: ProofService) -> None:
    opened = await service.open_task("realistic")
    sid, text = opened.session_id, opened.text
    assert opened.status == "incomplete" and opened.status_reason

    hover = await service.get_hover(sid, *position_of(text, "And 𝔸 𝔹", 1))
    assert hover.found and hover.name == "And" and hover.module == "Demo.Basic"
    local = await service.get_hover(sid, *position_of(text, "h𝔸𝔹 :", 1))
    assert local.found and local.signature == "h𝔸𝔹 : And 𝔸 𝔹" and local.name is None

    outline = await service.get_outline(sid)
    names = [(d.name, d.kind) for d in outline.declarations]
    assert names[:2] == [("Bench.Realistic.comp", "def"), ("Bench.Realistic.and_swap'", "theorem")]
    assert ("Bench.Realistic.ℕadd", "def") in names
    assert not any(n.endswith(".main") for n, _ in names)  # the target and after: not listed
    comp = outline.declarations[0]
    assert comp.signature.startswith("Bench.Realistic.comp.{u, v}") and comp.line == 11

    declared = await service.get_declaration(sid, "and_swap'")
    assert declared.name == "Bench.Realistic.and_swap'" and declared.kind == "theorem"
    assert declared.docstring == "Swap a conjunction: the lemma the target may use."
    assert declared.file == "Demo/Realistic.lean" and declared.module is None
    assert declared.source is not None and declared.source.startswith("/-- Swap a conjunction")
    poly = await service.get_declaration(sid, "comp")
    assert poly.universe_params == ["u", "v"] and poly.kind == "def"
    library = await service.get_declaration(sid, "Eq.refl")
    assert library.module == "Demo.Basic" and library.file == "Demo/Basic.lean"
    assert library.universe_params == ["u"] and library.kind == "constructor"
    assert library.source is not None and "inductive Eq" in library.source

    outside = await service.check_term(sid, "@and_swap' 𝔹", False)
    assert outside.errors == [] and outside.type == "∀ (q : Prop), And 𝔹 q → And q 𝔹"
    lone = await service.check_term(sid, "and_swap'", False)  # a name: as `#check` shows it
    assert lone.type == "∀ (p q : Prop), And p q → And q p" and lone.term == "and_swap'"
    missing = await service.check_term(sid, "no_such_lemma", False)
    assert [(e.line, e.column) for e in missing.errors] == [(1, 1)], missing.errors
    inside = await service.check_term(sid, "@and_swap' 𝔸 𝔹 h𝔸𝔹", True)
    assert inside.errors == [] and inside.type == "And 𝔹 𝔸", inside
    unknown = await service.check_term(sid, "@and_swap' 𝔸 𝔹 h𝔸𝔹", False)  # no hypotheses there
    assert unknown.type is None and unknown.errors and unknown.errors[0].line == 1

    by_prefix = await service.get_completions(sid, None, None, "Bench.Realistic.and_")
    assert [c.name for c in by_prefix.completions] == ["Bench.Realistic.and_swap'"]
    assert by_prefix.completions[0].type == "∀ (p q : Prop), And p q → And q p"
    line, column = position_of(text, "sorryAx (And", len("sorryAx"))
    at_position = await service.get_completions(sid, line, column, None)
    assert "sorryAx" in [c.name for c in at_position.completions]

    profile = await service.profile_proof(sid)
    assert profile.total_ms > 0 and profile.entries and profile.status == "incomplete"
    # None of these edited the session: no new version, the body and submission unchanged.
    state = await service.get_proof_state(sid)
    assert state.version == 1 and state.body == opened.body and state.text == text


async def test_code_actions_come_as_edits_of_the_body(service: ProofService) -> None:
    sid = (await service.open_task("realistic")).session_id
    body = "\n  let unused := h𝔸𝔹\n  @and_swap' 𝔸 𝔹 h𝔸𝔹"
    step = await service.set_proof(sid, body)
    assert step.status == "complete" and step.status_reason is None
    text = (await service.get_proof_state(sid)).text
    line, column = position_of(text, "unused :=", 1)
    actions = await service.get_code_actions(sid, line, column)
    assert [(a.title, a.old, a.new) for a in actions.actions] == [
        ("Try this: _unused", "unused", "_unused")
    ]
    applied = await service.replace_in_proof(sid, actions.actions[0].old, actions.actions[0].new)
    assert applied.status == "complete"
    assert (await service.get_proof_state(sid)).body == actions.actions[0].body
    # The unused hypothesis's rename would edit the statement: left out, and counted.
    signature = await service.get_code_actions(sid, *position_of(text, "h𝔸𝔹 :", 1))
    assert signature.actions == []


async def test_every_step_result_says_its_status(service: ProofService) -> None:
    sid = (await service.open_task("realistic")).session_id
    wrong = await service.set_proof(sid, "\n  h𝔸𝔹")
    assert wrong.status == "error" and wrong.status_reason
    assert wrong.status_reason.startswith("line 30: Type mismatch")
    tried = await service.try_proofs(sid, ["\n  @and_swap' 𝔸 𝔹 h𝔸𝔹", "\n  h𝔸𝔹", "\n  #eval 1"])
    assert [c.status for c in tried.results] == ["complete", "error", "not_checked"]
    assert tried.results[2].status_reason and "#eval" in tried.results[2].status_reason
    right = await service.set_proof(sid, "\n  @and_swap' 𝔸 𝔹 h𝔸𝔹")
    assert right.status == "complete" and right.complete


async def test_a_question_writes_one_ledger_line_and_never_the_submission(
    suite_dir: Path, tmp_path: Path
) -> None:
    submission = tmp_path / "submission.json"
    options = ServeOptions(suite=suite_dir, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        service.submission = submission
        sid = (await service.open_task("realistic")).session_id
        other = (await service.open_task("realistic")).session_id
        before = submission.read_bytes()
        first = await service.check_term(sid, "@and_swap'", False)
        await service.get_outline(sid)
        # Asked again (another session of the task): the same answer, without Lean.
        assert await service.check_term(other, "@and_swap'", False) == first
        with pytest.raises(ToolError):
            await service.check_term(sid, "#eval 1", False)
        assert submission.read_bytes() == before
        ledger = service.ledger.path
    lines = [orjson.loads(x) for x in ledger.read_bytes().splitlines()]
    tools = [entry["tool"] for entry in lines if entry.get("session") == sid]
    assert tools == ["open_task", "check_term", "get_outline", "check_term", "close_session"]
    outcomes = [
        e["outcome"] for e in lines if e.get("session") == sid and e["tool"] == "check_term"
    ]
    assert outcomes == ["ok", "rejected"]


# -- hostile questions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("term", "code", "says"),
    [
        ('include_str "/etc/passwd"', "rejected", "reads a file"),
        ("by_elab pure ()", "rejected", "arbitrary code"),
        ("x) #eval (1", "rejected", "#eval"),
        (
            "x)\n  theorem leak : False := sorryAx False Bool.false\n  #check (x",
            "rejected",
            "one term",
        ),
        ("x)\ntheorem leak : False := sorryAx False Bool.false", "rejected", "column 0"),
        ("(x", "rejected", "one term"),
        ("/- unclosed", "rejected", "comment"),
        ("x" * 20_001, "invalid_argument", "1 to 20000 characters"),
    ],
    ids=[
        "include_str",
        "by_elab",
        "escape_eval",
        "escape_decl",
        "escape_column_0",
        "unbalanced",
        "unclosed",
        "huge",
    ],
)
async def test_a_hostile_term_is_refused_before_lean(
    service: ProofService, term: str, code: str, says: str
) -> None:
    sid = (await service.open_task("realistic")).session_id
    with pytest.raises(ToolError) as caught:
        await service.check_term(sid, term, True)
    assert caught.value.code == code and says in caught.value.message, caught.value.message


async def test_a_path_in_a_term_is_only_a_string(service: ProofService) -> None:
    sid = (await service.open_task("realistic")).session_id
    checked = await service.check_term(sid, '"/etc/passwd"', False)
    assert checked.type == "String" and checked.errors == []  # a literal: nothing is read
    assert "root:" not in str(checked.model_dump())


async def test_hidden_and_lad_declarations_are_unknown_in_a_baseline_session(
    service: ProofService,
) -> None:
    sid = (await service.open_task("realistic")).session_id
    for name in ("secret_solution", "Lib.Logic.or_comm", "Solutions.Secret"):
        with pytest.raises(ToolError) as caught:
            await service.get_declaration(sid, name)
        assert caught.value.code == "not_found"
    for bad in ("And.intro #eval", "x y", "../Solutions/Secret.lean"):
        with pytest.raises(ToolError) as caught:
            await service.get_declaration(sid, bad)
        assert caught.value.code == "invalid_argument"
    offered = await service.get_completions(sid, None, None, "Lib.")
    assert offered.completions == []


async def test_a_lad_session_reads_its_library_declarations(
    suite_dir: Path, tmp_path: Path
) -> None:
    options = ServeOptions(
        suite=suite_dir, run_dir=tmp_path / "runs", sandbox=False, condition="lad"
    )
    async with open_service(options) as service:
        sid = (await service.open_task("realistic")).session_id
        found = await service.get_declaration(sid, "Lib.Logic.or_comm")
    assert found.file == "Lib/Logic.lean" and found.kind == "theorem"
    assert found.source is not None and "theorem or_comm" in found.source


async def test_a_term_that_never_finishes_times_out_and_the_next_step_is_not_slowed(
    suite_dir: Path, tmp_path: Path
) -> None:
    options = ServeOptions(
        suite=suite_dir, run_dir=tmp_path / "runs", sandbox=False, step_timeout=3.0
    )
    big = "(ℕpow ℕtwo (ℕadd ℕten ℕten))"
    term = (
        f"set_option maxHeartbeats 0 in set_option maxRecDepth 100000000 in "
        f"(@Eq.refl N {big} : @Eq N {big} (N.s {big}))"
    )
    async with open_service(options) as service:
        sid = (await service.open_task("realistic")).session_id
        started = time.monotonic()
        with pytest.raises(ToolError) as caught:
            await service.check_term(sid, term, False)
        assert caught.value.code == "timeout" and "no answer to the term" in caught.value.message
        assert time.monotonic() - started < 30
        step = await service.set_proof(sid, "\n  @and_swap' 𝔸 𝔹 h𝔸𝔹")
        assert step.status == "complete"


ONE_LINE = """prelude
import Demo.Basic

namespace OneLine
theorem main (p q : Prop) (h : And p q) : And q p := sorryAx (And q p) Bool.false
end OneLine
"""


async def test_check_term_in_context_when_the_body_is_on_the_statements_line(
    tmp_path: Path,
) -> None:
    """`… := sorryAx …` on one line; a term Lean rejects gets errors, never nothing."""
    suite = demo_with_tasks(
        tmp_path / "suite", {"one_line": ("OneLine.lean", "OneLine.main", ONE_LINE)}
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("one_line")).session_id
        hypothesis = await service.check_term(sid, "h", True)
        assert hypothesis.type == "And p q" and hypothesis.errors == [], hypothesis
        intro = await service.check_term(sid, "@And.intro q p", True)
        assert intro.type == "q → p → And q p", intro
        wrong = await service.check_term(sid, "no_such_name", True)
        assert wrong.type is None and wrong.errors, wrong
