"""`leanrig model plan-from` round trip: an attempt recorded through Claude Code and the replay
model, turned into a plan and played again, gives the same tool calls and verdict (skipped
without node or a harness)."""

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
    """The ledger tools and results line of a `leanrig run` of TASK against ``plan_file``."""
    server = model_serve(cwd, plan_file, f"{out}-served.jsonl")
    try:
        with stray_guard():
            done = leanrig(
                "run",
                "--suite",
                SUITE,
                "--tasks",
                TASK,
                "--harness",
                "claude-code",
                "--model",
                "replay",
                "--model-endpoint",
                server.url,
                "--out",
                f"runs/{out}",
                "--time-limit",
                "120",
                "--quiet",
                cwd=cwd,
            )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    attempt = cwd / "runs" / out / "attempts" / TASK / "1"
    tools = [
        str(e["tool"])
        for e in lines(attempt / "ledger.jsonl")
        if e.get("tool") and e.get("closed_by") != "server"
    ]
    (result,) = lines(cwd / "runs" / out / "results.jsonl")
    return tools, result


def test_a_recorded_attempt_replays_with_the_same_calls_and_verdict(tmp_path: Path) -> None:
    sandbox_or_skip()
    harnesses_or_skip()
    cwd = tmp_path
    shutil.copytree(DEMO, cwd / SUITE)
    first = {
        "tasks": {
            TASK: [
                {"tool": "open_task", "args": {"task_id": "{task}"}},
                {"tool": "set_proof", "args": {"session_id": "{session}", "body": "h"}},
                {"tool": "set_proof", "args": {"session_id": "{session}", "body": PROOFS[TASK]}},
                {"tool": "check_proof", "args": {"session_id": "{session}"}},
                {"say": "proved it"},
            ]
        }
    }
    (cwd / "first.json").write_text(json.dumps(first))
    tools, result = run_against(cwd, "first.json", "first")
    assert tools == ["open_task", "set_proof", "set_proof", "check_proof"], tools
    assert result["accepted"], result

    made = leanrig(
        "model", "plan-from", f"runs/first/attempts/{TASK}/1", "--out", "again.json", cwd=cwd
    )
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
    """Placeholders for ids, and the plan says where it came from."""
    from agent_tools.models import plan_from_attempt

    root = tmp_path / "attempts" / "add_comm" / "1"
    (root / "serve").mkdir(parents=True)
    tools = ["open_task", "set_statement", "check_statement", "set_statement"]
    (root / "ledger.jsonl").write_text(
        "".join(
            json.dumps({"tool": t, "task": "add_comm", "session": "s1", "outcome": "ok"}) + "\n"
            for t in tools
        )
    )
    final = " (a b : N) : Eq (N.add b a) (N.add a b)"
    (root / "serve" / "submission-1.json").write_text(
        json.dumps(
            {
                "v": 1,
                "task": "add_comm",
                "session": "s1",
                "version": 3,
                "body": "\n  sorry",
                "statement": final,
                "kind": "statement",
                "ts_ns": 1,
            }
        )
    )
    plan = plan_from_attempt(root)
    steps = plan.to_json()["tasks"]["add_comm"]
    assert [s.get("tool") for s in steps[:-1]] == tools and "say" in steps[-1]
    assert steps[0]["args"] == {"task_id": "{task}"}
    assert steps[1]["args"] == {"session_id": "{session}"}  # not the final one: unknown
    assert steps[3]["args"] == {"session_id": "{session}", "statement": final}
    assert plan.notes and "ledger" in plan.notes[0]
