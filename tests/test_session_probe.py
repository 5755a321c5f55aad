"""The session's `#print axioms` probe and expected-type learning against the real bootstrap
Lean: `#exit` in every form, full axiom names, tactics leaving Lean's axioms unnamed."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from agent_tools.servers import ServeOptions, open_service
from agent_tools.sessions import ProofService
from agent_tools.sessions.elaborate import Elaborator
from agent_tools.tasks import load_suite

from .suites import demo_with_tasks
from .test_prefix import padding

pytestmark = pytest.mark.anyio
DEMO = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "demo"
AND_SWAP_GOAL = "p q : Prop\nh : And p q\n⊢ And q p"
PROOF = "@And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


def _exit_task(count: int, tail: str, newline: str = "\n") -> str:
    """A probed task file, ``count`` commands before the target and ``tail`` with `#exit` after."""
    text = (
        "prelude\nimport Demo.Basic\n\nnamespace Bx\n\naxiom cheat : False\n\n"
        + padding(count)
        + "theorem main (p q : Prop) (h : And p q) : And q p :=\n  sorryAx (And q p) Bool.false\n"
        + tail
    )
    return text.replace("\n", newline)


EXIT_TASKS = {
    # `#exit` indented: Lean stops there as well
    "indented": _exit_task(3, "\nend Bx\n  #exit\nnever read\n"),
    "same_line": _exit_task(3, "\nend Bx #exit\nnever read\n"),
    # a prefix module (47 commands before the target) and a `#exit`
    "prefix": _exit_task(45, "\nend Bx\n\n#exit\n\nnever read\n"),
    "prefix_tight": _exit_task(45, "#exit"),  # right after the target, no newline at EOF
    "prefix_crlf": _exit_task(45, "\nend Bx\n\n#exit\n\nnever read\n", newline="\r\n"),
}


@pytest.fixture
async def exit_service(tmp_path: Path) -> AsyncIterator[ProofService]:
    suite = demo_with_tasks(
        tmp_path / "suite",
        {task_id: (f"X_{task_id}.lean", "Bx.main", text) for task_id, text in EXIT_TASKS.items()},
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        yield service


@pytest.mark.parametrize(
    ("task_id", "mode", "error_line"),
    [
        ("indented", "file", 12),
        ("same_line", "file", 12),
        ("prefix", "prefix", 54),
        ("prefix_tight", "prefix", 54),
        ("prefix_crlf", "prefix", 54),
    ],
)
async def test_a_probed_file_with_exit_after_the_target_completes_in_every_form(
    exit_service: ProofService, task_id: str, mode: str, error_line: int
) -> None:
    """Positions, parse error and axiom warning as in the plain file."""
    service = exit_service
    opened = await service.open_task(task_id)
    assert opened.mode == mode, opened.mode_reason
    sid = opened.session_id
    done = await service.set_proof(sid, f"\n  {PROOF}")
    assert done.complete, done.diagnostics
    assert (await service.check_proof(sid)).accepted
    cheat = await service.set_proof(sid, "\n  @False.rec (fun _ => And q p) cheat")
    assert not cheat.complete
    assert any("Bx.cheat" in d.message for d in cheat.diagnostics), cheat.diagnostics
    wrong = await service.set_proof(sid, "\n  h")
    assert not wrong.complete and wrong.diagnostics[0].line == error_line, wrong.diagnostics
    unclosed = await service.set_proof(sid, f"\n  ({PROOF}")
    messages = [d.message for d in unclosed.diagnostics]
    assert not unclosed.complete and not any("#print" in m for m in messages), messages
    if task_id == "prefix_tight":
        assert any(m.startswith("unexpected token '#exit'") for m in messages), messages


def test_exit_after_finds_the_command_wherever_it_stands() -> None:
    from agent_tools.tasks import exit_after

    text = 'theorem t : T := x\n/- #exit -/ -- #exit\ndef s := "#exit"\n#exitfoo\nend A  #exit\n'
    assert exit_after(text, 0) == text.index("  #exit") + 2
    assert exit_after("theorem t : T := x\n#exit", 0) == len("theorem t : T := x\n")
    assert exit_after("def a := x\n-- #exit\n", 0) is None


@pytest.mark.parametrize(
    "operand", ["@And.intro q p ▸ h", "@And.intro p q |>.rec", "@And.intro q p h.2 h.1 ▸ h"]
)
async def test_an_explicit_application_used_as_an_operand_teaches_no_expected_type(
    tmp_path: Path, operand: str
) -> None:
    """`@f x ▸ e`: the task's statement is shown, now and later."""
    # The task file's own body teaches nothing, so the first incomplete step's answer is learned.
    suite = tmp_path / "suite"
    shutil.copytree(DEMO, suite)
    swap = suite / "Demo" / "AndSwap.lean"
    swap.write_text(
        swap.read_text(encoding="utf-8").replace(
            "sorryAx (And q p) Bool.false", "(fun x => x) (sorryAx (And q p) Bool.false)"
        ),
        encoding="utf-8",
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("and_swap")).session_id
        task = service.suite.task("and_swap")
        assert (await service.elaborator.memo(task)).expected is None
        first = await service.set_proof(sid, f"\n  {operand}")
        assert not first.complete
        assert all("∀" not in g for g in first.goals), first.goals
        later = await service.set_proof(sid, "\n  h")
        assert later.goals == [AND_SWAP_GOAL]
        # a whole explicit application still teaches it
        whole = await service.set_proof(sid, "\n  @And.intro q p h h")
        assert whole.goals == [AND_SWAP_GOAL]


@pytest.mark.parametrize(
    "body",
    ["\n  by decide +native", "\n  by decide (config := {native := true})", "\n  by bv_decide"],
)
def test_tactics_that_leave_lean_s_own_axioms_unnamed_get_the_probe(body: str) -> None:
    """`decide +native` and `bv_decide` use `Lean.ofReduceBool` without naming it."""
    task = load_suite(DEMO).task("and_swap")
    elaborator = Elaborator(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        1.0,
        allowed_axioms=["propext", "Classical.choice", "Quot.sound"],
    )
    memo = anyio.run(elaborator.memo, task)
    assert not elaborator._probed(task, memo, task.with_body("\n  h"))
    # a word, not a substring: `Alternative` is no native tactic
    assert not elaborator._probed(task, memo, task.with_body("\n  -- an alternative proof\n  h"))
    assert elaborator._probed(task, memo, task.with_body(body))


OPEN_TASK = """prelude
import Demo.Basic

axiom Classical.choice (p : Prop) : p

theorem helper (p : Prop) : p := sorryAx p Bool.false

open Classical

namespace Bx

theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false
"""


@pytest.mark.parametrize("tail", ["\nend Bx\n", "", "\nend Bx\n\n#exit\n"])
async def test_the_probe_reads_axiom_names_in_full_whatever_the_file_opens(
    tmp_path: Path, tail: str
) -> None:
    """`open Classical` or an unclosed namespace does not shorten an allowed axiom's name."""
    suite = demo_with_tasks(
        tmp_path / "suite", {"open": ("Open.lean", "Bx.main", OPEN_TASK + tail)}
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("open")).session_id
        step = await service.set_proof(sid, "\n  Classical.choice (And q p)")
        assert step.complete, step.diagnostics
        assert (await service.check_proof(sid)).accepted
        through = await service.set_proof(sid, "\n  helper (And q p)")
        assert not through.complete
        unclosed = await service.set_proof(sid, f"\n  ({PROOF}")
        messages = [d.message for d in unclosed.diagnostics]
        assert not any("#print" in m or "set_option" in m for m in messages), messages


SET_OPTION_AFTER = """prelude
import Demo.Basic

theorem helper (p : Prop) : p := sorryAx p Bool.false

theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false

set_option pp.all true
"""


async def test_a_parse_error_naming_the_task_file_s_own_command_is_left_as_lean_said(
    tmp_path: Path,
) -> None:
    """The probe starts with a `set_option` too."""
    suite = demo_with_tasks(
        tmp_path / "suite", {"setopt": ("SetOpt.lean", "main", SET_OPTION_AFTER)}
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("setopt")).session_id
        unclosed = await service.set_proof(sid, f"\n  ({PROOF}")
        messages = [d.message for d in unclosed.diagnostics]
        assert any(m.startswith("unexpected token 'set_option'") for m in messages), messages
        assert (await service.set_proof(sid, f"\n  {PROOF}")).complete
