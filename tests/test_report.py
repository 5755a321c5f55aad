"""`leanrig report`: statistics from ledgers, and clear messages for broken ledgers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_tools.cli import main
from agent_tools.runs import (
    AttemptResult,
    ReportError,
    RunInfo,
    append_result,
    compute_metrics,
    read_ledger,
    write_report,
    write_run_info,
)
from agent_tools.runs.metrics import CI_LABEL
from agent_tools.runs.plots import PlotRun, field_label, outcome_grid, task_outcomes


@pytest.fixture(autouse=True)
def no_stray_lean() -> None:
    """These tests start no Lean: skip conftest's ps scan (it would see other jobs' Lean)."""


def entry(tool: str, total: float, queue: float = 0.0, lean: float = 0.0, **kw: object) -> bytes:
    fields = {"v": 1, "ts": "2026-01-01T00:00:00Z", "tool": tool, "total_ms": total}
    fields.update({"queue_ms": queue, "lean_ms": lean, "outcome": "ok", **kw})
    return orjson.dumps(fields) + b"\n"


def test_per_tool_statistics_and_overhead(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    lines = [
        entry("set_proof", t, queue=1.0, lean=t - 2.0, session="s1", task="a", body_sha="abc")
        for t in (10.0, 20.0, 30.0, 40.0)
    ]
    lines.append(entry("close_session", 0.5, session="s1", task="a", session_wall_ms=900.0))
    ledger.write_bytes(b"".join(lines))
    summary = write_report(ledger, tmp_path / "out")
    s = summary["tools"]["set_proof"]
    assert s["count"] == 4
    assert s["total_ms"]["median"] == 25.0 and s["total_ms"]["max"] == 40.0
    assert s["overhead_ms"]["median"] == 1.0  # total - queue - lean
    assert summary["tasks"]["a"]["wall_ms"]["median"] == 900.0
    assert summary["slowest"][0]["total_ms"] == 40.0 and summary["slowest"][0]["body_sha"] == "abc"
    for name in ("report.md", "report.json", "latency_per_tool.png", "time_breakdown.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0


def test_refused_calls_are_counted_apart_from_the_timed_ones(tmp_path: Path) -> None:
    """Refusals before Lean are counted apart; failures that cost the caller time stay timed."""
    ledger = tmp_path / "l.jsonl"
    lines = [entry("edit", t, lean=t - 1.0, session="h", task="a") for t in (4.0, 40.0, 158.0)]
    lines += [entry("edit", 0.0, session="h", task="a", outcome="rejected")] * 5
    lines.append(entry("get_goals", 0.0, session="h", task="a", outcome="rejected"))
    lines.append(entry("get_goals", 0.2, session="h", task="a", outcome="error:invalid_argument"))
    lines.append(entry("list_tasks", 0.3, session="s"))  # answered without Lean: timed
    for outcome in ("error:busy", "error:timeout", "error:unavailable", "error:internal"):
        lines.append(
            entry("try_proofs", 30000.0, queue=30000.0, session="h", task="a", outcome=outcome)
        )
    # … but `busy` at once (the session limit) is a refusal
    lines.append(entry("open_task", 0.1, session="h", task="a", outcome="error:busy"))
    # Rejected after Lean elaborated it (the scope check reads Lean's parse): timed.
    lines.append(entry("set_proof", 11.8, lean=11.3, session="a", task="a", outcome="rejected"))
    ledger.write_bytes(b"".join(lines))
    summary = write_report(ledger, tmp_path / "out")
    edit = summary["tools"]["edit"]
    assert edit["count"] == 3 and edit["total_ms"]["median"] == 40.0
    assert "get_goals" not in summary["tools"]
    assert summary["tools"]["set_proof"]["count"] == 1
    assert summary["refused"] == {"edit": 5, "get_goals": 2, "open_task": 1}
    assert summary["tools"]["list_tasks"]["count"] == 1
    assert summary["tools"]["try_proofs"]["count"] == 4
    md = (tmp_path / "out" / "report.md").read_text()
    assert "not in the times above): edit 5, get_goals 2, open_task 1." in md
    assert "| s | — |" in md and "None" not in md  # a call with no task


def test_truncated_and_mixed_version_ledgers_are_read_with_notes(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    old = orjson.dumps({"v": 0, "tool": "set_proof", "total_ms": 1}) + b"\n"
    ledger.write_bytes(
        entry("set_proof", 5.0)
        + old
        + b"garbage\n"
        + entry("set_proof", 7.0)
        + b'{"v": 1, "tool": "set_pr'
    )
    read = read_ledger(ledger)
    assert len(read.entries) == 2
    assert read.truncated_tail and read.skipped_version == 1 and read.skipped_invalid == 1
    notes = " ".join(read.notes())
    assert "truncated" in notes and "schema" in notes


def test_an_empty_ledger_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.jsonl"
    ledger.write_bytes(b"")
    with pytest.raises(ReportError, match="no usable ledger entries"):
        write_report(ledger, tmp_path / "out")
    assert main(["report", str(ledger)]) == 2
    assert "no usable ledger entries" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2


def test_the_ledger_forgets_closed_sessions_but_keeps_the_file(tmp_path: Path) -> None:
    from agent_tools.sessions import Ledger

    ledger = Ledger(tmp_path / "l.jsonl")
    for i in range(3):
        ledger.record(
            session="s1",
            task="t",
            tool="set_proof",
            queue_ms=0.0,
            lean_ms=1.0,
            total_ms=2.0,
            outcome="ok",
            version=i,
        )
    assert [e["version"] for e in ledger.for_session("s1")] == [0, 1, 2]
    ledger.forget("s1")
    assert ledger.for_session("s1") == []
    ledger.close()
    assert len(read_ledger(tmp_path / "l.jsonl").entries) == 3


def test_a_ledger_report_counts_accepted_tasks_and_calls_it_no_score(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"

    def at(second: int, **kw: object) -> bytes:
        fields = {
            "v": 1,
            "ts": f"2026-01-01T00:00:{second:02d}+00:00",
            "queue_ms": 0.0,
            "lean_ms": 0.0,
            "total_ms": 1.0,
            "outcome": "ok",
            **kw,
        }
        return orjson.dumps(fields) + b"\n"

    ledger.write_bytes(
        at(0, tool="open_task", session="a", task="t1")
        + at(4, tool="check_proof", session="a", task="t1", accepted=False)
        + at(10, tool="check_proof", session="a", task="t1", accepted=True)
        + at(12, tool="close_session", session="a", task="t1", session_wall_ms=12000.0)
        + at(0, tool="open_task", session="b", task="t2")
        + at(8, tool="check_proof", session="b", task="t2", accepted=False)
    )
    b = write_report(ledger, tmp_path / "out", plots=False)["benchmark"]
    assert b["attempted"] == 2 and b["accepted"] == 1 and b["accepted_share"] == 0.5
    assert b["tasks"]["t1"]["time_to_accept_s"] == 10.0
    assert b["tasks"]["t2"]["accepted"] is False
    assert b["wall_s"] == 20.0  # 12 s closed + 8 s first-to-last for the unclosed session
    assert b["seconds_per_accepted_task"] == 20.0
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "accepted 1 of 2 tasks attempted (50.0%)" in markdown
    assert "seconds per accepted task: 20.0" in markdown
    assert "score 1" not in markdown and "per score point:" not in markdown


# -- run directories: `leanrig report RUN_DIR...` and `leanrig compare BASE LAD` ----------------


def make_run(
    path: Path,
    condition: str,
    verdicts: dict[str, bool],
    *,
    label: str | None = None,
    costs: dict[str, float] | None = None,
    ended: bool = True,
) -> Path:
    from agent_tools.runs import AttemptResult, RunInfo, append_result, write_run_info

    inventory = [
        {"id": "a", "field": "alg", "difficulty": 2},
        {"id": "b", "field": "alg", "difficulty": 6},
        {"id": "c", "field": "geo", "difficulty": 4},
        {"id": "d", "field": "geo", "difficulty": 8},
    ]
    info = RunInfo.model_validate(
        {
            "suite_name": "demo",
            "task_count": 4,
            "tasks": inventory,
            "model": "m",
            "agent_tool": "search",
            "condition": condition,
            "time_limit_s": 60,
            "label": label,
            "started_at": "2026-05-01T10:00:00+00:00",
            "ended_at": "2026-05-01T10:05:00+00:00" if ended else None,
        }
    )
    write_run_info(path, info)
    for t in inventory:
        task = str(t["id"])
        if task not in verdicts:
            continue
        append_result(
            path,
            AttemptResult.model_validate(
                {
                    "task": task,
                    "field": t["field"],
                    "difficulty": t["difficulty"],
                    "accepted": verdicts[task],
                    "invocation_s": 10.0,
                    "condition": condition,
                    "timed_out": task == "d",
                    "cost_usd": (costs or {}).get(task),
                    "input_tokens": 1000,
                    "output_tokens": 100,
                }
            ),
        )
    return path


def test_run_dir_report_has_the_metrics_and_plots(tmp_path: Path) -> None:
    run = make_run(
        tmp_path / "base",
        "baseline",
        {"a": True, "b": False, "c": True, "d": True},
        costs={"a": 0.2, "b": 0.4, "c": 0.3, "d": 0.5},
    )
    summary = write_report(run, tmp_path / "out")
    data = orjson.loads((tmp_path / "out" / "report.json").read_bytes())
    for key in (
        "score",
        "completion",
        "fields",
        "field_denominators",
        "seconds_per_point",
        "usd_per_point",
        "tasks",
        "accepted",
        "accepted_after_timeout",
        "pass_at_k",
    ):
        assert key in data, key
    assert data["score"] == pytest.approx(100 * 14 / 20) and data["completion"] == 75.0
    assert data["fields"] == {"alg": 25.0, "geo": 100.0}
    assert data["field_denominators"] == {"alg": 8, "geo": 12}
    assert data["tasks"] == 4 and data["accepted"] == 3 and data["accepted_after_timeout"] == 1
    assert data["pass_at_k"] == {"1": 75.0}
    assert data["seconds_per_point"] == pytest.approx(10.0 / 70)
    assert data["usd_per_point"] == pytest.approx(0.35 / 70)
    assert (
        data["run"]["condition"] == "baseline" and data["tokens"]["input_tokens"]["total"] == 4000
    )
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| alg | 25.0 | 8 |" in md and "70.0" in md
    names = {Path(p).name for p in summary["plots"]}
    assert names == {
        "score_completion.png",
        "cost_per_point.png",
        "fields_radar.png",
        "task_outcomes.png",
    }
    assert all(Path(p).stat().st_size > 0 for p in summary["plots"])


def test_run_dir_report_marks_gaps_and_na(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", "baseline", {"a": True, "b": False}, ended=False)
    summary = write_report(run, tmp_path / "out", plots=False)
    assert summary["usd_per_point"] is None and summary["missing_tasks"] == ["c", "d"]
    assert summary["tasks"] == 4 and summary["completion"] == 25.0
    notes = " ".join(summary["notes"])
    assert "no results" in notes and "no end time" in notes and "cost is reconstructable" in notes
    md = (tmp_path / "out" / "report.md").read_text()
    assert "N/A" in md and "note:" in md


def test_a_run_with_attempts_missing_says_so(tmp_path: Path) -> None:
    from agent_tools.runs import AttemptResult, append_result, read_run_info, write_run_info

    run = make_run(tmp_path / "r", "baseline", {"a": True, "b": False, "c": True, "d": False})
    write_run_info(run, read_run_info(run).model_copy(update={"attempts": 2}))
    append_result(
        run,
        AttemptResult.model_validate(
            {
                "task": "b",
                "field": "alg",
                "difficulty": 6,
                "attempt": 2,
                "accepted": True,
                "invocation_s": 10.0,
                "condition": "baseline",
            }
        ),
    )
    summary = write_report(run, tmp_path / "out", plots=False)
    (note,) = [n for n in summary["notes"] if "fewer than" in n]
    assert "3 task(s)" in note and "a (1 of 2), c (1 of 2), d (1 of 2)" in note, note
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| tasks accepted |" in md and "| attempts accepted after timeout |" in md


def test_a_run_and_a_ledger_together_are_refused_with_a_hint_that_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "r", "baseline", {"a": True})
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(entry("set_proof", 5.0, session="s", task="a"))
    assert main(["report", str(run), str(ledger)]) == 2
    err = capsys.readouterr().err
    assert "not run directories" in err and "pass a ledger written by" not in err, err
    assert "leanrig report LEDGER" in err, err


def test_a_run_dir_without_results_or_run_json_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_tools.runs import report_runs

    make_run(tmp_path / "empty", "baseline", {})
    with pytest.raises(ReportError, match="no usable results"):
        write_report(tmp_path / "empty", tmp_path / "out")
    (tmp_path / "bare").mkdir()
    with pytest.raises(ReportError, match=r"no run\.json"):
        write_report(tmp_path / "bare", tmp_path / "out")
    with pytest.raises(ReportError, match="takes run directories"):
        report_runs([tmp_path / "empty", tmp_path / "l.jsonl"], tmp_path / "out")


def test_serve_s_own_run_directory_points_at_its_ledger(tmp_path: Path) -> None:
    """`leanrig report` on serve's runs/<timestamp>/ points at its ledger.jsonl."""
    served = tmp_path / "runs" / "20260101-000000"
    served.mkdir(parents=True)
    (served / "ledger.jsonl").write_bytes(entry("open_task", 5.0, session="s", task="a"))
    with pytest.raises(ReportError) as info:
        write_report(served, tmp_path / "out")
    assert f"pass {served / 'ledger.jsonl'}" in info.value.hint


def test_several_runs_make_a_leaderboard(tmp_path: Path) -> None:
    from agent_tools.runs import report_runs

    weak = {"a": True, "b": False, "c": False, "d": False}
    a = make_run(tmp_path / "x" / "run", "baseline", weak, label="weak")
    b = make_run(
        tmp_path / "y" / "run", "lad", {"a": True, "b": True, "c": True, "d": False}, label="strong"
    )
    summary = report_runs([a, b], tmp_path / "board")
    assert [r["name"] for r in summary["runs"]] == ["strong", "weak"]
    md = (tmp_path / "board" / "report.md").read_text()
    assert md.index("strong") < md.index("weak") and "alg (/8)" in md
    assert (tmp_path / "board" / "run" / "report.json").exists()  # same names: kept apart
    assert (tmp_path / "board" / "run_" / "report.json").exists()
    assert "leaderboard.png" in {Path(p).name for p in summary["plots"]}
    linked = re.findall(r"\| \[(\w+)\]\(([^)]+)\) \|", md)
    assert {name for name, _ in linked} == {"strong", "weak"}, md
    assert all((tmp_path / "board" / target).exists() for _, target in linked)


def test_a_leaderboard_over_different_suites_says_so(tmp_path: Path) -> None:
    """A warning, and each run's own field denominators; also for a `--tasks` subset."""
    from agent_tools.runs import RunInfo, read_run_info, report_runs, write_run_info

    a = make_run(tmp_path / "a", "baseline", {"a": True, "b": False, "c": False, "d": False})
    b = make_run(tmp_path / "b", "baseline", {"a": True}, label="small")
    small = read_run_info(b).model_dump()
    small.update(suite_name="mini", task_count=1, tasks=[small["tasks"][0]])
    write_run_info(b, RunInfo.model_validate(small))
    summary = report_runs([a, b], tmp_path / "board", plots=False)
    assert any("different tasks" in n and "mini" in n for n in summary["notes"]), summary
    md = (tmp_path / "board" / "report.md").read_text()
    assert "**warning:** these runs are over different tasks" in md
    assert "alg (/8)" not in md and "(/2)" in md and "(/8)" in md
    same = report_runs(
        [a, make_run(tmp_path / "c", "lad", {"a": True})], tmp_path / "s", plots=False
    )
    assert not any("different tasks" in n for n in same["notes"])
    d = make_run(tmp_path / "d", "baseline", {"a": True}, label="subset")
    subset = read_run_info(d).model_dump()
    subset.update(task_count=2, tasks=subset["tasks"][:2])
    write_run_info(d, RunInfo.model_validate(subset))
    mixed = report_runs([a, d], tmp_path / "m", plots=False)
    assert any("different tasks" in n for n in mixed["notes"]), mixed["notes"]


def test_compare_baseline_and_lad(tmp_path: Path) -> None:
    from agent_tools.runs import compare_runs

    base = make_run(
        tmp_path / "b",
        "baseline",
        {"a": True, "b": False, "c": True, "d": False},
        costs={"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0},
    )
    lad = make_run(tmp_path / "l", "lad", {"a": True, "b": True, "c": True, "d": False})
    summary = compare_runs(base, lad, tmp_path / "cmp")
    c = summary["comparison"]
    assert c["score"]["base"] == pytest.approx(30.0) and c["score"]["new"] == pytest.approx(60.0)
    assert c["score"]["change_percent"] == pytest.approx(100.0)
    assert c["completion"]["change_percent"] == pytest.approx(50.0)
    assert c["seconds_per_point"]["change_percent"] == pytest.approx(-50.0)
    assert c["usd_per_point"]["change_percent"] is None  # the LAD run has no cost
    assert c["fields"]["alg"]["diff_points"] == pytest.approx(75.0)
    assert c["fields"]["geo"]["diff_points"] == pytest.approx(0.0)
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "+100.0%" in md and "| alg | 8 | 25.0 | 100.0 | +75.0 |" in md
    assert {Path(p).name for p in summary["plots"]} == {"comparison.png", "task_outcomes.png"}
    assert orjson.loads((tmp_path / "cmp" / "compare.json").read_bytes())["kind"] == "compare"


def test_unlabelled_runs_are_told_apart_and_a_mismatched_comparison_says_so(
    tmp_path: Path,
) -> None:
    """`compare` notes swapped runs, suites, time limits, two baselines, a baseline scoring 0."""
    from agent_tools.runs import compare_runs, read_run_info, report_runs, write_run_info

    runs = [make_run(tmp_path / name, "baseline", {"a": True}) for name in ("sleep", "flaky")]
    summary = report_runs(runs, tmp_path / "board", plots=False)
    assert sorted(r["name"] for r in summary["runs"]) == [
        "m · search · baseline (flaky)",
        "m · search · baseline (sleep)",
    ]
    lad = make_run(tmp_path / "lad", "lad", {"a": True, "b": True})
    info = read_run_info(lad)
    write_run_info(lad, info.model_copy(update={"suite_hash": "f" * 64, "time_limit_s": 30}))
    base_info = read_run_info(runs[0])
    write_run_info(runs[0], base_info.model_copy(update={"suite_hash": "e" * 64}))
    notes = compare_runs(lad, runs[0], tmp_path / "cmp", plots=False)["comparison"]["notes"]
    assert any("swapped" in n for n in notes), notes
    assert any("different suites" in n for n in notes), notes
    assert any("time limit" in n for n in notes), notes
    zero = make_run(tmp_path / "zero", "baseline", {"a": False, "b": False})
    notes = compare_runs(zero, runs[1], tmp_path / "cmp2", plots=False)["comparison"]["notes"]
    assert any("both runs are baseline runs" in n for n in notes), notes
    assert any("baseline scored 0" in n and "N/A" in n for n in notes), notes
    md = (tmp_path / "cmp2" / "compare.md").read_text()
    assert "baseline scored 0" in md


def _table_rows_keep_their_shape(md: str) -> None:
    """Every Markdown table row has as many cells as its header (``\\|`` is no border)."""
    import re

    width = None
    for line in md.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        if width is None:
            width = cells
        assert cells == width, line


def test_labels_and_names_with_a_bar_keep_the_tables_whole(tmp_path: Path) -> None:
    from agent_tools.runs import compare_runs, report_runs

    a = make_run(tmp_path / "a", "baseline", {"a": True, "b": False}, label="gpt | tools")
    b = make_run(tmp_path / "b", "lad", {"a": True, "b": True}, label="x|y\nz")
    info = orjson.loads((a / "run.json").read_bytes())
    info["agent_command"] = "python agent.py | tee log"
    (a / "run.json").write_bytes(orjson.dumps(info))
    report_runs([a, b], tmp_path / "board")
    compare_runs(a, b, tmp_path / "cmp")
    for md in (tmp_path / "board").rglob("*.md"):
        _table_rows_keep_their_shape(md.read_text())
    _table_rows_keep_their_shape((tmp_path / "cmp" / "compare.md").read_text())
    board = (tmp_path / "board" / "report.md").read_text()
    assert "gpt \\| tools" in board and "x\\|y z" in board


def test_dollars_are_written_without_an_exponent() -> None:
    """$2.7e-05 reads as $2.70 at a glance."""
    from hypothesis import given
    from hypothesis import strategies as st

    from agent_tools.runs.prices import fmt_usd

    assert fmt_usd(2.7e-05) == "$0.000027" and fmt_usd(0.5) == "$0.50"
    assert fmt_usd(1234.5) == "$1,234.50" and fmt_usd(None) == "N/A" and fmt_usd(0) == "$0.00"

    @given(st.floats(min_value=1e-9, max_value=1e9))
    def check(value: float) -> None:
        text = fmt_usd(value)
        assert "e" not in text and text.startswith("$")
        shown = float(text[1:].replace(",", ""))
        assert shown == pytest.approx(value, rel=0.01, abs=0.005)

    check()


def test_a_per_task_row_says_which_columns_are_per_attempt(tmp_path: Path) -> None:
    from agent_tools.runs import AttemptResult, append_result

    run = make_run(tmp_path / "r", "baseline", {"a": True}, costs={"a": 0.5})
    append_result(
        run,
        AttemptResult.model_validate(
            {
                "task": "a",
                "field": "alg",
                "difficulty": 2,
                "attempt": 2,
                "accepted": False,
                "invocation_s": 30.0,
                "condition": "baseline",
                "cost_usd": 1.5,
                "input_tokens": 3000,
                "output_tokens": 300,
            }
        ),
    )
    write_report(run, tmp_path / "out", plots=False)
    md = (tmp_path / "out" / "report.md").read_text()
    assert (
        "| invocation s / attempt | model s | Lean s | rest s | USD / attempt | input tokens |"
        in md
    )
    assert "means per attempt" in md
    row = next(line for line in md.splitlines() if line.startswith("| a |"))
    # means of 10 s and 30 s, $0.5 and $1.5; 1000 + 3000 (no gateway: no model time)
    assert "| 20.0 | N/A | 0.00 | N/A | $1.00 | 4000 |" in row


def test_a_resumed_attempts_session_is_one_invocation_with_its_last_wall_time() -> None:
    """Two close_session lines in one session (a resumed human attempt)."""
    from agent_tools.runs import summarize

    line = {
        "v": 1,
        "ts": "2026-12-02T00:00:00+00:00",
        "session": "s1",
        "task": "t",
        "queue_ms": 0.0,
        "lean_ms": 0.0,
        "total_ms": 0.0,
        "outcome": "ok",
    }
    entries = [
        {**line, "tool": "open_task"},
        {**line, "tool": "close_session", "session_wall_ms": 1000.0},
        {**line, "tool": "open_task"},
        {**line, "tool": "close_session", "session_wall_ms": 5000.0},
    ]
    summary = summarize(entries)
    assert summary["tasks"]["t"]["invocations"] == 1
    assert summary["tasks"]["t"]["wall_ms"]["median"] == 5000.0


def test_a_harness_run_names_its_harness_as_the_agent_tool() -> None:
    """A `--harness` run records no `--agent-tool`: its report names the harness, not "—"."""
    from datetime import UTC, datetime

    from agent_tools.runs.results import HarnessInfo, RunInfo
    from agent_tools.runs.run_report import agent_tool_of

    harness = HarnessInfo(name="claude-code", version="2.0.0", program="/x/claude", model="m")
    info = RunInfo(
        suite_name="s", task_count=1, time_limit_s=60, started_at=datetime.now(UTC), harness=harness
    )
    assert agent_tool_of(info) == "claude-code"
    assert agent_tool_of(info.model_copy(update={"agent_tool": "mine"})) == "mine"
    assert agent_tool_of(info.model_copy(update={"harness": None})) == "—"


# -- the per-task grid and per-field labels -----------------------------------------------------


def result(task: str = "a", attempt: int = 1, **kw: Any) -> AttemptResult:
    fields: dict[str, Any] = {
        "field": "alg",
        "difficulty": 3,
        "accepted": False,
        "invocation_s": 10.0,
        **kw,
    }
    return AttemptResult(task=task, attempt=attempt, **fields)


def test_the_grid_has_attempts_for_one_run_and_runs_for_several() -> None:
    one = compute_metrics(
        [
            result("b", 1, field="geo", difficulty=2, accepted=True),
            result("b", 2, field="geo", difficulty=2, timed_out=True),
            result("a", 1, field="alg", difficulty=9, reasons=["infrastructure: Lean died"]),
            result("z", 1, field="alg", difficulty=1),
        ]
    )
    grid = outcome_grid([PlotRun("r", "baseline", one)])
    assert [r.task for r in grid.rows] == ["z", "a", "b"]  # by field, then difficulty
    assert grid.columns == ["attempt 1", "attempt 2"]
    assert grid.status == [
        ["not verified", "no result"],
        ["error", "no result"],
        ["verified", "timed out"],
    ]
    other = compute_metrics([result("a", 1, field="alg", difficulty=9, accepted=True)])
    grid = outcome_grid([PlotRun("r", "baseline", one), PlotRun("s", "lad", other)])
    assert grid.columns == ["r", "s"]
    assert grid.status == [
        ["not verified", "not in suite"],
        ["error", "verified"],
        ["partly verified", "not in suite"],
    ]
    assert grid.counts == [["", ""], ["", ""], ["1/2", ""]]


def test_per_field_labels_carry_their_points_available() -> None:
    small = compute_metrics(
        [
            result("a", difficulty=2),
            result("b", field="geo", difficulty=9),
            result("c", field="geo", difficulty=6),
        ]
    )
    big = compute_metrics(
        [
            result("a", difficulty=4),
            result("b", field="geo", difficulty=9),
            result("c", field="geo", difficulty=6),
        ]
    )
    runs = [PlotRun("s", "baseline", small), PlotRun("b", "lad", big)]
    assert field_label("geo", runs) == "geo (Σd = 15)"
    assert field_label("alg", runs) == "alg (Σd = 2 / 4)"  # the runs differ: each one's


def test_the_grid_grows_with_the_tasks(tmp_path: Path) -> None:
    from matplotlib.image import imread

    heights = []
    for n in (10, 60):
        m = compute_metrics([result(f"t{i:02d}", accepted=i % 3 == 0) for i in range(n)])
        path = task_outcomes([PlotRun("r", "baseline", m)], tmp_path / f"{n}.png")
        heights.append(imread(path).shape[0])
    assert heights[1] > 3 * heights[0], heights  # a row keeps its height, labels their size


# -- the reports --------------------------------------------------------------------------------

INVENTORY = [
    {"id": "a", "field": "alg", "difficulty": 2},
    {"id": "b", "field": "alg", "difficulty": 6},
    {"id": "c", "field": "geo", "difficulty": 4},
    {"id": "d", "field": "geo", "difficulty": 8},
]


def attempts_run(path: Path, condition: str, outcomes: dict[str, str], label: str) -> Path:
    """A run of the four-task demo inventory, each task's attempts given as a string of
    v(erified), n(ot verified), t(imed out), e(rror)."""
    attempts = max(len(o) for o in outcomes.values())
    write_run_info(
        path,
        RunInfo.model_validate(
            {
                "suite_name": "demo",
                "task_count": 4,
                "tasks": INVENTORY,
                "model": "m",
                "condition": condition,
                "time_limit_s": 60,
                "label": label,
                "attempts": attempts,
                "started_at": "2026-05-01T10:00:00+00:00",
                "ended_at": "2026-05-01T10:05:00+00:00",
            }
        ),
    )
    for t in INVENTORY:
        for k, o in enumerate(outcomes.get(str(t["id"]), ""), 1):
            append_result(
                path,
                AttemptResult.model_validate(
                    {
                        "task": t["id"],
                        "field": t["field"],
                        "difficulty": t["difficulty"],
                        "attempt": k,
                        "accepted": o == "v",
                        "timed_out": o == "t",
                        "reasons": ["infrastructure: Lean died"] if o == "e" else [],
                        "invocation_s": 10.0,
                        "condition": condition,
                        "cost_usd": 0.1,
                    }
                ),
            )
    return path


def test_a_run_report_gives_intervals_outcomes_and_pass_at_k(tmp_path: Path) -> None:
    from agent_tools.runs import write_report

    run = attempts_run(
        tmp_path / "r", "baseline", {"a": "vvv", "b": "nvt", "c": "ten", "d": "nnn"}, "three"
    )
    summary = write_report(run, tmp_path / "out")
    assert {Path(p).name for p in summary["plots"]} >= {"task_outcomes.png", "pass_at_k.png"}
    md = (tmp_path / "out" / "report.md").read_text()
    _table_rows_keep_their_shape(md)
    headline = md.split("## Metrics")[1].splitlines()
    assert headline[5].startswith(f"| {CI_LABEL} ") and "percentile bootstrap" in md
    assert f"| field | score | denominator (Σ difficulty) | {CI_LABEL} |" in md
    assert f"pass@3 50.0 ({CI_LABEL} " in md
    assert "| task | field | d | attempt 1 | attempt 2 | attempt 3 |" in md
    assert "| c | geo | 4 | timed out | error | not verified |" in md
    assert "| b | alg | 6 | not verified | verified | timed out |" in md
    data = orjson.loads((tmp_path / "out" / "report.json").read_bytes())
    assert data["score_ci"]["low"] <= data["score"] <= data["score_ci"]["high"]


def test_compare_and_the_leaderboard_give_delta_intervals_and_the_outcome_grid(
    tmp_path: Path,
) -> None:
    from agent_tools.runs import compare_runs, report_runs

    base = attempts_run(
        tmp_path / "b", "baseline", {"a": "v", "b": "n", "c": "v", "d": "t"}, "base"
    )
    lad = attempts_run(tmp_path / "l", "lad", {"a": "v", "b": "v", "c": "v", "d": "e"}, "lad")
    summary = compare_runs(base, lad, tmp_path / "cmp")
    assert {Path(p).name for p in summary["plots"]} == {"comparison.png", "task_outcomes.png"}
    c = summary["comparison"]
    assert c["shared_tasks"] == 4 and c["score_delta_ci"]["low"] >= 0
    md = (tmp_path / "cmp" / "compare.md").read_text()
    _table_rows_keep_their_shape(md)
    row = next(line for line in md.splitlines() if line.startswith("| score |"))
    ci = c["score_delta_ci"]
    assert row.endswith(f"| [{ci['low']:+.1f}, {ci['high']:+.1f}] |"), row
    assert "| d | geo | 8 | timed out | error |" in md and "| b | alg | 6 | not verified |" in md

    board = report_runs([base, lad], tmp_path / "board")
    assert "task_outcomes.png" in {Path(p).name for p in board["plots"]}
    md = (tmp_path / "board" / "report.md").read_text()
    _table_rows_keep_their_shape(md)
    assert f"| score | score {CI_LABEL} |" in md
    assert "| task | field | d | lad | base |" in md  # the runs in rank order
    assert "| b | alg | 6 | verified | not verified |" in md


def test_a_per_point_panel_with_nothing_to_draw_says_why() -> None:
    from agent_tools.runs.plots import empty_panel_note

    assert empty_panel_note("USD", [0.0, 0.0]) == (
        "$0 per point in every run: no priced model calls"
    )
    assert empty_panel_note("USD", [None, None]) == "N/A: no run has a known cost"
    assert empty_panel_note("USD", [None, 0.0]) is not None
    assert empty_panel_note("USD", [0.0, 0.01]) is None
    assert empty_panel_note("seconds", [None]) == "N/A: no run scored a point"
    assert empty_panel_note("seconds", [0.04, None]) is None


def kinds_run(path: Path, condition: str, accepted: dict[str, bool]) -> Path:
    inventory = [
        {"id": t, "field": "f", "difficulty": 2, "kind": "proof" if t[0] == "p" else "statement"}
        for t in ("p1", "p2", "s1", "s2")
    ]
    write_run_info(
        path,
        RunInfo.model_validate(
            {
                "suite_name": "mixed",
                "task_count": 4,
                "tasks": inventory,
                "model": "m",
                "condition": condition,
                "time_limit_s": 60,
                "label": condition,
                "started_at": "2026-05-01T10:00:00+00:00",
                "ended_at": "2026-05-01T10:05:00+00:00",
            }
        ),
    )
    for t in inventory:
        append_result(
            path,
            AttemptResult.model_validate(
                {
                    "task": t["id"],
                    "field": "f",
                    "difficulty": 2,
                    "kind": t["kind"],
                    "accepted": accepted[str(t["id"])],
                    "invocation_s": 10.0,
                    "condition": condition,
                }
            ),
        )
    return path


def test_a_run_mixing_kinds_reports_each_kind_apart(tmp_path: Path) -> None:
    from agent_tools.runs import compare_runs, write_report

    base = kinds_run(tmp_path / "b", "baseline", {"p1": True, "p2": True, "s1": False, "s2": False})
    lad = kinds_run(tmp_path / "l", "lad", {"p1": True, "p2": False, "s1": True, "s2": True})
    summary = write_report(base, tmp_path / "out", plots=False)
    assert summary["score"] == 50.0
    assert {k: m["score"] for k, m in summary["by_kind"].items()} == {
        "proof": 100.0,
        "statement": 0.0,
    }
    text = (tmp_path / "out" / "report.md").read_text()
    assert "### Proofs (theorem proving)" in text and "### Statements (autoformalization)" in text
    compare_runs(base, lad, tmp_path / "cmp", plots=False)
    rows = [
        line
        for line in (tmp_path / "cmp" / "compare.md").read_text().splitlines()
        if line.startswith(("| proof |", "| statement |"))
    ]
    assert rows[0].startswith("| proof | 100.0 | 50.0 | -50.0 |")
    assert rows[1].startswith("| statement | 0.0 | 100.0 | +100.0 |")
