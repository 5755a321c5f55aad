"""Suite loading and validation, body location (pure), and the full-toolchain core suite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_tools.tasks import (
    LocateError,
    SuiteError,
    code_end,
    code_span,
    load_suite,
    locate_body,
    precheck_body,
)
from lsp_bridge import LeanInstall

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "lean_project" / "suites"


def test_the_demo_suite_has_at_least_8_prelude_tasks() -> None:
    suite = load_suite(SUITES / "demo")
    assert suite.spec.lean == "prelude" and len(suite.tasks) >= 8
    for task in suite.tasks.values():
        assert "sorryAx" in task.body
        assert task.header.prelude
        assert task.with_body(task.body) == task.text


def test_the_core_suite_has_at_least_10_full_tasks_with_lake_files() -> None:
    suite = load_suite(SUITES / "core")
    assert suite.spec.lean == "full" and len(suite.tasks) >= 10
    assert (SUITES / "core" / "lakefile.toml").exists()
    assert (SUITES / "core" / "lean-toolchain").exists()
    assert all(t.body.strip() == "sorry" for t in suite.tasks.values())


def write_suite(tmp: Path, toml: str, files: dict[str, str]) -> Path:
    (tmp / "suite.toml").write_text(toml)
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    return tmp


GOOD_FILE = "theorem a.b : True :=\n  sorry\n"


def task_toml(**over: object) -> str:
    fields = {"id": '"t1"', "file": '"A.lean"', "theorem": '"a.b"', "difficulty": "3"}
    fields.update({k: str(v) for k, v in over.items()})
    return 'name = "s"\n[[tasks]]\n' + "".join(f"{k} = {v}\n" for k, v in fields.items())


@pytest.mark.parametrize(
    ("toml", "files", "message"),
    [
        (task_toml(file='"Missing.lean"'), {}, "task t1: file Missing.lean does not exist"),
        (task_toml(theorem='"a.c"'), {"A.lean": GOOD_FILE}, "task t1: theorem a.c not found"),
        (task_toml(difficulty=11), {"A.lean": GOOD_FILE}, "task t1: difficulty"),
        (task_toml() + task_toml().split("\n", 1)[1], {"A.lean": GOOD_FILE}, "t1: duplicate id"),
        (
            task_toml(),
            {"A.lean": "theorem a.b : True\n  | _ => trivial\n"},
            "t1: theorem a.b has no",
        ),
        (task_toml(file='"../x.lean"'), {}, "outside the suite directory"),
        # an id names the attempt's directories: `..` would put them outside `attempts/`
        (task_toml(id='".."'), {"A.lean": GOOD_FILE}, "task ..: id: String should match"),
        (task_toml(id='".t"'), {"A.lean": GOOD_FILE}, "task .t: id: String should match"),
        (
            task_toml(),
            {"A.lean": "mutual\ntheorem a.b : True :=\n  sorry\nend\n"},
            "t1: theorem a.b is inside a `mutual` block",
        ),
        (
            task_toml(),
            {"A.lean": "@[simp] private theorem a.b : True :=\n  sorry\n"},
            "t1: theorem a.b is private",
        ),
        (
            task_toml(),
            {"A.lean": "theorem a.b : True :=\n  trivial -- sorry\n"},
            "t1: the placeholder proof of a.b in A.lean does not use sorry",
        ),
        (
            # Lean core's style: `where` in column 0. The body ends before it, and the sorry
            # in the helper does not count.
            task_toml(),
            {"A.lean": "theorem a.b : True :=\n  go\nwhere\n  go : True := sorry\n"},
            "sorry (its `where` clause, which starts in column 0, is not part of the body",
        ),
        (
            task_toml(),
            {"A.lean": "module\n\ntheorem a.b : True :=\n  sorry\n"},
            "t1: theorem a.b in A.lean is not public",
        ),
        (
            task_toml(),
            {"A.lean": "module\n\npublic section\nend\n\ntheorem a.b : True :=\n  sorry\n"},
            "t1: theorem a.b in A.lean is not public",
        ),
    ],
)
def test_invalid_suites_are_rejected_naming_the_task(
    tmp_path: Path, toml: str, files: dict[str, str], message: str
) -> None:
    with pytest.raises(SuiteError) as info:
        load_suite(write_suite(tmp_path, toml, files))
    assert message in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "module\n\npublic theorem a.b : True :=\n  sorry\n",
        "module\n\n@[expose] public section\n\ntheorem a.b : True :=\n  sorry\n\nend\n",
        "module\n\nnamespace a\npublic section\ntheorem b : True :=\n  sorry\nend\nend a\n",
        "theorem a.b : True :=\n  sorry\n",  # no module system: public already
    ],
)
def test_a_public_target_of_the_module_system_loads(tmp_path: Path, text: str) -> None:
    """`public`, or in a `public section`: a private target would be unnameable by the verdict."""
    assert load_suite(write_suite(tmp_path, task_toml(), {"A.lean": text})).task("t1")


def test_a_missing_suite_toml_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"no suite\.toml"):
        load_suite(tmp_path)


def test_locate_handles_namespaces_comments_and_the_next_command() -> None:
    text = (
        "namespace A\n-- theorem b : False := x (a comment)\n"
        "/-- doc -/\ntheorem b (h : (x := 1) = 1) : True :=\n  trivial -- done\n\n"
        "/-- next -/\ntheorem c : True := trivial\nend A\n"
    )
    span = locate_body(text, "A.b")
    assert span.body(text) == "\n  trivial -- done"
    with pytest.raises(LocateError, match="not found"):
        locate_body(text, "b")


T = "theorem main (p q : Prop) (h : And p q) : And q p :=\n  sorryAx (And q p) Bool.false\n"


@pytest.mark.parametrize(
    ("text", "theorem"),
    [
        # A `let`/`have` in the statement has its own `:=`.
        (
            "namespace N\ntheorem main (p q : Prop) (h : And p q) : let r := And q p; r :=\n  sorryAx"  # noqa: E501
            " (And q p) Bool.false\nend N\n",
            "N.main",
        ),
        # `:=` alone in column 0, which Lean accepts.
        (
            "theorem main (p q : Prop)\n    (h : And p q) :\n    And q p\n:=\n  sorryAx (And q p)"
            " Bool.false\n",
            "main",
        ),
        # The module system's sections and `public` (current Mathlib).
        ("namespace N\npublic section\ndef x : N := N.z\nend\n" + T + "end N\n", "N.main"),
        (
            "namespace N\n@[expose] public noncomputable section\ndef x := 1\nend\n"
            + T
            + "end N\n",
            "N.main",
        ),
        ("namespace N\npublic " + T + "end N\n", "N.main"),
        # A namespace opened in one form and closed in another.
        (
            "namespace A\nnamespace B\ndef d := 1\nend A.B\n\nnamespace A.B\n" + T + "end A.B\n",
            "A.B.main",
        ),
        ("namespace A.B\ndef d := 1\nend B\n" + T + "end A\n", "A.main"),
        # Nested brackets in an attribute on the theorem's line.
        ("@[aesop safe [constructors]] " + T, "main"),
    ],
)
def test_locate_reads_statements_and_scopes_as_lean_does(text: str, theorem: str) -> None:
    span = locate_body(text, theorem)
    assert span.body(text).strip() == "sorryAx (And q p) Bool.false", span.body(text)


def test_a_theorem_keyword_not_starting_its_line_is_named_as_the_reason() -> None:
    for line in ("set_option maxRecDepth 1000 in ", "/-- doc -/ "):
        with pytest.raises(LocateError, match="must begin its line"):
            locate_body(line + T, "main")


def test_a_placeholder_body_that_fails_the_prechecks_is_refused_at_load(tmp_path: Path) -> None:
    tabbed = GOOD_FILE.replace("\n  sorry", "\n\tsorry")
    with pytest.raises(SuiteError, match=r"placeholder proof of a\.b .* tab"):
        load_suite(write_suite(tmp_path, task_toml(), {"A.lean": tabbed}))


def test_a_byte_order_mark_is_refused_when_the_suite_loads(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="byte order mark"):
        load_suite(write_suite(tmp_path, task_toml(), {"A.lean": "\ufeff" + GOOD_FILE}))


proof_lines = st.lists(
    st.text(alphabet=st.sampled_from(list("abc ()⟨⟩:=𝔽𝓗.")), min_size=1, max_size=12),
    min_size=1,
    max_size=4,
)


@given(proof_lines)
def test_a_located_body_replaced_by_an_indented_body_is_found_again(lines: list[str]) -> None:
    text = "namespace N\n\ntheorem t (𝔽 : Prop) : True :=\n  trivial\n\nend N\n"
    span = locate_body(text, "N.t")
    body = "".join(f"\n  {line.strip() or 'x'}" for line in lines)
    if precheck_body(body) is not None:
        return
    new = text[: span.start] + body + text[span.end :]
    again = locate_body(new, "N.t")
    assert again.body(new) == body


@given(st.text(alphabet=st.sampled_from(list("ab -/\n\t()")), max_size=40))
def test_code_span_brackets_the_code_between_comments_and_whitespace(body: str) -> None:
    text = "x :=" + body + "\nend"
    start, end = 4, 4 + len(body)
    first, last = code_span(text, start, end)
    assert last == code_end(text, start, end)
    if first < last:  # both ends are code: neither whitespace nor a comment
        assert not text[first].isspace() and not text[last - 1].isspace()
        assert code_span(text, first, last) == (first, last)
    else:
        assert (first, last) == (start, start)


def test_prechecks_reject_what_text_alone_decides() -> None:
    assert precheck_body("\n  trivial") is None
    assert "column 0" in (precheck_body("\n  trivial\n#exit") or "")
    assert "unterminated" in (precheck_body("\n  trivial /- open") or "")
    assert "unterminated string" in (precheck_body('\n  "abc') or "")
    assert "1 MB" in (precheck_body("x" * (1024 * 1024 + 1)) or "")
    assert "NUL" in (precheck_body("\n  a\x00") or "")
    assert precheck_body("\n  /- closed /- nested -/ -/ trivial") is None
    assert precheck_body("\n  h' -- it's fine") is None
    # Lean refuses tabs between tokens, not in comments or strings.
    assert "tab" in (precheck_body("\n\ttrivial") or "")
    assert precheck_body('\n  trivial -- a\ttab\n  /- \t -/ "\t"') is None
    # A line break inside a «» name is not a column-0 line (Lean accepts it).
    assert precheck_body("\n  (fun («x\ny» : True) => h) True.intro") is None
    assert "column 0" in (precheck_body("\n  «x»\ny") or "")


has_toolchain = shutil.which("lake") is not None and shutil.which("elan") is not None


@pytest.mark.toolchain
@pytest.mark.skipif(not has_toolchain, reason="needs a full Lean toolchain (elan + lake)")
@pytest.mark.anyio
async def test_core_reference_proofs_are_accepted_on_a_toolchain() -> None:
    from agent_tools.tasks import library_dir
    from agent_tools.verdict import Verifier
    from lsp_bridge import find_lean

    suite = load_suite(SUITES / "core")
    install = find_lean(suite.root)
    verifier = Verifier(suite, install, library=library_dir(suite, install))
    refs = json.loads((Path(__file__).with_name("core_reference_proofs.json")).read_text())
    for task_id, proof in refs.items():
        task = suite.task(task_id)
        verdict = await verifier.verify(task, task.with_body("\n  " + proof))
        assert verdict.accepted, (task_id, verdict.reasons)
        sorry = await verifier.verify(task, task.text)
        assert not sorry.accepted and any("sorryAx" in r for r in sorry.reasons)


def test_a_theorem_after_a_mutual_block_or_noncomputable_section_keeps_its_namespace() -> None:
    text = (
        "namespace Foo\n\nmutual\ndef a : Nat → Nat\n  | _ => 0\n"
        "def b : Nat → Nat\n  | _ => 0\nend\n\n"
        "noncomputable section\ndef c : Nat := 0\nend\n\n"
        "theorem t : True :=\n  sorry\n\nend Foo\n"
    )
    span = locate_body(text, "Foo.t")
    assert text[span.start : span.end].strip() == "sorry"
    with pytest.raises(LocateError):
        locate_body(text, "t")
    # A block closed by an indented `end` is closed: the theorem after it is no member.
    indented = "mutual\n  theorem a : True :=\n    trivial\n  end\ntheorem c : True :=\n  trivial\n"
    assert indented[locate_body(indented, "c").start :].strip() == "trivial"


def test_the_suite_hash_covers_tasks_and_both_libraries(tmp_path: Path) -> None:
    """The suite hash is stable across loads and changes with a LAD library file."""
    import shutil

    suite_dir = tmp_path / "demo"
    shutil.copytree(SUITES / "demo", suite_dir)
    before = load_suite(suite_dir).content_hash()
    assert load_suite(suite_dir).content_hash() == before
    suite = load_suite(suite_dir)
    assert suite.lad_files, "the demo suite declares a LAD library"
    lemma = suite.lad_files[0]
    lemma.write_text(lemma.read_text(encoding="utf-8") + "\n-- changed\n", encoding="utf-8")
    assert load_suite(suite_dir).content_hash() != before


def test_a_library_module_that_does_not_compile_is_named_with_its_first_error(
    tmp_path: Path, lean_install: LeanInstall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failing file's path, whole."""
    from agent_tools.tasks import library_dir

    monkeypatch.setenv("LEANRIG_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "demo"
    shutil.copytree(SUITES / "demo", root)
    basic = root / "Demo" / "Basic.lean"
    later = "".join(f"theorem later_{i} : N := leanrig_unknown_{i}\n" for i in range(12))
    basic.write_text(
        basic.read_text("utf-8") + "\ntheorem first : N := leanrig_unknown\n" + later,
        encoding="utf-8",
    )
    with pytest.raises(SuiteError) as caught:
        library_dir(load_suite(root), lean_install)
    message = caught.value.message
    assert f"{basic}:" in message and "error" in message, message
    assert "leanrig_unknown`" in message, message  # the first error, not the last ones
