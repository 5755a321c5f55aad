"""Edit → fresh diagnostics: lsp_bridge vs a minimal raw LSP exchange, same Lean, same run.

Files: one declaration, and 1000 preceding declarations (is the cost in the prefix?). Each step
alternates the last theorem between a wrong and a right proof, so every version has new
diagnostics. Also reports where the 1000-declaration time goes (first progress, last report,
barrier) and the effect of incremental diagnostics.
"""

from __future__ import annotations

import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import anyio

from lsp_bridge import PRELUDE_HEADER, REPORT_DELAY_MS, LeanClient, find_lean

from .common import print_table, summarize, write_result
from .raw_lsp import time_alternating_edits

HEADER = PRELUDE_HEADER
GOOD = "theorem foo : @Eq N N.z N.z := @Eq.refl N N.z\n"
BAD = "theorem foo : @Eq N N.z N.z := @Eq.refl N N.s\n"


def prefix(count: int) -> str:
    return "".join(f"def d{i} : N := N.s N.z\n" for i in range(count))


def texts(count: int) -> tuple[str, str]:
    body = HEADER + prefix(count)
    return body + BAD, body + GOOD


def bench_raw(project: Path, count: int, steps: int) -> list[float]:
    bad, good = texts(count)
    argv = [str(find_lean().lean), "--server", f"-Dserver.reportDelayMs={REPORT_DELAY_MS}"]
    return time_alternating_edits(argv, project, bad, good, steps)


async def bench_bridge(
    project: Path, count: int, steps: int, *, incremental: bool = True
) -> tuple[list[float], dict[str, list[float]]]:
    from dataclasses import replace

    lean = find_lean()
    command = replace(lean.server_command(project), incremental_diagnostics=incremental)
    bad, good = texts(count)
    uri = (project / "Bridge.lean").as_uri()
    phases: dict[str, list[float]] = {"first_progress_ms": [], "last_diagnostics_ms": []}
    async with LeanClient.start(command) as client:
        marks: dict[str, float] = {}
        original = client._on_notification

        def spy(method: str, params: Any) -> None:
            now = time.perf_counter()
            if method == "$/lean/fileProgress":
                marks.setdefault("first_progress", now)
            elif method == "textDocument/publishDiagnostics":
                marks["last_diagnostics"] = now
            original(method, params)

        client.transport._on_notification = spy
        await client.open(uri, bad)
        report = await client.wait_for(uri)
        assert report.errors, "BAD text must produce an error"
        samples = []
        for i in range(steps):
            marks.clear()
            t = time.perf_counter()
            await client.change(uri, good if i % 2 == 0 else bad)
            report = await client.wait_for(uri)
            samples.append((time.perf_counter() - t) * 1000)
            assert bool(report.errors) == (i % 2 == 1)
            for key in ("first_progress", "last_diagnostics"):
                if key in marks:
                    phases[f"{key}_ms"].append((marks[key] - t) * 1000)
    return samples, phases


async def _no_incremental(
    project: Path, count: int, steps: int
) -> tuple[list[float], dict[str, list[float]]]:
    return await bench_bridge(project, count, steps, incremental=False)


def run(quick: bool = False) -> dict[str, Any]:
    steps = 15 if quick else 60
    results: dict[str, Any] = {}
    growth: dict[str, dict[str, float]] = {}
    with TemporaryDirectory(prefix="leanrig-bench-") as tmp:
        project = Path(tmp)
        for count in (0, 10, 100, 1000):
            label = "1 declaration" if count == 0 else f"{count} preceding declarations"
            raw = bench_raw(project, count, steps)
            bridge, phases = anyio.run(bench_bridge, project, count, steps)
            rows = {"raw LSP (floor)": summarize(raw), "lsp_bridge": summarize(bridge)}
            if count == 1000:
                full, _ = anyio.run(_no_incremental, project, count, steps)
                rows["lsp_bridge, no incremental diagnostics"] = summarize(full)
                for name, values in phases.items():
                    rows[f"  where: {name.removesuffix('_ms')}"] = summarize(values)
            print_table(f"edit → fresh diagnostics, {label}", rows, "raw LSP (floor)")
            results[label] = rows
            growth[label] = {
                "raw_median_ms": rows["raw LSP (floor)"]["median_ms"],
                "lsp_bridge_median_ms": rows["lsp_bridge"]["median_ms"],
            }
    print("\n## does cost grow with the prefix? (median ms)")
    for label, g in growth.items():
        print(
            f"{label:<32} raw {g['raw_median_ms']:>8.2f}   lsp_bridge {g['lsp_bridge_median_ms']:>8.2f}"
        )
    write_result("lsp_bridge", {"steps": steps, "results": results, "prefix_growth": growth})
    return {"results": results, "prefix_growth": growth}


if __name__ == "__main__":
    from agent_tools.cli import configure_logging

    configure_logging()
    run()
