"""The corpus (tests/fixtures/corpus: a core-style prelude, a 6,000-line library over it, and
tasks in the styles real files use) through the commands a user types, from a temporary
directory with relative paths: `suite import`, `suite check`, `suite lint`, `leanrig run` with
the search agent, and `leanrig check` of what the run submitted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .test_as_typed import leanrig, leanrig_exe, sandbox_or_skip

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus" / "core"
# Closed by `rfl` in their own scope: names from the theorem's namespace, `open … in`, a
# universe-polymorphic lift, a `match` definition, a body on the statement's line.
SOLVABLE = ("Core.Geometry.Vec1.Vec.swap_swap_task", "frac_zero_num_task",
            "Core.Time.Clock62.lift_down_task", "Core.Data.Cell28.Cell.first_eq_task",
            "Core.Geometry.Vec1.add_zero_dx_task")  # fmt: skip


def test_the_corpus_imports_checks_lints_and_runs_as_typed(tmp_path: Path) -> None:
    sandbox_or_skip()
    shutil.copytree(CORPUS, tmp_path / "core")
    done = leanrig("suite", "import", "core", "--out", "suites/core", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    done = leanrig("suite", "check", "suites/core", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "22 of 22 task(s) ok"
    done = leanrig("suite", "lint", "suites/core", "--json", cwd=tmp_path)
    findings = json.loads(done.stdout)["findings"]
    trivial = {f["task"] for f in findings if f["code"] == "trivial-target"}
    assert set(SOLVABLE) <= trivial, trivial

    agent = f"{leanrig_exe()} agent search --mcp-config {{mcp_config}}"
    done = leanrig("run", "--suite", "suites/core", "--agent", agent, "--tasks",
                   ",".join(SOLVABLE), "--time-limit", "120", "--parallel", "2", "--out",
                   "runs/search", "--quiet", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = [
        json.loads(x) for x in (tmp_path / "runs/search/results.jsonl").read_text().splitlines()
    ]
    verdicts = {r["task"]: r["accepted"] for r in results}
    assert verdicts == dict.fromkeys(SOLVABLE, True), [(r["task"], r["reasons"]) for r in results]

    # The run's submission, judged again by `leanrig check` as a user would.
    task = SOLVABLE[0]
    submitted = tmp_path / "runs/search/attempts" / task / "1" / "workspace" / "Submission.lean"
    shutil.copy(submitted, tmp_path / "Submission.lean")
    done = leanrig("check", "--suite", "suites/core", "--task", task, "Submission.lean",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("ACCEPTED"), done.stdout + done.stderr
