"""Claude Code and Codex write statements: docs/runs.md's block (`leanrig suite check` of the
claims suite, the replay model playing the suite's own plan, `leanrig run --harness
claude-code|codex --model replay`, `leanrig report`) run verbatim by bash from a user's
directory; each harness's candidates are graded against the hidden references, the report
gives the statement tasks' equivalence rate, and each run (its model I/O recorded: the replay
model's default) exports to an Inspect log. Where node or a harness is missing, skipped and
said."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .conftest import stray_guard
from .test_as_typed import leanrig, sandbox_or_skip
from .test_harness_runs import HARNESSES, harnesses_or_skip
from .test_statement_runs import CLAIMS, SUITE

ROOT = Path(__file__).resolve().parent.parent
TASKS = {"add_comm": True, "add_zero": False}  # docs/runs.md's block: the candidates' verdicts


def test_the_runs_page_statement_block_runs_as_typed_through_both_harnesses(
    tmp_path: Path,
) -> None:
    sandbox_or_skip()
    harnesses_or_skip()
    cwd = tmp_path
    shutil.copytree(CLAIMS, cwd / SUITE)
    (cwd / ".venv").symlink_to(ROOT / ".venv")
    page = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "claims" in b)
    with stray_guard():
        done = subprocess.run(["bash", "-e", "-c", block], cwd=cwd, capture_output=True,
                              text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "12 of 12 task(s) ok" in done.stdout  # suite check
    assert "(equivalence rate over attempts 50.0%)" in done.stdout  # the page says so
    for harness in HARNESSES:
        run = cwd / "runs" / f"claims-{harness}"
        lines = (run / "results.jsonl").read_text().splitlines()
        got = {r["task"]: r for r in map(json.loads, lines)}
        assert {t: r["accepted"] for t, r in got.items()} == TASKS, harness
        for r in got.values():
            assert r["kind"] == "statement" and r["model_calls"] and r["equivalence"], r
            # The harness's own session log, kept in the attempt's fresh home.
            home = run / "attempts" / r["task"] / "1" / "home"
            logs = [*home.glob(".claude/projects/*/*.jsonl"),
                    *home.glob(".codex/sessions/**/rollout-*.jsonl")]  # fmt: skip
            assert logs and all(p.stat().st_size > 0 for p in logs), (harness, r["task"])
        report = leanrig("report", f"runs/claims-{harness}", "--no-plots", cwd=cwd)
        assert report.returncode == 0, report.stderr
        assert "### Statements (autoformalization)" in report.stdout
        exported_as_inspect_reads(cwd, f"claims-{harness}", got)


def exported_as_inspect_reads(cwd: Path, harness: str, got: dict[str, Any]) -> None:
    """The run (its model I/O recorded: the replay model's default) exported to an Inspect
    log: a sample per attempt with the verdict, the tokens, and the model's tool calls with
    leanrig's results in its conversation."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:  # (the `inspect` extra: `make setup` installs it)
        return
    for task in got:
        assert (cwd / "runs" / harness / "attempts" / task / "1" / "model_io.jsonl").is_file()
    done = leanrig("export", "inspect", f"runs/{harness}", "--out", f"{harness}.eval", cwd=cwd)
    assert done.returncode == 0, done.stderr
    log = read_eval_log(str(cwd / f"{harness}.eval"))
    samples = {str(s.id): s for s in log.samples or []}
    assert set(samples) == set(got)
    for task, sample in samples.items():
        r = got[task]
        assert sample.scores is not None
        assert sample.scores["leanrig_verdict"].value == ("C" if r["accepted"] else "I")
        (usage,) = sample.model_usage.values()
        assert usage.output_tokens == r["output_tokens"]
        calls = [c.function for m in sample.messages if m.role == "assistant"
                 for c in m.tool_calls or []]  # fmt: skip
        assert any(c.endswith("set_statement") for c in calls), calls
        assert any(m.role == "tool" for m in sample.messages)
