"""The verifier (fresh sandboxed Lean per check) on the exploit corpus and on valid proofs."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_tools.tasks import (
    Limits,
    Suite,
    Task,
    declaration_head,
    library_dir,
    load_suite,
)
from agent_tools.verdict import (
    FORBIDDEN,
    References,
    Statement,
    Verifier,
    forbidden_constructs,
    parse_axioms,
    parse_check,
)
from agent_tools.verdict.forbidden import _forbidden_in_code
from agent_tools.verdict.lean_output import compile_failure
from agent_tools.verdict.sandboxed_lean import SandboxedLean
from lsp_bridge import find_lean
from repl_pool import SandboxPolicy, sandbox_tools, sandbox_wrapper

from .exploits import CORPUS
from .suites import demo_with_tasks

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent
ROOT = HERE.parent
EXPLOITS = load_suite(HERE / "fixtures" / "exploit_suite")
DEMO = load_suite(ROOT / "lean_project" / "suites" / "demo")
REFS: dict[str, str] = json.loads((HERE / "demo_reference_proofs.json").read_text("utf-8"))


def verifier_for(suite: Suite, **limits: float) -> Verifier:
    install = find_lean()
    if limits:
        spec = suite.spec.model_copy(
            update={"limits": Limits(**{**suite.spec.limits.model_dump(), **limits})}
        )
        suite = dataclasses.replace(suite, spec=spec)
    return Verifier(suite, install, library=library_dir(suite, install))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def exploit_verifier() -> Verifier:
    return verifier_for(EXPLOITS)


@pytest.fixture(scope="module")
def demo_verifier() -> Verifier:
    return verifier_for(DEMO)


@pytest.mark.parametrize(("name", "task_id", "build", "reason"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_the_exploit_corpus_is_rejected_with_the_right_reason(
    exploit_verifier: Verifier, name: str, task_id: str, build: object, reason: str
) -> None:
    task = EXPLOITS.task(task_id)
    assert callable(build)
    submission = build(task.text, task.body)
    verdict = await exploit_verifier.verify(task, submission)
    assert not verdict.accepted
    assert any(reason in r for r in verdict.reasons), verdict.reasons


async def test_a_valid_proof_is_accepted_with_its_axioms(exploit_verifier: Verifier) -> None:
    task = EXPLOITS.task("true")
    verdict = await exploit_verifier.verify(task, task.text.replace(task.body, "\n  True.intro"))
    assert verdict.accepted, verdict.reasons
    assert verdict.axioms == ()
    assert verdict.lean_version == "4.35.0"
    assert set(verdict.to_json()) >= {"accepted", "reasons", "axioms", "elapsed_ms", "lean_version"}


async def test_a_target_proved_beside_an_unproved_helper_is_accepted(
    exploit_verifier: Verifier,
) -> None:
    task = EXPLOITS.task("helper")
    verdict = await exploit_verifier.verify(task, task.with_body("\n  True.intro"))
    assert verdict.accepted, verdict.reasons


@pytest.mark.parametrize("task_id", sorted(REFS))
async def test_every_demo_reference_proof_is_accepted(
    demo_verifier: Verifier, task_id: str
) -> None:
    task = DEMO.task(task_id)
    verdict = await demo_verifier.verify(task, task.with_body("\n  " + REFS[task_id]))
    assert verdict.accepted, verdict.reasons


async def test_verifiers_sharing_references_read_each_task_file_once_and_by_its_text() -> None:
    shared = References()
    first, second = (
        Verifier(DEMO, find_lean(), library=library_dir(DEMO, find_lean()), references=shared)
        for _ in range(2)
    )
    task = DEMO.task("and_swap")
    proof = task.with_body("\n  " + REFS["and_swap"])
    assert (await first.verify(task, proof)).accepted
    [key] = shared.types
    assert [*shared.suffixes] == [key]
    # What the first verifier read is what the second judges by: a planted statement shows it.
    shared.types[key] = Statement(universes=(), type="Demo.planted")
    planted = await second.verify(task, proof)
    assert planted.reasons == (
        "the theorem's statement differs from the task's (elaborated types differ)",
    )
    # Another text of the same task is read afresh, never judged by the first text's answer.
    edited = dataclasses.replace(task, text=task.text + "\n")
    assert (await second.verify(edited, edited.with_body("\n  " + REFS["and_swap"]))).accepted
    assert len(shared.types) == 2
    # Without one given, a process's verifiers share theirs: a run's verdicts and its attempts'.
    assert verifier_for(DEMO).references is verifier_for(DEMO).references


def test_verifiers_on_different_event_loops_share_references() -> None:
    """A process may verify under asyncio, then under trio: what the first read serves both."""
    shared = References()
    task = DEMO.task("and_swap")
    proof = task.with_body("\n  " + REFS["and_swap"])
    for backend in ("asyncio", "trio"):
        verifier = Verifier(
            DEMO, find_lean(), library=library_dir(DEMO, find_lean()), references=shared
        )
        verdict = anyio.run(functools.partial(verifier.verify, task, proof), backend=backend)
        assert verdict.accepted, (backend, verdict.reasons)
    assert len(shared.types) == 1


def test_the_demo_suite_has_universe_polymorphic_tasks_with_reference_proofs() -> None:
    one = DEMO.task("eq_trans")
    two = DEMO.task("congr_arg")
    assert "universe u\n" in one.text and "Sort u" in one.text
    assert "universe u v\n" in two.text and "Sort v" in two.text
    assert {"eq_trans", "congr_arg"} <= set(REFS)


SYMM = "@Eq.rec α a (fun x _ => @Eq α x a) (@Eq.refl α a) b h"  # the exploit suite's `universe`


async def test_a_universe_polymorphic_proof_is_accepted(exploit_verifier: Verifier) -> None:
    task = EXPLOITS.task("universe")
    verdict = await exploit_verifier.verify(task, task.with_body("\n  " + SYMM))
    assert verdict.accepted, verdict.reasons
    assert verdict.axioms == ()


ESCAPED_TASK = """prelude
import Exploit.Basic

namespace Exploit.Ünï

/-- A name that only reads back escaped, with explicit universe parameters. -/
theorem «symm ∀».{w} {α : Sort w} {a b : α} (h : @Eq α a b) : @Eq α b a :=
  sorryAx (@Eq α b a) Bool.false

end Exploit.Ünï
"""


def exploit_suite_with(tmp_path: Path, task_id: str, text: str) -> tuple[Verifier, Task]:
    """The exploit suite plus one task (file ``Exploit/<Id>.lean``) proving ``«symm ∀»``."""
    root = tmp_path / "suite"
    shutil.copytree(EXPLOITS.root, root)
    name = f"Exploit/{task_id.title()}.lean"
    (root / name).write_text(text, encoding="utf-8")
    with (root / "suite.toml").open("a", encoding="utf-8") as toml:
        toml.write(
            f'\n[[tasks]]\nid = "{task_id}"\nfile = "{name}"\n'
            'theorem = "Exploit.Ünï.«symm ∀»"\ndifficulty = 1\n'
        )
    suite = load_suite(root)
    return verifier_for(suite), suite.task(task_id)


async def test_an_escaped_unicode_name_with_explicit_universes_is_found(tmp_path: Path) -> None:
    verifier, task = exploit_suite_with(tmp_path, "escaped", ESCAPED_TASK)
    verdict = await verifier.verify(task, task.with_body("\n  " + SYMM))
    assert verdict.accepted, verdict.reasons
    unproved = await verifier.verify(task, task.text)
    assert not unproved.accepted
    assert any("sorryAx" in r for r in unproved.reasons), unproved.reasons


# Indented commands after the target (files that indent inside a namespace): Lean ends the
# theorem at them, so the body must not take them in.
INDENTED_AFTER = {
    "theorem": ESCAPED_TASK.replace(
        "\n\nend Exploit",
        "\n\n  -- indented, as inside a namespace\n"
        "  theorem after (p : Prop) (hp : p) : p := hp\n\nend Exploit",
    ),
    "end": ESCAPED_TASK.replace(
        "namespace Exploit.Ünï\n", "namespace Exploit.Ünï\nsection\n"
    ).replace("\n\nend Exploit", "\n  end\nend Exploit"),
    "check": ESCAPED_TASK.replace("\n\nend Exploit", "\n  #check @Eq\nend Exploit"),
    "open": ESCAPED_TASK.replace("\n\nend Exploit", "\n  open Exploit.Ünï\nend Exploit"),
    "wrapped": ESCAPED_TASK.replace(
        "\n\nend Exploit",
        "\n\n  set_option pp.all true in\n"
        "  theorem after (p : Prop) (hp : p) : p := hp\nend Exploit",
    ),
}


@pytest.mark.parametrize("after", sorted(INDENTED_AFTER))
async def test_an_indented_command_after_the_target_is_not_part_of_the_body(
    tmp_path: Path, after: str
) -> None:
    verifier, task = exploit_suite_with(tmp_path, "indented", INDENTED_AFTER[after])
    assert task.body.strip().startswith("sorryAx (@Eq α b a) Bool.false")
    assert not any(w in task.body for w in ("after", "end", "#check", "open", "set_option"))
    verdict = await verifier.verify(task, task.with_body("\n  " + SYMM))
    assert verdict.accepted, verdict.reasons


# What editors add or trim on save: each must be accepted, as CRLF/LF changes are.
SAVED_BY_EDITORS = {
    "final line break removed": lambda t: t.rstrip("\n"),
    "blank lines added at the end": lambda t: t + "\n\n",
    "spaces at line ends": lambda t: t.replace(
        "namespace Exploit.Ünï\n", "namespace Exploit.Ünï  \n"
    ).replace("Bool.false", "Bool.false\t"),
    "trailing spaces trimmed": lambda t: t.replace("  \n", "\n"),
    "line ends changed to CRLF": lambda t: t.replace("\n", "\r\n"),
}
SPACED_TASK = ESCAPED_TASK.replace("namespace Exploit.Ünï\n", "namespace Exploit.Ünï   \n")
# Refused before Lean runs: the prelude has no `String` for it to elaborate.
STRING_TASK = SPACED_TASK.replace("/-- A name", 'def s : String := "two  \nlines"\n\n/-- A name')


@pytest.mark.parametrize("saved", sorted(SAVED_BY_EDITORS))
async def test_whitespace_editors_change_outside_the_body_is_not_a_change(
    tmp_path: Path, saved: str
) -> None:
    verifier, task = exploit_suite_with(tmp_path, "saved", SPACED_TASK)
    submission = SAVED_BY_EDITORS[saved](task.with_body("\n  " + SYMM))
    verdict = await verifier.verify(task, submission)
    assert verdict.accepted, verdict.reasons


async def test_a_real_change_beside_whitespace_is_rejected_and_named(tmp_path: Path) -> None:
    """The reason's "first difference" names the real change's line, not the trimmed spaces'."""
    verifier, task = exploit_suite_with(tmp_path, "mixed", SPACED_TASK)
    proved = task.with_body("\n  " + SYMM)
    changed = proved.replace("namespace Exploit.Ünï   \n", "namespace Exploit.Ünï\n")
    changed = changed.replace(
        "end Exploit.Ünï", "theorem other : True := True.intro\nend Exploit.Ünï"
    )
    verdict = await verifier.verify(task, changed)
    assert not verdict.accepted
    line = changed.splitlines().index("theorem other : True := True.intro") + 1
    assert f"last difference near {line}:" in verdict.reasons[0], verdict.reasons
    before = proved.replace("namespace Exploit.Ünï   \n", "namespace Exploit.Ünï  \n/- x -/\n")
    verdict = await verifier.verify(task, before)
    assert not verdict.accepted
    assert "first difference near 5:1)" in verdict.reasons[0], verdict.reasons


@pytest.mark.parametrize("blank", ["\u00a0", "\x0c\n", "\u3000", "tab"])
async def test_blanks_lean_refuses_outside_the_body_are_a_change(
    tmp_path: Path, blank: str
) -> None:
    """A Unicode space at the file's end or a tab ending a code line: Lean refuses both."""
    verifier, task = exploit_suite_with(tmp_path, "blank", SPACED_TASK)
    proved = task.with_body("\n  " + SYMM)
    if blank == "tab":
        submission = proved.replace("namespace Exploit.Ünï   \n", "namespace Exploit.Ünï\t\n")
    else:
        submission = proved + blank
    verdict = await verifier.verify(task, submission)
    assert not verdict.accepted
    assert "outside the proof body" in verdict.reasons[0], verdict.reasons


@pytest.mark.parametrize(
    "body",
    [
        '\n  (fun _ => h) s!"{include_str "/etc/hostname"}"',
        '\n  (fun _ => h) s!"{by run_tac pure ()}"',
    ],
)
async def test_a_construct_inside_an_interpolated_string_is_rejected(
    tmp_path: Path, body: str
) -> None:
    """Rejected before Lean, by the verdict and by the session's refusal."""
    from agent_tools.sessions.body_text import refusal

    verifier, task = exploit_suite_with(tmp_path, "interpolated", SPACED_TASK)
    verdict = await verifier.verify(task, task.with_body(body))
    assert not verdict.accepted
    assert "forbidden construct" in verdict.reasons[0], verdict.reasons
    assert verdict.stages.get("compile") is None  # before Lean
    assert refusal(body) is not None


def test_the_verdicts_lean_cannot_read_what_its_caller_hides(tmp_path: Path) -> None:
    from repl_pool import uses_namespaces

    secret = tmp_path / "Solutions"
    secret.mkdir()
    (secret / "proof.lean").write_text("a proof")
    policy = SandboxPolicy(hidden=(secret,))
    if not uses_namespaces(policy):
        pytest.skip("bwrap cannot sandbox Lean here")
    verifier, _ = exploit_suite_with(tmp_path, "hides", SPACED_TASK)
    verifier = Verifier(
        verifier.suite, verifier.install, library=None, sandbox=policy, work_root=tmp_path
    )
    work = tmp_path / "work"
    work.mkdir()
    lean: SandboxedLean = verifier._lean
    argv = lean.wrapped(["/bin/sh", "-c", f"cat {secret}/proof.lean; echo done"], work)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert "done" in done.stdout and "a proof" not in done.stdout, done


async def test_spaces_at_a_line_end_inside_a_string_are_part_of_its_value(tmp_path: Path) -> None:
    verifier, task = exploit_suite_with(tmp_path, "string", STRING_TASK)
    changed = task.with_body("\n  " + SYMM).replace('"two  \n', '"two\n')
    verdict = await verifier.verify(task, changed)
    assert not verdict.accepted
    assert "outside the proof body" in verdict.reasons[0], verdict.reasons


WRAPPED_TASK = ESCAPED_TASK.replace(
    "/-- A name", "set_option maxRecDepth 2000 in\nset_option pp.all true in\n/-- A name"
)


async def test_a_target_under_set_option_in_is_verified_and_its_escapes_rejected(
    tmp_path: Path,
) -> None:
    """Mathlib's style: `set_option maxHeartbeats N in` above the theorem."""
    verifier, task = exploit_suite_with(tmp_path, "wrapped", WRAPPED_TASK)
    verdict = await verifier.verify(task, task.with_body("\n  " + SYMM))
    assert verdict.accepted, verdict.reasons
    for escape in (" set_option pp.all false", "\n  def sneaky : Prop := True"):
        escaped = await verifier.verify(task, task.with_body("\n  " + SYMM + escape))
        assert not escaped.accepted, escape
        assert any("parse ends the theorem" in r or "declares" in r for r in escaped.reasons), (
            escaped.reasons
        )


# (suite, task, text replaced in the task file, replacement, expected reason). Prelude Lean
# rejects a body that changes the theorem's universes, so the comparison runs on compiled modules.
UNIVERSE_CHANGES = {
    "Sort u to Type": (
        "exploits",
        "universe",
        "{α : Sort u}",
        "{α : Type}",
        "universe parameters .{} instead of .{u_1}",
    ),
    "Sort u to Type u": (
        "exploits",
        "universe",
        "{α : Sort u}",
        "{α : Type u}",
        "elaborated types differ",
    ),
    "a second universe": (
        "exploits",
        "universe",
        "{α : Sort u} {a b : α}",
        "{α : Sort u} {β : Sort v} {a b : α}",
        "universe parameters .{u_1, u_2} instead of .{u_1}",
    ),
    "universe order swapped": (
        "demo",
        "congr_arg",
        "universe u v",
        "universe v u",
        "elaborated types differ",
    ),
}


@pytest.mark.parametrize("change", sorted(UNIVERSE_CHANGES))
async def test_a_changed_universe_structure_is_a_different_statement(
    exploit_verifier: Verifier, demo_verifier: Verifier, tmp_path: Path, change: str
) -> None:
    suite_name, task_id, old, new, reason = UNIVERSE_CHANGES[change]
    verifier = exploit_verifier if suite_name == "exploits" else demo_verifier
    task = verifier.suite.task(task_id)
    assert old in task.text
    proof = REFS.get(task_id, SYMM)
    other = task.text.replace(old, new, 1).replace(task.body, "\n  " + proof)
    sub, _ = await verifier._compile_and_query(task, other, tmp_path, "Other")
    ref = await verifier._reference_type(task)
    assert sub != ref
    reasons = verifier._judge(task, sub, ref, ())
    assert any("statement differs" in r and reason in r for r in reasons), reasons


async def test_the_same_statement_in_another_module_compares_equal(
    demo_verifier: Verifier, tmp_path: Path
) -> None:
    task = DEMO.task("congr_arg")
    proved = task.with_body("\n  " + REFS["congr_arg"])
    sub, axioms = await demo_verifier._compile_and_query(task, proved, tmp_path, "Other")
    assert sub == await demo_verifier._reference_type(task)
    assert sub.universes == ("u_1", "u_2")
    assert axioms == ()


def test_check_output_is_parsed_with_universes_escaped_names_and_line_breaks() -> None:
    two = parse_check(
        "@Demo.Function.congr_φ.{u_1,\n    u_2} : ∀ {α : Sort u_1} {β : Sort u_2} (φ : α → β),\n"
        "  @Eq.{u_2} β (φ a) (φ a)",
        "Demo.Function.congr_φ",
    )
    assert two is not None and two.universes == ("u_1", "u_2")
    assert two.type.startswith("∀ {α : Sort u_1}")
    plain = parse_check("Demo.X.«my thm» : True", "Demo.X.«my thm»")
    assert plain is not None and plain.universes == () and plain.type == "True"
    assert parse_check("Demo.X.«my thm» : True", "«Demo».X.«my thm»") == plain
    assert parse_check("Demo.X.other : True", "Demo.X.main") is None
    assert parse_check("unknown identifier 'Demo.X.main'", "Demo.X.main") is None


def test_a_statement_lean_cannot_pretty_print_is_compared_by_its_raw_form() -> None:
    """Compared by the `pp.rawOnError` text, not by the failure sentence every type shares."""
    fallback = "[Error pretty printing expression: Unknown constant `rawNatLit`. Falling back to "
    fallback += "raw printer.]\n"

    def raw(n: int) -> str:
        return f"forall (n : Nat), LT.lt.{{0}} Nat instLTNat n (OfNat.ofNat.{{0}} Nat {n} (x {n}))"

    zero = parse_check(f"T.main : {fallback}{raw(0)}", "T.main")
    one = parse_check(f"T.main : {fallback}{raw(1)}", "T.main")
    assert zero is not None and one is not None and zero != one
    assert zero == parse_check(f"T.main : {fallback}{raw(0)}", "T.main")
    unprinted = "T.main : failed to pretty print expression (use 'set_option pp.rawOnError true')"
    assert parse_check(unprinted, "T.main") is None


def test_axiom_output_is_parsed_with_escaped_names_and_line_breaks() -> None:
    def msg(data: str) -> list[dict[str, object]]:
        return [{"data": data, "severity": "information"}]

    assert (
        parse_axioms(msg("'Demo.X.«my thm»' does not depend on any axioms"), "Demo.X.«my thm»")
        == ()
    )
    listed = msg("'Demo.𝔽.t' depends on axioms: [propext,\n Classical.choice,\n «c, d»]")
    assert parse_axioms(listed, "Demo.𝔽.t") == ("propext", "Classical.choice", "«c, d»")
    assert parse_axioms(listed, "Demo.𝔽.other") is None


async def test_an_expensive_elaboration_is_rejected_as_timeout() -> None:
    task = EXPLOITS.task("true")
    verifier = verifier_for(EXPLOITS, wall_seconds=3)
    # 200k nested parentheses with the recursion limit lifted: many seconds of elaboration.
    deep = "set_option maxRecDepth 100000000 in\n  " + "(" * 200000 + "True.intro" + ")" * 200000
    verdict = await verifier.verify(task, task.with_body("\n  " + deep))
    assert not verdict.accepted
    assert any(r.startswith("timeout") and "within 3 s" in r for r in verdict.reasons), (
        verdict.reasons
    )


async def test_a_crashing_lean_process_means_rejection(exploit_verifier: Verifier) -> None:
    task = EXPLOITS.task("true")
    # A valid proof Lean's worker takes about a second over: the kill lands mid-elaboration,
    # never after an answer that was complete (a 100 ms proof raced the poll under load).
    nested = "(" * 4000 + "True.intro" + ")" * 4000
    submission = task.with_body(f"\n  set_option maxRecDepth 100000000 in\n  {nested}")
    killed: list[int] = []
    finished = anyio.Event()

    async def kill_lean_workers() -> None:
        # Polls the process table until the check is over, killing the parse stage's
        # `lean --worker`; the assertions below prove a kill happened.
        while not finished.is_set():
            for proc in psutil.Process().children(recursive=True):
                try:
                    if "--worker" in proc.cmdline():
                        proc.kill()
                        killed.append(proc.pid)
                except psutil.Error:
                    pass
            if killed:
                return
            await anyio.sleep(0.005)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_lean_workers)
            try:
                verdict = await exploit_verifier.verify(task, submission)
            finally:
                finished.set()
    assert killed, "no Lean worker was seen, so nothing was killed"
    assert not verdict.accepted
    assert any(r.startswith("crash") for r in verdict.reasons), verdict.reasons


async def test_the_type_comparison_sees_a_different_statement(
    exploit_verifier: Verifier, tmp_path: Path
) -> None:
    # Prelude Lean elaborates a theorem's type before its body, so no body can change it; the
    # comparison runs directly on two compiled modules with different statements.
    task = EXPLOITS.task("true")
    other = task.text.replace("theorem main : True :=", "theorem main : @Eq N N.z N.z :=").replace(
        task.body, "\n  @Eq.refl N N.z"
    )
    sub, _ = await exploit_verifier._compile_and_query(task, other, tmp_path, "Other")
    ref = await exploit_verifier._reference_type(task)
    assert sub != ref
    reasons = exploit_verifier._judge(task, sub, ref, ())
    assert any("statement differs" in r for r in reasons)


@pytest.mark.parametrize("use_bwrap", [True, False], ids=["bwrap", "rlimits-only"])
async def test_a_relative_work_root_works_from_any_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_bwrap: bool
) -> None:
    # `leanrig serve` defaults to `--run-dir runs`: the verifier's scratch root is relative.
    if use_bwrap and sandbox_tools()["bwrap"] is None:
        pytest.skip("bwrap does not work on this machine: only the rlimits-only path is tested")
    monkeypatch.chdir(tmp_path)
    scratch = anyio.Path("runs/scratch")
    await scratch.mkdir(parents=True)
    install = find_lean()
    verifier = Verifier(
        EXPLOITS,
        install,
        library=library_dir(EXPLOITS, install),
        sandbox=SandboxPolicy(use_bwrap=use_bwrap),
        work_root=Path("runs/scratch"),
    )
    task = EXPLOITS.task("true")
    verdict = await verifier.verify(task, task.with_body("\n  True.intro"))
    assert verdict.accepted, verdict.reasons
    assert [p async for p in scratch.iterdir()] == []


FAKE_LAKE = """#!/bin/sh
# `lake env printenv LEAN_PATH` that answers only once the test has seen it start.
touch "$0.started"
i=0
while [ $i -lt 500 ]; do
  if [ -e "$0.release" ]; then touch "$0.observed"; echo "$FAKE_LAKE_PATH"; exit 0; fi
  sleep 0.01
  i=$((i + 1))
done
exit 1
"""


async def test_asking_lake_for_the_project_path_does_not_block_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake lake waits for the test to release it, which a blocked event loop could not do
    # (lake would give up).
    root = tmp_path / "suite"
    shutil.copytree(EXPLOITS.root, root)
    (root / "lakefile.toml").write_text('name = "exploits"\n')
    lake = tmp_path / "lake"
    lake.write_text(FAKE_LAKE)
    lake.chmod(0o755)
    real = find_lean()
    library = library_dir(EXPLOITS, real)
    assert library is not None
    monkeypatch.setenv("FAKE_LAKE_PATH", str(library))
    install = dataclasses.replace(real, lake=lake)
    suite = load_suite(root)
    verifier = Verifier(suite, install, library=None)
    task = suite.task("true")
    verdicts = []

    async def check() -> None:
        verdicts.append(await verifier.verify(task, task.with_body("\n  True.intro")))

    started = anyio.Path(f"{lake}.started")
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(check)
            while not await started.exists():
                await anyio.sleep(0.01)
            await anyio.Path(f"{lake}.release").touch()
    assert await anyio.Path(f"{lake}.observed").exists(), "lake was not released while it ran"
    assert verdicts[0].accepted, verdicts[0].reasons


def test_forbidden_constructs_ignore_comments_not_strings() -> None:
    assert forbidden_constructs("True.intro -- native_decide would be cheating") == []
    assert forbidden_constructs("True.intro /- #exit -/") == []
    # A string may be interpolated (`s!"{…}"`, `throwError "…{e}"`): its words count.
    assert forbidden_constructs('True.intro "unsafe"')
    assert forbidden_constructs("by native_decide")
    assert forbidden_constructs("unsafeCast x") == []


@pytest.mark.parametrize(
    ("body", "forbidden"),
    [
        ("@And.rec p q (fun _ => And q p) (fun extern hq => @And.intro q p hq extern) h", False),
        ("fun implemented_by => implemented_by", False),
        ("[extern, h]", False),
        ('aux\nwhere\n  @[extern "c_aux"] aux : N := N.z', True),
        ("aux\nwhere\n  @[inline, «implemented_by» f] aux : N := N.z", True),
        ("aux\nwhere\n  @ [simp, extern] aux : N := N.z", True),
        ("h\n@[implemented_by x] def y := 1", True),
        # Attributes a proof's helpers may carry, and any other.
        ("aux\nwhere\n  @[simp, reducible] aux : N := N.z", False),
        ("aux\nwhere\n  @[local simp] aux : N := N.z", False),
        ("aux\nwhere\n  @[init] aux : N := N.z", True),
        ("aux\nwhere\n  @[simp, «init» g] aux : N := N.z", True),
        ("aux\nwhere\n  @[scoped macro Lean.Parser.Term.app] aux : N := N.z", True),
        ("let rec @[instance 10] aux : N := N.z; aux", True),
        ("f [a, b] -- @[init]", False),
    ],
)
def test_attribute_constructs_are_forbidden_only_as_attributes(body: str, forbidden: bool) -> None:
    assert bool(forbidden_constructs(body)) is forbidden, forbidden_constructs(body)


SANDBOX_HELPER = """
import socket, sys
target, port = sys.argv[1], int(sys.argv[2])
results = []
for path in (target + "/inside.txt", target + "/../outside.txt"):
    try:
        open(path, "w").write("x"); results.append("write-ok")
    except OSError:
        results.append("write-blocked")
try:
    socket.create_connection(("127.0.0.1", port), timeout=2); results.append("net-ok")
except OSError:
    results.append("net-blocked")
print(" ".join(results))
"""


@pytest.mark.skipif(sandbox_tools()["bwrap"] is None, reason="bwrap not installed")
def test_the_sandbox_blocks_writes_outside_the_session_dir_and_network(tmp_path: Path) -> None:
    session_dir = tmp_path / "session"
    session_dir.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        # Launched exactly like Lean: the same wrapper, then the program.
        argv = [
            *sandbox_wrapper(SandboxPolicy(writable=(session_dir,))),
            sys.executable,
            "-c",
            SANDBOX_HELPER,
            str(session_dir),
            str(port),
        ]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    finally:
        listener.close()
    assert out.stdout.split() == ["write-ok", "write-blocked", "net-blocked"]
    assert not (tmp_path / "outside.txt").exists()
    # Control: without the sandbox the same helper can do both.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        free = subprocess.run(
            [
                sys.executable,
                "-c",
                SANDBOX_HELPER,
                str(session_dir),
                str(listener.getsockname()[1]),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    finally:
        listener.close()
    assert free.stdout.split() == ["write-ok", "write-ok", "net-ok"]


@pytest.mark.skipif(sandbox_tools()["bwrap"] is None, reason="bwrap not installed")
def test_code_in_the_sandbox_cannot_remount_it_writable(tmp_path: Path) -> None:
    """No capability is left, so `mount -o remount,rw,bind /` fails, run as root or not."""
    session_dir = tmp_path / "session"
    session_dir.mkdir()
    outside = tmp_path / "outside.txt"
    script = (
        f"mount -o remount,rw,bind / 2>/dev/null; umount {tmp_path} 2>/dev/null; "
        f"echo x > {outside} 2>/dev/null; grep CapEff /proc/self/status"
    )
    argv = [*sandbox_wrapper(SandboxPolicy(writable=(session_dir,))), "sh", "-c", script]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert not outside.exists(), out
    assert out.stdout.split()[-1] == "0000000000000000", out.stdout  # no capability left


def test_the_sandbox_programs_come_from_the_system_and_are_looked_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not from an agent's directory placed early on PATH."""
    from repl_pool import sandbox_program

    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("prlimit", "bwrap"):
        (fake / name).write_text("#!/bin/sh\nexit 0\n")
        (fake / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ.get('PATH', '')}")
    sandbox_program.cache_clear()
    try:
        prefix = sandbox_wrapper(SandboxPolicy(writable=(tmp_path,)))
        assert prefix and not any(part.startswith(str(fake)) for part in prefix), prefix
        found = sandbox_program("prlimit")
        assert found is not None and not found.startswith(str(fake))
    finally:
        sandbox_program.cache_clear()


def test_bwrap_is_used_only_when_it_works(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import repl_pool.sandbox as sandbox

    # A bwrap that exists but cannot create namespaces (as in some containers and CI runners).
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("LEANRIG_BWRAP", str(fake))
    sandbox._working_bwrap.cache_clear()
    sandbox.sandbox_program.cache_clear()
    try:
        assert sandbox.sandbox_tools()["bwrap"] is None
        prefix = sandbox.sandbox_wrapper(SandboxPolicy())
        assert str(fake) not in prefix and "--unshare-all" not in prefix
        out = subprocess.run([*prefix, "true"], capture_output=True, check=False, timeout=10)
        assert out.returncode == 0  # rlimits only, still runs
    finally:
        monkeypatch.delenv("LEANRIG_BWRAP")
        sandbox._working_bwrap.cache_clear()
        sandbox.sandbox_program.cache_clear()


@pytest.mark.parametrize(
    "body",
    [
        "by\n  set_option «debug».skipKernelTC true in\n  exact h",
        "by\n  set_option\n    debug.skipKernelTC true in exact h",
        "by «native_decide»",
        "by\n  open  private foo in exact h",
        "by run_tac\n  pure ()",
        "h\n#«exit»",
    ],
)
def test_forbidden_constructs_see_through_escapes_and_whitespace(body: str) -> None:
    """An escaped name (`set_option «debug».skipKernelTC`) or extra whitespace is still found."""
    assert forbidden_constructs(body), body


def _escaped(word: str, draw: Any) -> str:
    """``word`` as Lean may spell it: any dotted part of an identifier in «»."""
    if not word or not (word[0].isalpha() or word[0] == "_"):
        return word
    parts = word.split(".")
    return ".".join(f"«{p}»" if p and draw(st.booleans()) else p for p in parts)


@st.composite
def _bodies(draw: Any) -> str:
    """Forbidden constructs, escaped or not, cut short or in comments or strings, and noise."""
    out = []
    for _ in range(draw(st.integers(0, 4))):
        construct = draw(st.sampled_from([*FORBIDDEN, "set_option debug.skipKernelTC"]))
        words = [w for w in construct.split(" ")]
        if words[0].startswith("#"):
            words = ["#" + _escaped(words[0][1:], draw)]
        else:
            words = [_escaped(w, draw) for w in words]
        text = draw(st.sampled_from([" ", "\n  ", "  "])).join(words)
        cut = draw(st.integers(0, len(text)))
        text = draw(st.sampled_from([text, text[:cut], f"-- {text}\n", f'"{text}"', f"x{text}"]))
        noise = draw(st.sampled_from(["", " h", "\n", " by ", " /- c -/ ", "'"]))
        out.append(text + noise)
    return "".join(out)


@given(_bodies())
@settings(max_examples=500, deadline=None)
def test_forbidden_constructs_prefilter_finds_what_the_full_scan_finds(body: str) -> None:
    """Scanning only for constructs whose words occur gives the same reasons as scanning for all."""
    assert forbidden_constructs(body) == _forbidden_in_code(body, FORBIDDEN)


BROKEN_WRAPPED = """prelude
import Demo.Basic

namespace Demo

theorem helperAx (p : Prop) (h : p) : p := h

end Demo

namespace W

open Demo in
theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false

theorem after (p : Prop) (h : p) : p := helperAx p h

end W
"""


async def test_a_compile_error_says_whether_it_is_in_the_proof_body(tmp_path: Path) -> None:
    """Outside the body for a task file that does not compile by itself; in it for a wrong proof."""
    suite_dir = demo_with_tasks(tmp_path / "suite", {"w": ("W.lean", "W.main", BROKEN_WRAPPED)})
    suite = load_suite(suite_dir)
    verifier = verifier_for(suite)
    task = suite.task("w")
    proof = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"
    verdict = await verifier.verify(task, task.with_body(proof))
    assert not verdict.accepted
    assert any(
        r.startswith("compilation failed at 16:")
        and "outside the proof body" in r
        and "helperAx" in r
        for r in verdict.reasons
    ), verdict.reasons
    wrong = await verifier.verify(task, task.with_body("\n  h"))
    assert any(
        r.startswith("compilation failed at 14:3 (in the proof body)") for r in wrong.reasons
    ), wrong.reasons


async def test_an_error_lean_reports_on_the_declaration_is_said_to_be_the_proof_s(
    tmp_path: Path,
) -> None:
    """A recursive body's termination error, reported at the theorem's name, is the proof's."""
    verifier = verifier_for(DEMO)
    task = DEMO.task("and_swap")
    verdict = await verifier.verify(task, task.with_body("\n  main p q h"))
    assert not verdict.accepted
    assert any(
        "7:9 (on the target theorem's declaration, not its statement" in r for r in verdict.reasons
    ), verdict.reasons
    assert not any("task file's own text" in r for r in verdict.reasons), verdict.reasons


def test_the_declaration_s_own_errors_are_told_from_its_statement_s() -> None:
    """Errors at the theorem's name or doc comment are the proof's; an error in the statement is
    the task file's."""
    text = "def a := 1\n/- plain -/\n/-- doc -/\ntheorem t (h : T) : T :=\n  x\n"
    head = declaration_head(text, text.index("theorem"))
    assert head == (text.index("/-- doc"), text.index(" (h"))
    plain = "def a := 1\n/-- doc of a -/ def b := 2\n/- plain -/\ntheorem t : T :=\n  x\n"
    assert declaration_head(plain, plain.index("theorem"))[0] == plain.index("theorem")
    body = (text.index(":=\n") + 2, len(text) - 1)

    def reason(line: int, column: int) -> str:
        errors = [{"severity": "error", "pos": {"line": line, "column": column}, "data": "bad"}]
        return compile_failure(errors, text, *body, head)

    assert reason(3, 0).startswith("compilation failed at 3:1 (on the target theorem's decl")
    assert reason(4, 8).startswith("compilation failed at 4:9 (on the target theorem's decl")
    assert "task file's own text" in reason(4, 11)  # `h : T`: the statement
    assert reason(5, 2).endswith("(in the proof body): bad")


BROKEN_PLAIN = """prelude
import Demo.Basic

namespace P

theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false

theorem after (p : Prop) (h : p) : p := missingLemma p h

end P
"""


async def test_a_parse_stage_error_also_says_whether_it_is_in_the_proof_body(
    tmp_path: Path,
) -> None:
    """As above, for a target without `… in` wrappers, whose errors the parse stage reports."""
    suite_dir = demo_with_tasks(tmp_path / "suite", {"p": ("P.lean", "P.main", BROKEN_PLAIN)})
    suite = load_suite(suite_dir)
    verifier = verifier_for(suite)
    task = suite.task("p")
    proof = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"
    verdict = await verifier.verify(task, task.with_body(proof))
    assert not verdict.accepted
    assert "error(s); first at 9:41 (outside the proof body" in verdict.reasons[0], verdict.reasons
    wrong = await verifier.verify(task, task.with_body("\n  h"))
    assert "first at 7:3 (in the proof body)" in wrong.reasons[0], wrong.reasons


PRIVATE_IN_STATEMENT = """prelude
import Exploit.Basic

namespace Exploit.Ünï

private def same.{v} {β : Sort v} (b : β) : β := b

/-- The statement names a private declaration of the task file. -/
theorem «symm ∀».{w} {α : Sort w} {a b : α} (h : @Eq α a b) : @Eq α (same b) a :=
  sorryAx (@Eq α (same b) a) Bool.false

end Exploit.Ünï
"""


async def test_a_statement_naming_a_private_declaration_is_judged_the_same(
    tmp_path: Path,
) -> None:
    """The same for the original and the submission, though private names carry the module's."""
    verifier, task = exploit_suite_with(tmp_path, "private", PRIVATE_IN_STATEMENT)
    verdict = await verifier.verify(task, task.with_body("\n  " + SYMM))
    assert verdict.accepted, verdict.reasons
    assert not (await verifier.verify(task, task.text)).accepted


async def test_a_difference_after_the_body_is_placed_where_it_is(
    exploit_verifier: Verifier,
) -> None:
    """Tampering after the body is placed at its last difference, not at the body's start."""
    task = EXPLOITS.task("true")
    tampered = task.with_body("\n  True.intro").replace(
        "theorem after : True := True.intro", "theorem after : True := sorryAx True Bool.false"
    )
    line = tampered[: tampered.index("theorem after")].count("\n") + 1
    verdict = await exploit_verifier.verify(task, tampered)
    assert not verdict.accepted
    (reason,) = [r for r in verdict.reasons if "outside the proof body differs" in r]
    assert f"after the proof body: last difference near {line}:" in reason, reason
    appended = task.with_body("\n  True.intro") + "\naxiom cheat : False\n"
    verdict = await exploit_verifier.verify(task, appended)
    last = appended.rstrip("\n").count("\n") + 1
    assert any(f"last difference near {last}:" in r for r in verdict.reasons), verdict.reasons


async def test_the_bootstraps_setup_artefact_is_not_counted_and_alone_is_explained() -> None:
    """ "internal exception #3" beside a real error, and a body of only `sorry`."""
    suite = load_suite(ROOT / "lean_project" / "suites" / "demo")
    verifier, task = verifier_for(suite), suite.task("and_swap")
    wrong = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"
    verdict = await verifier.verify(task, task.with_body(wrong))
    assert not verdict.accepted
    assert any("Lean reports 1 error(s)" in r for r in verdict.reasons), verdict.reasons
    verdict = await verifier.verify(task, task.with_body("\n  sorry"))
    assert not verdict.accepted
    assert any("`sorry` is one such proof" in r for r in verdict.reasons), verdict.reasons


def test_a_sandbox_program_the_operator_named_must_exist(tmp_path: Path) -> None:
    """A missing `LEANRIG_BWRAP` file stops `leanrig doctor` with status 2, naming the variable."""
    env = {**os.environ, "LEANRIG_BWRAP": str(tmp_path / "nonexistent")}
    leanrig = Path(sys.executable).with_name("leanrig")
    done = subprocess.run(
        [str(leanrig), "doctor"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"LEANRIG_BWRAP={tmp_path / 'nonexistent'} is not an executable file" in done.stderr
