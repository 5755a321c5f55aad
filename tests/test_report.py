"""`leanrig report`: statistics from ledgers, and clear messages for broken ledgers."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agent_tools.cli import main
from agent_tools.runs import ReportError, read_ledger, write_report


def entry(tool: str, total: float, queue: float = 0.0, lean: float = 0.0, **kw: object) -> bytes:
    fields = {"v": 1, "ts": "2026-01-01T00:00:00Z", "tool": tool, "total_ms": total}
    fields.update(queue_ms=queue, lean_ms=lean, outcome="ok", **kw)
    return orjson.dumps(fields) + b"\n"


def test_per_tool_statistics_and_overhead(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    lines = [
        entry("set_proof", t, queue=1.0, lean=t - 2.0, session="s1", task="a", body_sha="abc")
        for t in (10.0, 20.0, 30.0, 40.0)
    ]  # fmt: skip
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


def test_truncated_and_mixed_version_ledgers_are_read_with_notes(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    old = orjson.dumps({"v": 0, "tool": "set_proof", "total_ms": 1}) + b"\n"
    ledger.write_bytes(entry("set_proof", 5.0) + old + b"garbage\n" + entry("set_proof", 7.0)
                       + b'{"v": 1, "tool": "set_pr')  # fmt: skip
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
        ledger.record(session="s1", task="t", tool="set_proof", queue_ms=0.0, lean_ms=1.0,
                      total_ms=2.0, outcome="ok", version=i)  # fmt: skip
    assert [e["version"] for e in ledger.for_session("s1")] == [0, 1, 2]
    ledger.forget("s1")
    assert ledger.for_session("s1") == []
    ledger.close()
    assert len(read_ledger(tmp_path / "l.jsonl").entries) == 3


def test_benchmark_metrics_score_completion_and_seconds_per_point(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"

    def at(second: int, **kw: object) -> bytes:
        fields = {"v": 1, "ts": f"2026-01-01T00:00:{second:02d}+00:00", "queue_ms": 0.0,
                  "lean_ms": 0.0, "total_ms": 1.0, "outcome": "ok", **kw}  # fmt: skip
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
    assert b["attempted"] == 2 and b["score"] == 1 and b["completion"] == 0.5
    assert b["tasks"]["t1"]["time_to_accept_s"] == 10.0
    assert b["tasks"]["t2"]["accepted"] is False
    assert b["wall_s"] == 20.0  # 12 s closed + 8 s first-to-last for the unclosed session
    assert b["seconds_per_score_point"] == 20.0
    assert "score 1 of 2" in (tmp_path / "out" / "report.md").read_text()
