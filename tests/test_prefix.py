"""The prefix as a compiled module: the split and position translation (pure), and against the
bootstrap Lean, mode selection, fallback, and prefix-mode sessions answering as in file mode."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_tools.servers import ServeOptions, open_service
from agent_tools.sessions import ProofService, ToolError
from agent_tools.sessions.prefix import prefixed_view
from agent_tools.tasks import load_suite, locate_body, scope_wrappers, split_prefix, unwrap
from lsp_bridge import LineIndex, LspPos
from repl_pool import parse_header

pytestmark = pytest.mark.anyio
DEMO = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "demo"
RIGHT = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"
WRONG = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"


def padding(count: int) -> str:
    return "".join(f"def d{i} : N := N.s N.z\n" for i in range(count))


def task_file(before: str = "", statement_extra: str = "", count: int = 60) -> str:
    return (
        "prelude\nimport Demo.Basic\n\nuniverse u\n\nnamespace Demo.Big\n\n"
        + padding(count)
        + before
        + "section S\nvariable (r : N)\n\n"
        + "/-- The target. -/\n"
        + f"theorem main (p q : Prop) (h : And p q){statement_extra} : And q p :=\n"
        + "  sorryAx (And q p) Bool.false\n\nend S\n\ndef after : N := N.z\n\nend Demo.Big\n"
    )


def make_suite(root: Path, files: dict[str, str]) -> Path:
    suite = root / "suite"
    (suite / "Demo").mkdir(parents=True)
    shutil.copy(DEMO / "Demo" / "Basic.lean", suite / "Demo" / "Basic.lean")
    blocks = []
    for task_id, text in files.items():
        (suite / "Demo" / f"{task_id}.lean").write_text(text, encoding="utf-8")
        blocks.append(
            f'[[tasks]]\nid = "{task_id}"\nfile = "Demo/{task_id}.lean"\n'
            f'theorem = "Demo.Big.main"\ndifficulty = 1\n'
        )
    (suite / "suite.toml").write_text(
        'name = "prefix-test"\nlean = "prelude"\nlibrary = ["Demo.Basic"]\n\n' + "\n".join(blocks)
    )
    return suite


# -- the split (pure) ---------------------------------------------------------------------------


def test_the_split_cuts_before_the_doc_comment_and_replays_the_scoping_context() -> None:
    text = task_file(before="open Foo in\ndef a : N := N.z\nopen Bar\nset_option pp.all true\n")
    split = split_prefix(text, parse_header(text), locate_body(text, "Demo.Big.main").decl_start)
    assert split is not None
    assert text[split.cut :].startswith("/-- The target. -/\ntheorem main")
    # universe, namespace, 60 defs, open-in, def a, open, set_option, section, variable
    assert split.commands == 2 + 60 + 6
    assert split.context == (
        "universe u\nnamespace Demo.Big\nopen Bar\nset_option pp.all true\n"
        "section S\nvariable (r : N)\n"
    )
    document = split.document(text, parse_header(text))
    assert document.startswith(f"prelude\nimport Demo.Basic\nimport {split.module}\n")
    assert document.endswith(text[split.cut :])


def test_a_mutual_block_s_end_is_not_replayed_and_a_scope_s_is() -> None:
    before = (
        "mutual\ndef ev : N → N\n  | n => od n\ndef od : N → N\n  | n => ev n\nend\n"
        "section Inner\nend Inner\n"
    )
    text = task_file(before=before)
    split = split_prefix(text, parse_header(text), locate_body(text, "Demo.Big.main").decl_start)
    assert split is not None and not split.unscoped
    assert split.context == (
        "universe u\nnamespace Demo.Big\nsection Inner\nend Inner\nsection S\nvariable (r : N)\n"
    )


def test_private_declarations_and_local_notation_are_not_replayed() -> None:
    text = task_file(before='private def hidden : N := N.z\nlocal notation "Z" => N.z\n')
    split = split_prefix(text, parse_header(text), locate_body(text, "Demo.Big.main").decl_start)
    assert split is not None
    assert "hidden" not in split.context
    assert "notation" not in split.context


@pytest.mark.parametrize(
    ("before", "local"),
    [
        ("private def hidden : N := N.z\n", True),
        ("private theorem helper (p : Prop) (h : p) : p :=\n  h\n", True),
        ('local notation "Z" => N.z\n', True),
        ("@[local reducible] def r : N := N.z\n", True),
        ("attribute [local irreducible] N.add\n", True),
        ("attribute [-reducible] N.add\n", True),
        ("attribute [ -reducible ] N.add\n", True),
        ("seal N.add\n", True),
        ("def localize : N := N.z\ndef privately : N := N.z\n", False),
        ("-- a private note\n/- local -/\ndef x : N := N.z\n", False),
        ("attribute [reducible] N.add\n", False),
        ("def y : N := N.z -- [-1]\n", False),
        ("open Foo\nnamespace Bar\nend Bar\n", False),
    ],
)
def test_module_local_commands_of_the_prefix_are_listed(before: str, local: bool) -> None:
    """An import loses them, so the caller keeps such tasks in the whole file."""
    text = task_file(before=before)
    split = split_prefix(text, parse_header(text), locate_body(text, "Demo.Big.main").decl_start)
    assert split is not None
    assert bool(split.module_local) is local, split.module_local
    if local:
        assert all(entry in text for entry in split.module_local)


# -- positions ------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=30),
    body=st.text(alphabet=st.sampled_from("ab λ∀𝔸\n ()"), max_size=40).map(
        lambda s: "\n  " + s.replace("\n", "\n  ")
    ),
    data=st.data(),
)
def test_positions_after_the_cut_translate_both_ways_and_point_at_the_same_text(
    count: int, body: str, data: st.DataObject
) -> None:
    suite_text = task_file(count=count)
    header = parse_header(suite_text)
    span = locate_body(suite_text, "Demo.Big.main")
    split = split_prefix(suite_text, header, span.decl_start)
    assert split is not None
    text = suite_text[: span.start] + body + suite_text[span.end :]
    fake_task = type("T", (), {"text": text, "header": header})()
    view = prefixed_view(None, split, fake_task, "")  # type: ignore[arg-type]
    lean_text = view.to_lean(text)
    index, lean_index = LineIndex(text), LineIndex(lean_text)
    offset = data.draw(st.integers(min_value=split.cut, max_value=len(text)))
    pos = index.lsp_of_offset(offset)
    lean_pos = view.lsp_to_lean(pos)
    assert lean_pos is not None
    # The same character (or the end) in both texts, and back to the same task position.
    assert lean_text[lean_index.offset_of_lsp(lean_pos) :] == text[offset:]
    assert view.lsp_from_lean(lean_pos) == pos
    assert view.offset_from_lean(lean_index.offset_of_lsp(lean_pos)) == offset
    # Before the cut there is nothing to point at; the head maps to the target's start.
    if split.cut > 0:
        early = index.lsp_of_offset(data.draw(st.integers(0, split.cut - 1)))
        assert early.line >= view.cut_line or view.lsp_to_lean(early) is None
        assert view.lsp_from_lean(LspPos(0, 0)) == LspPos(view.cut_line, 0)


def wrapped_task(count: int) -> str:
    """The target under `… in` wrappers, Mathlib's style (`set_option maxHeartbeats N in`)."""
    return (
        task_file(before="namespace Inner\ndef T : Prop := True\nend Inner\n", count=count)
        .replace("/-- The target. -/\n", WRAPPERS + "/-- The target. -/\n")
        .replace("(h : And p q)", "(h : And p q) (x : T)")
    )


WRAPPERS = "set_option maxRecDepth 1000 in\nopen Inner in\n"


TWO_TS = "namespace Inner\ndef T : Prop := True\nend Inner\ndef _root_.T : Prop := True\n"


HELPER = "theorem helper (p q : Prop) (h : And p q) : And q p :=\n  sorryAx (And q p) Bool.false\n"


def leaky_task(count: int) -> str:
    """`open Inner in` above the target: an error only where the session unwraps it."""
    return (
        task_file(before=TWO_TS, count=count)
        .replace("/-- The target. -/\n", "open Inner in\n/-- The target. -/\n")
        .replace("\n\nend S\n", "\n\ndef after2 : Prop := T\n\nend S\n")
    )


def test_the_in_wrappers_belong_to_the_target_command() -> None:
    text = wrapped_task(60)
    header = parse_header(text)
    decl_start = locate_body(text, "Demo.Big.main").decl_start
    wrappers = scope_wrappers(text, header.end, decl_start)
    chain = text.index(WRAPPERS)
    assert [text[o : o + 2] for o in wrappers] == ["in", "in"]
    assert all(chain < o < decl_start for o in wrappers)
    plain = unwrap(text, wrappers)
    assert len(plain) == len(text) and plain.count("\n") == text.count("\n")
    assert "set_option maxRecDepth 1000   \nopen Inner   \n/-- The target. -/" in plain
    split = split_prefix(text, header, decl_start)
    assert split is not None and split.cut == chain
    # A doc comment or attributes after the `in`, on its line, belong to the target; a
    # trailing comment is trivia; code after an `in` means it ends no wrapper.
    for line, found in (
        ("set_option maxRecDepth 100 in /-- doc -/", True),
        ("set_option maxRecDepth 100 in @[reducible]", True),
        ("set_option maxRecDepth 100 in -- why", True),
        ("variable {a : N}\n    (b : N) in", True),
        ("open Foo in def x : N := N.z", False),
    ):
        one = f"prelude\n{line}\ntheorem c : True :=\n  x\n"
        offsets = scope_wrappers(one, 8, one.index("theorem c"))
        assert [one[o : o + 2] for o in offsets] == (["in"] if found else []), line
    # An `… in` command earlier in the file wraps its own command, not the target.
    assert (
        scope_wrappers(task_file(before="open Foo in\ndef a : N := N.z\n"), header.end, decl_start)
        == ()
    )


# -- against Lean ---------------------------------------------------------------------------------


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ProofService]:
    suite = make_suite(
        tmp_path,
        {
            "plain": task_file(),
            "small": task_file(count=3),
            "private": task_file(
                before="private def hidden : Prop := True\n", statement_extra=" (x : hidden)"
            ),
            "notation": task_file(
                before='local notation "TT" => True\n', statement_extra=" (x : TT)"
            ),
            "open_in": task_file(before="namespace Inner\ndef T : Prop := True\nend Inner\n")
            .replace("/-- The target. -/\n", "open Inner in\n")
            .replace("(h : And p q)", "(h : And p q) (x : T)"),
            "wrapped": wrapped_task(60),
            "wrapped_small": wrapped_task(3),
            "let_statement": task_file(count=3).replace(
                ": And q p :=\n", ": let r := And q p; r :=\n"
            ),
            "private_helper": task_file(before=PRIVATE_HELPER),
            "local_irreducible": task_file(before="attribute [local irreducible] N.add\n").replace(
                "(p q : Prop) (h : And p q) : And q p :=\n  sorryAx (And q p) Bool.false",
                "(p q : Prop) (h : And p q) (n : N) : @Eq N (N.add n N.z) n :=\n"
                "  sorryAx (@Eq N (N.add n N.z) n) Bool.false",
            ),
            "helper": task_file(before=HELPER, count=3),
            "helper_big": task_file(before=HELPER, count=60),
            "leaky": leaky_task(3),
            "leaky_big": leaky_task(60),
            "indented_end": task_file(before=INDENTED_END),
        },
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        yield service


async def test_a_long_prefix_is_imported_and_sessions_see_the_task_file(
    service: ProofService,
) -> None:
    prefixed = await service.open_task("plain")
    assert prefixed.mode == "prefix", prefixed.mode_reason
    file_mode = ProofService(
        service.suite,
        service.pool,
        service.environment,
        service.verifier,
        service.ledger,
        prefix_min_commands=None,
    )
    whole = await file_mode.open_task("plain")
    assert whole.mode == "file"
    assert prefixed.text == whole.text == load_suite(service.suite.root).task("plain").text
    assert prefixed.body_range == whole.body_range
    assert prefixed.diagnostics == whole.diagnostics
    assert prefixed.goals == whole.goals
    for body in (WRONG, RIGHT, "\n  q"):
        a = await service.set_proof(prefixed.session_id, body)
        b = await file_mode.set_proof(whole.session_id, body)
        assert (a.diagnostics, a.goals, a.complete) == (b.diagnostics, b.goals, b.complete)
    line = prefixed.body_range.start.line + 1
    ga = await service.get_goals(prefixed.session_id, line, 3)
    gb = await file_mode.get_goals(whole.session_id, line, 3)
    assert (ga.goals, ga.term_goal) == (gb.goals, gb.term_goal)
    # The scope check reads Lean's parse of the prefixed document in task-file offsets.
    with pytest.raises(ToolError) as rejected:
        await service.set_proof(prefixed.session_id, RIGHT + "\n  def sneaky : N := N.z")
    assert rejected.value.code == "rejected"


@pytest.mark.parametrize(("task_id", "mode"), [("leaky", "file"), ("leaky_big", "prefix")])
async def test_errors_only_the_unwrapped_scope_causes_neither_show_nor_block_complete(
    service: ProofService, task_id: str, mode: str
) -> None:
    opened = await service.open_task(task_id)
    assert opened.mode == mode, opened.mode_reason
    assert [d for d in opened.diagnostics if d.severity == "error"] == []
    wrong = await service.set_proof(opened.session_id, WRONG)
    assert not wrong.complete and any(d.severity == "error" for d in wrong.diagnostics)
    done = await service.set_proof(opened.session_id, RIGHT)
    assert done.complete, done.diagnostics
    assert (await service.check_proof(opened.session_id)).accepted


async def test_a_let_in_the_statement_is_not_taken_for_the_body(service: ProofService) -> None:
    """Proofs are not rejected as escaping; re-typing the statement's end is not complete."""
    opened = await service.open_task("let_statement")
    assert opened.body == "\n  sorryAx (And q p) Bool.false"
    done = await service.set_proof(opened.session_id, RIGHT)
    assert done.complete, done.diagnostics
    assert (await service.check_proof(opened.session_id)).accepted


PRIVATE_HELPER = (
    "private theorem swap (p q : Prop) (h : And p q) : And q p :=\n"
    "  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h\n"
)


async def test_a_private_helper_of_a_long_prefix_is_usable(service: ProofService) -> None:
    opened = await service.open_task("private_helper")
    assert opened.mode == "file" and "module-local" in opened.mode_reason, opened.mode_reason
    done = await service.set_proof(opened.session_id, "\n  swap p q h")
    assert done.complete, done.diagnostics
    assert (await service.check_proof(opened.session_id)).accepted


async def test_a_local_attribute_of_a_long_prefix_holds_in_the_session(
    service: ProofService,
) -> None:
    """`attribute [local irreducible] N.add`: `@Eq.refl N n` is not complete."""
    opened = await service.open_task("local_irreducible")
    assert opened.mode == "file", opened.mode_reason
    step = await service.set_proof(opened.session_id, "\n  @Eq.refl N n")
    assert not (await service.check_proof(opened.session_id)).accepted
    assert not step.complete, step.diagnostics


@pytest.mark.parametrize(("task_id", "mode"), [("helper", "file"), ("helper_big", "prefix")])
async def test_a_proof_through_a_helper_left_with_sorry_is_not_complete(
    service: ProofService, task_id: str, mode: str
) -> None:
    opened = await service.open_task(task_id)
    assert opened.mode == mode, opened.mode_reason
    through = await service.set_proof(opened.session_id, "\n  helper p q h")
    assert not through.complete
    assert any("sorryAx" in d.message and d.severity == "warning" for d in through.diagnostics)
    assert not (await service.check_proof(opened.session_id)).accepted
    done = await service.set_proof(opened.session_id, RIGHT)
    assert done.complete, done.diagnostics
    assert not any("sorryAx" in d.message for d in done.diagnostics)
    assert (await service.check_proof(opened.session_id)).accepted


async def test_the_mode_is_in_the_ledger(service: ProofService) -> None:
    opened = await service.open_task("plain")
    lines = service.ledger.for_session(opened.session_id)
    assert [e.get("mode") for e in lines if e["tool"] == "open_task"] == ["prefix"]


# `  end` closes the section (Lean reads commands in any column), so the split must not replay
# `open Inner` for the target.
INDENTED_END = "namespace Inner\ndef T : Prop := True\nend Inner\nsection\nopen Inner\n  end\n"
USES_T = "\n  (fun (_ : T) =>" + RIGHT + ") True.intro"


async def test_a_scope_closed_inside_another_command_keeps_the_task_in_the_file(
    service: ProofService,
) -> None:
    """A body using `T` unqualified is not complete."""
    opened = await service.open_task("indented_end")
    assert opened.mode == "file"
    assert "scoping commands inside other commands" in opened.mode_reason
    assert "  end" in opened.mode_reason
    step = await service.set_proof(opened.session_id, USES_T)
    assert not step.complete
    assert not (await service.check_proof(opened.session_id)).accepted
    done = await service.set_proof(opened.session_id, USES_T.replace("_ : T", "_ : Inner.T"))
    assert done.complete, done.diagnostics


async def test_a_short_prefix_stays_in_the_file(service: ProofService) -> None:
    opened = await service.open_task("small")
    assert opened.mode == "file"
    assert "commands before the target" in opened.mode_reason


@pytest.mark.parametrize("task_id", ["private", "notation"])
async def test_a_statement_lean_reads_differently_falls_back_to_the_whole_file(
    service: ProofService, task_id: str
) -> None:
    opened = await service.open_task(task_id)
    assert opened.mode == "file", opened.mode_reason
    assert "prefix" in opened.mode_reason or "statement" in opened.mode_reason
    fixed = await service.set_proof(opened.session_id, RIGHT)
    assert fixed.version == 2


@pytest.mark.parametrize(
    ("task_id", "mode"), [("wrapped", "prefix"), ("wrapped_small", "file"), ("open_in", "prefix")]
)
async def test_a_target_under_in_wrappers_is_proved_verified_and_kept_in_scope(
    service: ProofService, task_id: str, mode: str
) -> None:
    """In prefix mode the split cuts between wrapper and theorem."""
    opened = await service.open_task(task_id)
    assert opened.mode == mode, opened.mode_reason
    for escape in (
        "\n  set_option pp.all true",
        " set_option pp.all true",
        "\n  def sneaky : N := N.z",
        "\n  end Demo.Big",
    ):
        with pytest.raises(ToolError) as rejected:
            await service.set_proof(opened.session_id, RIGHT + escape)
        assert rejected.value.code == "rejected", escape
    done = await service.set_proof(opened.session_id, RIGHT)
    assert done.complete, done.diagnostics
    verdict = await service.check_proof(opened.session_id)
    assert verdict.accepted, verdict.reasons


async def test_building_the_prefix_module_counts_as_lean_time_not_overhead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEANRIG_CACHE", str(tmp_path / "cache"))  # nothing built yet
    suite = make_suite(tmp_path, {"plain": task_file()})
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        opened = await service.open_task("plain")
        assert opened.mode == "prefix", opened.mode_reason
        [line] = [e for e in service.ledger.for_session(opened.session_id)]
    overhead = line["total_ms"] - line["queue_ms"] - line["lean_ms"]
    assert overhead < 0.25 * line["total_ms"], line
