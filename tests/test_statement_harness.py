"""Claude Code and Codex write statements: `leanrig run --suite lean_project/suites/claims
--harness claude-code|codex --model replay` against the replay model playing the claims suite's
own plan (lean_project/suites/claims/replay-plan.json), as a user types it; each harness's
candidates are graded against the hidden references, and `leanrig report` gives the statement
tasks' equivalence rate. Where node or a harness is missing these tests skip and say so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .conftest import stray_guard
from .test_as_typed import leanrig, leanrig_each, sandbox_or_skip
from .test_harness_runs import HARNESSES, harnesses_or_skip, model_serve
from .test_statement_runs import CLAIMS, SUITE, TASKS

LIMIT = "120"  # each attempt takes seconds; the limit only bounds a hung one


def test_both_harnesses_write_statements_that_are_graded_and_reported(tmp_path: Path) -> None:
    sandbox_or_skip()
    harnesses_or_skip()
    cwd = tmp_path
    shutil.copytree(CLAIMS, cwd / SUITE)
    plan = f"{SUITE}/replay-plan.json"  # the suite's own plan, as docs/agents.md uses it
    server = model_serve(cwd, plan, "served.jsonl")
    try:
        with stray_guard():
            commands = [
                ("run", "--suite", SUITE, "--tasks", ",".join(TASKS), "--harness", harness,
                 "--model", "replay", "--model-endpoint", server.url, "--time-limit", LIMIT,
                 "--out", f"runs/{harness}", "--quiet")
                for harness in HARNESSES
            ]  # fmt: skip
            finished = leanrig_each(*commands, cwd=cwd)
    finally:
        server.stop()
    for harness, done in zip(HARNESSES, finished, strict=True):
        assert done.returncode == 0, (harness, done.stdout[-2000:], done.stderr[-3000:])
        lines = (cwd / "runs" / harness / "results.jsonl").read_text().splitlines()
        got = {r["task"]: r for r in map(json.loads, lines)}
        assert {t: r["accepted"] for t, r in got.items()} == TASKS, harness
        for r in got.values():
            assert r["kind"] == "statement" and r["model_calls"] and r["equivalence"], r
        report = leanrig("report", f"runs/{harness}", "--no-plots", cwd=cwd)
        assert report.returncode == 0, report.stderr
        assert "### Statements (autoformalization)" in report.stdout
        rate = "(equivalence rate over attempts 50.0%)"
        assert rate in report.stdout, (harness, report.stdout[-2000:])
        exported_as_inspect_reads(cwd, harness, got)


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
