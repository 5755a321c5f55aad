"""The benchmarks run (smoke only: tiny step counts, no timing assertions)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_tools.runs import percentile
from bench import bench_lsp
from bench.__main__ import render_summary
from bench.common import summarize


def test_statistics_helpers() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 95) == 95.0
    s = summarize([3.0, 1.0, 2.0])
    assert s["median_ms"] == 2.0 and s["n"] == 3


def test_the_lsp_bench_paths_produce_samples(tmp_path: Path) -> None:
    raw = bench_lsp.bench_raw(tmp_path, 10, 3)
    bridge, phases = anyio.run(bench_lsp.bench_bridge, tmp_path, 10, 3)
    assert len(raw) == 3 and len(bridge) == 3
    assert all(x > 0 for x in raw + bridge)
    assert set(phases) == {"first_progress_ms", "last_diagnostics_ms"}


@pytest.mark.parametrize("quick", [True, False])
def test_the_summary_renders_tables(quick: bool) -> None:
    rows = {"a": {"ref": summarize([1.0, 2.0]), "x": summarize([2.0, 4.0])}}
    text = render_summary({"bench": {"results": rows, "ratios": {"x": 2.0}}}, quick)
    assert "| x | 2 | 3.000 |" in text and '"x": 2.0' in text


def test_make_bench_summary_is_rebuilt_from_saved_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    import orjson

    import bench.__main__ as runner

    rows = {"raw": summarize([1.0, 2.0]), "ours": summarize([1.0, 3.0])}
    (tmp_path / "lsp_bridge.json").write_bytes(
        orjson.dumps({"benchmark": "lsp_bridge", "results": {"1 declaration": rows}})
    )
    monkeypatch.setattr(runner, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench", "--summary-only", "lsp_bridge"])
    runner.main()
    text = (tmp_path / "SUMMARY.md").read_text()
    assert "### results / 1 declaration" in text
    assert "| ours | 2 | 2.000 |" in text
