"""The run directory's files (run.json, results.jsonl, usage.json) written and read back,
including truncated, replaced, foreign and invalid lines."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from agent_tools.runs import (
    RESULTS_FILE,
    RUN_FILE,
    AttemptResult,
    Machine,
    ModelPrice,
    PriceSchedule,
    ResultsError,
    RunInfo,
    TaskRef,
    Usage,
    append_result,
    finished_attempts,
    read_results,
    read_run_info,
    read_usage,
    write_run_info,
)


@pytest.fixture(autouse=True)
def no_stray_lean() -> None:
    """These tests start no process: skip conftest's ps scan, which sees other jobs' Lean."""


def result(task: str = "t", attempt: int = 1, **kw: object) -> AttemptResult:
    fields: dict[str, object] = {
        "field": "F",
        "difficulty": 3,
        "accepted": True,
        "invocation_s": 1.5,
        **kw,
    }
    return AttemptResult.model_validate({"task": task, "attempt": attempt, **fields})


def info(**kw: object) -> RunInfo:
    fields: dict[str, object] = {
        "suite_name": "demo",
        "suite_version": "1.0",
        "suite_hash": "ab" * 32,
        "task_count": 2,
        "tasks": [{"id": "t", "field": "F", "difficulty": 3}],
        "model": "m",
        "agent_tool": "a",
        "condition": "lad",
        "time_limit_s": 1800,
        "attempts": 1,
        "leanrig_version": "0.1.0",
        "lean_version": "4.35.0",
        "sandbox": "bwrap",
        "machine": {"cores": 2, "memory_bytes": 2**33},
        "started_at": "2026-05-01T10:00:00+00:00",
        "agent_command": "agent --prompt {prompt}",
    }
    return RunInfo.model_validate(fields | kw)


def test_run_info_round_trips(tmp_path: Path) -> None:
    prices = PriceSchedule(fixed=date(2026, 5, 1), models={"m": ModelPrice(input=1, output=2)})
    written = info(prices=prices, ended_at=datetime(2026, 5, 1, 11, tzinfo=UTC))
    path = write_run_info(tmp_path / "run", written)
    assert path.name == RUN_FILE and orjson.loads(path.read_bytes())["v"] == 1
    back = read_run_info(tmp_path / "run")
    assert back == written
    assert back.machine == Machine(cores=2, memory_bytes=2**33)
    assert back.tasks == [TaskRef(id="t", field="F", difficulty=3)]
    assert back.display_name() == "m · a · lad"
    assert info(label="nice").display_name() == "nice"


def test_a_missing_or_invalid_run_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match=r"no run\.json"):
        read_run_info(tmp_path)
    (tmp_path / RUN_FILE).write_text('{"v": 1, "suite_name": "x"}')
    with pytest.raises(ResultsError, match=r"not a valid run\.json: task_count"):
        read_run_info(tmp_path)


def test_models_reject_typos_and_bad_values() -> None:
    with pytest.raises(ValidationError, match="accpeted"):
        result(accpeted=True)
    with pytest.raises(ValidationError, match="difficulty"):
        result(difficulty=11)
    with pytest.raises(ValidationError, match="condition"):
        result(condition="other")
    with pytest.raises(ValidationError, match="exceed"):
        result(input_tokens=10, cached_input_tokens=11)
    with pytest.raises(ValidationError):
        info(time_limit_s=0)


def test_results_append_and_read_back(tmp_path: Path) -> None:
    lines = [
        result("a", cost_usd=0.25, input_tokens=10, output_tokens=2, reasons=[]),
        result("b", accepted=False, reasons=["sorry"], timed_out=True, exit_code=-9),
        result("a", attempt=2, condition="human"),
    ]
    for r in lines:
        append_result(tmp_path, r)
    read = read_results(tmp_path)
    assert read.results == lines and read.notes() == []
    assert finished_attempts(read.results) == {("a", 1), ("b", 1), ("a", 2)}
    raw = orjson.loads((tmp_path / RESULTS_FILE).read_bytes().split(b"\n")[1])
    assert raw["v"] == 1 and raw["reasons"] == ["sorry"] and raw["cost_usd"] is None


def test_reading_tolerates_what_real_runs_leave(tmp_path: Path) -> None:
    append_result(tmp_path, result("a", accepted=False))
    append_result(tmp_path, result("b"))
    append_result(tmp_path, result("a", accepted=True, infra_retry=True))  # replaces a/1
    with (tmp_path / RESULTS_FILE).open("ab") as f:
        f.write(orjson.dumps({"v": 2, "task": "future"}) + b"\n")
        f.write(b"not json\n")
        f.write(orjson.dumps({"v": 1, "task": "no verdict"}) + b"\n")
        f.write(b'{"v": 1, "task": "c", "acc')  # killed mid-write
    read = read_results(tmp_path)
    assert [(r.task, r.accepted, r.infra_retry) for r in read.results] == [
        ("b", True, False),
        ("a", True, True),
    ]
    assert read.replaced == 1 and read.skipped_version == 1 and read.skipped_invalid == 2
    assert read.truncated_tail
    notes = " ".join(read.notes())
    assert "truncated" in notes and "replaced" in notes and "schema" in notes
    assert read_results(tmp_path / "nowhere").results == []


def test_usage_json_any_subset_and_unknown_is_never_zero(tmp_path: Path) -> None:
    path = tmp_path / "usage.json"
    assert read_usage(path) == Usage()
    path.write_text('{"input_tokens": 1200, "output_tokens": 80, "model_name": "x"}')
    usage = read_usage(path)
    assert usage.input_tokens == 1200 and usage.output_tokens == 80
    assert usage.cached_input_tokens is None and usage.cost_usd is None
    path.write_text('{"cost_usd": 0.0}')
    assert read_usage(path).cost_usd == 0.0
    for bad in (
        "{",
        "[1]",
        '{"input_tokens": -1}',
        '{"input_tokens": 5, "cached_input_tokens": 9}',
        # Counts past 64 bits and non-finite costs are unknown, not crashes or infinity.
        '{"input_tokens": 18446744073709551616}',
        '{"output_tokens": 18446744073709551615}',
        '{"cost_usd": 1e400}',
        '{"cost_usd": 1e12}',
    ):
        path.write_text(bad)
        assert read_usage(path) == Usage(), bad
    path.write_text('{"input_tokens": 1000000000000, "cost_usd": 12345.5}')  # large, yet real
    assert read_usage(path).input_tokens == 10**12
    merged = result().with_usage(Usage(input_tokens=5, cost_usd=0.1))
    assert merged.input_tokens == 5 and merged.cost_usd == 0.1 and merged.output_tokens is None
