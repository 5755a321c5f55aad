"""Statement tasks under `leanrig run`, as a user types it (a subprocess from a temporary
directory holding the claims suite at its repository path, relative paths, the sandbox on):
the scripted agent writes candidate statements from the claims suite's replay plan, and each
attempt's results line carries its statement and the equivalence grade; a hostile agent tries
every tool and the file system for the hidden reference, and finds none of it."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

from agent_tools.tasks import load_suite, reference_statement

from .test_as_typed import leanrig, leanrig_exe, sandbox_or_skip

ROOT = Path(__file__).resolve().parent.parent
CLAIMS = ROOT / "lean_project" / "suites" / "claims"
SUITE = "lean_project/suites/claims"
# Equivalent as written (binders renamed and sides swapped; a definition unfolded), wrong (zero
# on the other side), and a near miss (a hypothesis dropped: only one direction holds).
TASKS = {"add_comm": True, "succ_ne_zero": True, "add_zero": False, "eq_trans": False}


def user_dir(root: Path) -> Path:
    sandbox_or_skip()
    shutil.copytree(CLAIMS, root / SUITE)
    plan = json.loads((CLAIMS / "replay-plan.json").read_text(encoding="utf-8"))
    # The scripted agent plays the replay model's plan without its final words.
    scripted = {t: [s for s in steps if "say" not in s] for t, steps in plan["tasks"].items()}
    (root / "plan.json").write_text(json.dumps({"tasks": scripted}), encoding="utf-8")
    return root


def results(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["task"]: r for r in map(json.loads, lines)}


def test_a_statement_run_grades_each_statement_against_its_reference(tmp_path: Path) -> None:
    cwd = user_dir(tmp_path)
    agent = f"{leanrig_exe()} agent scripted --plan {cwd / 'plan.json'} --mcp-config " + (
        "{mcp_config} --task {task}"
    )
    done = leanrig("run", "--suite", SUITE, "--tasks", ",".join(TASKS), "--agent", agent,
                   "--model", "none", "--parallel", "2", "--out", "runs/claims",
                   cwd=cwd)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = results(cwd / "runs" / "claims")
    assert {t: r["accepted"] for t, r in got.items()} == TASKS
    for task, r in got.items():
        assert r["kind"] == "statement" and r["statement"], r
        grade = r["equivalence"]
        assert grade["portfolio"] and grade["outcome"] in ("equivalent", "not_equivalent")
        if TASKS[task]:
            for direction in (grade["forward"], grade["backward"]):
                assert direction["outcome"] == "proved" and direction["proof"], direction
        else:
            assert r["reasons"] and "not shown equivalent" in r["reasons"][0], r
    # The near miss: the dropped hypothesis makes the candidate stronger; the grader shows the
    # one direction that holds, and not the other.
    near = got["eq_trans"]["equivalence"]
    assert {near["forward"]["outcome"], near["backward"]["outcome"]} == {"proved", "not_shown"}
    # The report gives the statement tasks' own metrics: their equivalence rate.
    report = leanrig("report", "runs/claims", "--no-plots", cwd=cwd)
    assert report.returncode == 0, report.stderr
    assert "### Statements (autoformalization)" in report.stdout
    assert "4 attempt(s), 2 verified (equivalence rate over attempts 50.0%)" in report.stdout
    kinds = json.loads((cwd / "runs/claims/report/report.json").read_text())["by_kind"]
    assert set(kinds) == {"statement"} and kinds["statement"]["accepted"] == 2


def call(tool: str, **args: Any) -> dict[str, Any]:
    """A plan step of ``tool`` in the session, whatever it answers."""
    return {"tool": tool, "args": {"session_id": "{session}", **args}, "expect": "any"}


NAMES = ("Claims.AddComm.leanrig_reference", "leanrig_reference", "reference",
         "Claims.AddComm.main")  # fmt: skip
HOSTILE_PLAN = {
    "calls": [
        {"tool": "open_task", "args": {"task_id": "{task}"}},
        call("get_outline"),
        *(call("get_declaration", name=name) for name in NAMES),
        call("check_term", in_context=False, term="@Claims.AddComm.leanrig_reference"),
        call("get_completions", line=None, column=None, prefix="Claims.AddComm."),
        call("set_statement", statement=" (m n : N) : Eq (N.add m n) m"),
        call("check_statement"),
        call("set_statement", statement=" : type_of% @Claims.AddComm.leanrig_reference"),
        call("check_statement"),
        call("get_proof_state"),
        call("get_timings"),
    ]
}


def test_a_hostile_agent_reads_nothing_of_the_reference(tmp_path: Path) -> None:
    cwd = user_dir(tmp_path)
    (cwd / "hostile.json").write_text(json.dumps(HOSTILE_PLAN), encoding="utf-8")
    suite = (cwd / SUITE).resolve()
    # The paths are the script's own, not its command line's: a command naming a hidden file
    # sees it (a user's agent script may live beside the solutions), a model cannot name one.
    # (Not all of /tmp: the script's directory there is shown to it, with earlier tests' copies
    # of the suite beside it, which no run hides.)
    script = cwd / "hostile.sh"
    script.write_text(
        f"""out="$1/fs.txt"
for f in {shlex.quote(str(suite))}/References/* {shlex.quote(str(suite))}/suite.toml; do
  cat "$f" >> "$out" 2>&1
done
ls -laR {shlex.quote(str(suite))} >> "$out" 2>&1
grep -rn 'N.add m n' {shlex.quote(str(suite))} "$HOME" >> "$out" 2>&1
exec "$2" agent scripted --plan "$3" --mcp-config "$4" --task "$5"
""",
        encoding="utf-8",
    )
    agent = shlex.join(["sh", str(script), "{workspace}", str(leanrig_exe()),
                        str(cwd / "hostile.json"), "{mcp_config}", "{task}"])  # fmt: skip
    done = leanrig("run", "--suite", SUITE, "--tasks", "add_comm", "--agent", agent,
                   "--model", "none", "--out", "runs/hostile", cwd=cwd)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    workspace = cwd / "runs" / "hostile" / "attempts" / "add_comm" / "1" / "workspace"
    transcript = (workspace / "transcript.jsonl").read_text(encoding="utf-8")
    assert transcript.count("\n") >= len(HOSTILE_PLAN["calls"])  # every call was made
    seen = transcript + (workspace / "fs.txt").read_text(encoding="utf-8", errors="replace")
    task = load_suite(CLAIMS).task("add_comm")
    reference = reference_statement(
        load_suite(CLAIMS).reference_path(task).read_text(encoding="utf-8")
    )
    assert " ".join(reference.split()) not in " ".join(seen.split())
    assert "(N.add m n) (N.add n m)" not in seen and "N.add n m" not in seen


def test_equiv_grades_a_candidate_file_against_a_tasks_reference(tmp_path: Path) -> None:
    cwd = user_dir(tmp_path)
    task_file = cwd / SUITE / "Claims" / "AddComm.lean"
    text = task_file.read_text(encoding="utf-8")
    right = text.replace("theorem main : True :=", "theorem main (a b : N) : Eq (N.add b a) "
                         "(N.add a b) :=")  # fmt: skip
    wrong = text.replace("theorem main : True :=", "theorem main (a : N) : Eq (N.add a N.z) a :=")
    (cwd / "Right.lean").write_text(right, encoding="utf-8")
    (cwd / "Wrong.lean").write_text(wrong, encoding="utf-8")
    done = leanrig("equiv", "--suite", SUITE, "--task", "add_comm", "Right.lean", cwd=cwd)
    assert done.returncode == 0 and done.stdout.startswith("ACCEPTED"), done.stdout + done.stderr
    done = leanrig("equiv", "--suite", SUITE, "--task", "add_comm", "Wrong.lean", "--json",
                   cwd=cwd)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    graded = json.loads(done.stdout)
    assert not graded["accepted"] and graded["equivalence"]["outcome"] == "not_equivalent"


def test_a_statement_and_proof_attempt_needs_both(tmp_path: Path) -> None:
    """A `statement_and_proof` task: accepted when the attempt's own statement is proved and
    equivalent to the reference; a right statement with no proof is not."""
    cwd = user_dir(tmp_path)
    manifest = cwd / SUITE / "suite.toml"
    text = manifest.read_text(encoding="utf-8")
    for task in ("and_comm", "or_comm"):
        text = text.replace(f'id = "{task}"\nkind = "statement"',
                            f'id = "{task}"\nkind = "statement_and_proof"')  # fmt: skip
    manifest.write_text(text, encoding="utf-8")

    def steps(statement: str, body: str | None) -> list[dict[str, Any]]:
        proof = [call("set_proof", body=body)] if body else []
        return [{"tool": "open_task", "args": {"task_id": "{task}"}},
                call("set_statement", statement=statement), *proof]  # fmt: skip

    plan = {"tasks": {
        "and_comm": steps(" (q p : Prop) (h : And q p) : And p q", "\n  And.intro h.right h.left"),
        "or_comm": steps(" (p q : Prop) (h : Or q p) : Or p q", None),
    }}  # fmt: skip
    (cwd / "both.json").write_text(json.dumps(plan), encoding="utf-8")
    agent = f"{leanrig_exe()} agent scripted --plan {cwd / 'both.json'} --mcp-config " + (
        "{mcp_config} --task {task}"
    )
    done = leanrig("run", "--suite", SUITE, "--tasks", "and_comm,or_comm", "--agent", agent,
                   "--model", "none", "--out", "runs/both", cwd=cwd)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = results(cwd / "runs" / "both")
    assert got["and_comm"]["accepted"], got["and_comm"]["reasons"]
    assert got["and_comm"]["equivalence"]["outcome"] == "equivalent"
    assert not got["or_comm"]["accepted"]  # the placeholder proof: sorry
    assert got["or_comm"]["equivalence"]["outcome"] == "equivalent"
    assert any("sorry" in r for r in got["or_comm"]["reasons"]), got["or_comm"]["reasons"]
