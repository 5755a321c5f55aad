"""`leanrig model plan-from` round trip, as a user types it: Claude Code runs and_swap against
the replay model playing a plan (a wrong body, then the right one), `leanrig model plan-from`
turns the recorded attempt into a plan, the replay model plays that, and Claude Code runs the
task again: the same leanrig tool calls (both attempts' ledgers) and the same verdict. Where
node or a harness is missing, skipped and said."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .conftest import stray_guard
from .test_as_typed import DEMO, SUITE, leanrig, sandbox_or_skip
from .test_harness_runs import PROOFS, harnesses_or_skip, lines, model_serve

TASK = "and_swap"


def run_against(cwd: Path, plan_file: str, out: str) -> tuple[list[str], dict[str, Any]]:
    """A `leanrig run` of TASK through Claude Code against the replay model playing
    ``plan_file``: the attempt's ledger tools and its results line."""
    server = model_serve(cwd, plan_file, f"{out}-served.jsonl")
    try:
        with stray_guard():
            done = leanrig("run", "--suite", SUITE, "--tasks", TASK, "--harness", "claude-code",
                           "--model", "replay", "--model-endpoint", server.url,
                           "--out", f"runs/{out}", "--time-limit", "120", "--quiet",
                           cwd=cwd)  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    attempt = cwd / "runs" / out / "attempts" / TASK / "1"
    tools = [str(e["tool"]) for e in lines(attempt / "ledger.jsonl")
             if e.get("tool") and e.get("closed_by") != "server"]  # fmt: skip
    (result,) = lines(cwd / "runs" / out / "results.jsonl")
    return tools, result


def test_a_recorded_attempt_replays_with_the_same_calls_and_verdict(tmp_path: Path) -> None:
    sandbox_or_skip()
    harnesses_or_skip()
    cwd = tmp_path
    shutil.copytree(DEMO, cwd / SUITE)
    first = {"tasks": {TASK: [
        {"tool": "open_task", "args": {"task_id": "{task}"}},
        {"tool": "set_proof", "args": {"session_id": "{session}", "body": "h"}},
        {"tool": "set_proof", "args": {"session_id": "{session}", "body": PROOFS[TASK]}},
        {"tool": "check_proof", "args": {"session_id": "{session}"}},
        {"say": "proved it"},
    ]}}  # fmt: skip
    (cwd / "first.json").write_text(json.dumps(first))
    tools, result = run_against(cwd, "first.json", "first")
    assert tools == ["open_task", "set_proof", "set_proof", "check_proof"], tools
    assert result["accepted"], result

    made = leanrig("model", "plan-from", f"runs/first/attempts/{TASK}/1", "--out", "again.json",
                   cwd=cwd)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "4 tool call(s) from model_io.jsonl" in made.stderr
    plan = json.loads((cwd / "again.json").read_text())
    steps = plan["tasks"][TASK]
    assert [s.get("tool") for s in steps[:-1]] == tools
    assert steps[2]["args"] == {"session_id": "{session}", "body": PROOFS[TASK]}
    assert steps[-1] == {"say": "proved it"}

    again, replayed = run_against(cwd, "again.json", "again")
    assert again == tools
    assert (replayed["accepted"], replayed["reasons"]) == (result["accepted"], result["reasons"])


def test_an_attempt_directory_without_records_is_refused_with_a_hint(tmp_path: Path) -> None:
    done = leanrig("model", "plan-from", str(tmp_path), cwd=tmp_path)
    assert done.returncode != 0
    assert "neither model_io.jsonl nor ledger.jsonl" in done.stderr
    assert "--record-model-io" in done.stderr


def test_without_recorded_io_the_ledger_gives_the_calls_and_the_final_statement(
    tmp_path: Path,
) -> None:
    """An attempt with a ledger and a submission record but no model I/O: the plan has the
    ledger's tools in order, the placeholders, and the final statement as the last
    set_statement's argument; the plan says where it came from."""
    from agent_tools.models import plan_from_attempt

    root = tmp_path / "attempts" / "add_comm" / "1"
    (root / "serve").mkdir(parents=True)
    tools = ["open_task", "set_statement", "check_statement", "set_statement"]
    (root / "ledger.jsonl").write_text("".join(
        json.dumps({"tool": t, "task": "add_comm", "session": "s1", "outcome": "ok"}) + "\n"
        for t in tools
    ))  # fmt: skip
    final = " (a b : N) : Eq (N.add b a) (N.add a b)"
    (root / "serve" / "submission-1.json").write_text(json.dumps(
        {"v": 1, "task": "add_comm", "session": "s1", "version": 3, "body": "\n  sorry",
         "statement": final, "kind": "statement", "ts_ns": 1}
    ))  # fmt: skip
    plan = plan_from_attempt(root)
    steps = plan.to_json()["tasks"]["add_comm"]
    assert [s.get("tool") for s in steps[:-1]] == tools and "say" in steps[-1]
    assert steps[0]["args"] == {"task_id": "{task}"}
    assert steps[1]["args"] == {"session_id": "{session}"}  # (not the final one: unknown)
    assert steps[3]["args"] == {"session_id": "{session}", "statement": final}
    assert plan.notes and "ledger" in plan.notes[0]
