"""tests/fixtures/corpus through the commands a user types: `suite import|check|lint`, `run` with
the search agent, `check` of its submission, and a human attempt via `edit` and `lsp`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_tools.editor import TaskScope
from agent_tools.tasks import load_suite

from .test_as_typed import leanrig, leanrig_exe, sandbox_or_skip
from .test_as_typed_editor import leave, lsp_session
from .test_editor_proxy import body_edit, errors, lines

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus" / "core"
# Closed by `rfl` in their own scope.
SOLVABLE = (
    "frac_zero_num_task",
    "Core.Time.Clock62.lift_down_task",
    "Core.Data.Cell28.Cell.first_eq_task",
)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the corpus (`core/`) and the suite imported from it (`suites/core`)."""
    cwd = tmp_path_factory.mktemp("corpus-runs")
    shutil.copytree(CORPUS, cwd / "core")
    done = leanrig("suite", "import", "core", "--out", "suites/core", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return cwd


def test_the_corpus_imports_checks_lints_and_runs_as_typed(imported: Path) -> None:
    sandbox_or_skip()
    tmp_path = imported
    done = leanrig("suite", "check", "suites/core", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "22 of 22 task(s) ok"
    done = leanrig("suite", "lint", "suites/core", "--json", cwd=tmp_path)
    findings = json.loads(done.stdout)["findings"]
    trivial = {f["task"] for f in findings if f["code"] == "trivial-target"}
    assert set(SOLVABLE) <= trivial, trivial

    agent = f"{leanrig_exe()} agent search --mcp-config {{mcp_config}}"
    done = leanrig(
        "run",
        "--suite",
        "suites/core",
        "--agent",
        agent,
        "--tasks",
        ",".join(SOLVABLE),
        "--time-limit",
        "120",
        "--parallel",
        "2",
        "--out",
        "runs/search",
        "--quiet",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = [
        json.loads(x) for x in (tmp_path / "runs/search/results.jsonl").read_text().splitlines()
    ]
    verdicts = {r["task"]: r["accepted"] for r in results}
    assert verdicts == dict.fromkeys(SOLVABLE, True), [(r["task"], r["reasons"]) for r in results]

    task = SOLVABLE[0]
    submitted = tmp_path / "runs/search/attempts" / task / "1" / "workspace" / "Submission.lean"
    shutil.copy(submitted, tmp_path / "Submission.lean")
    done = leanrig(
        "check", "--suite", "suites/core", "--task", task, "Submission.lean", cwd=tmp_path
    )
    assert done.returncode == 0 and done.stdout.startswith("ACCEPTED"), done.stdout + done.stderr


@pytest.mark.anyio
async def test_a_human_attempt_at_a_corpus_task_in_an_editor(imported: Path) -> None:
    """A task whose body is on the statement's line: the typed proof is accepted and the results
    line written after the editor leaves."""
    sandbox_or_skip()
    tmp_path = imported
    task_id = "Core.Geometry.Vec1.add_zero_dx_task"
    done = leanrig(
        "edit", "--suite", "suites/core", "--task", task_id, "--workspace", "attempt", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    task = load_suite(tmp_path / "suites" / "core").task(task_id)
    lsp = lsp_session(tmp_path, "--workspace", "attempt", task=task_id, suite="suites/core")
    async with lsp as editor:
        await editor.initialize(tmp_path / "attempt")
        uri = await editor.open(tmp_path / "attempt" / task.spec.file, task.text)
        assert errors(await editor.diagnostics_for(uri, 1)) == []
        version = await editor.change(uri, body_edit(editor.texts[uri], TaskScope(task), " rfl"))
        assert errors(await editor.diagnostics_for(uri, version)) == []
        verdict = await editor.request(
            "workspace/executeCommand", {"command": "leanrig.checkProof", "arguments": [uri]}
        )
        assert verdict["result"]["accepted"] is True, verdict
        assert await leave(editor) == 0
    (result,) = lines(tmp_path / "attempt" / "run" / "results.jsonl")
    assert (result["task"], result["accepted"], result["condition"]) == (task_id, True, "human")
