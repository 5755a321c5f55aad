"""Every benchmark registered in bench/__main__.py runs at a smoke size (no timing asserted), and
so does the summary step `make bench` ends with."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from agent_tools.runs import percentile
from bench import bench_lsp
from bench.__main__ import render_summary
from bench.common import DEMO, summarize
from bench.ts_mcp import TsClientUnavailable


def test_statistics_helpers() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile(list(map(float, range(1, 101))), 95) == 95.0
    s = summarize([3.0, 1.0, 2.0])
    assert s["median_ms"] == 2.0 and s["n"] == 3


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


def test_running_one_benchmark_keeps_the_others_in_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import sys
    import types

    import orjson

    import bench.__main__ as runner

    rows = {"raw": summarize([1.0, 2.0]), "ours": summarize([1.0, 3.0])}
    (tmp_path / "lsp_bridge.json").write_bytes(
        orjson.dumps({"benchmark": "lsp_bridge", "results": {"saved earlier": rows}})
    )
    fresh = types.SimpleNamespace(run=lambda quick: {"results": {"just now": rows}})
    monkeypatch.setattr(runner, "RESULTS", tmp_path)
    monkeypatch.setattr(runner, "LATEST_RESULTS", tmp_path / "latest")
    monkeypatch.setattr(importlib, "import_module", lambda name: fresh)
    monkeypatch.setattr(sys, "argv", ["bench", "pool"])
    runner.main()
    text = (tmp_path / "latest" / "SUMMARY.md").read_text()
    assert "## lsp_bridge" in text and "### results / saved earlier" in text
    assert "## pool" in text and "### results / just now" in text
    assert text.index("## lsp_bridge") < text.index("## pool")  # the registry's order


@pytest.mark.parametrize(
    ("argv", "written"),
    [(["--quick", "pool"], "quick"), (["pool"], "latest"), (["--reference", "pool"], "")],
)
def test_only_an_explicit_reference_run_writes_over_the_reference_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], written: str
) -> None:
    """Results go to latest/ (quick/ with `--quick`); only `--reference` writes bench/results/."""
    import importlib
    import sys
    import types

    import bench.__main__ as runner
    from bench import common

    reference = tmp_path / "results"
    monkeypatch.setattr(runner, "RESULTS", reference)
    monkeypatch.setattr(runner, "QUICK_RESULTS", reference / "quick")
    monkeypatch.setattr(runner, "LATEST_RESULTS", reference / "latest")
    monkeypatch.setattr(common, "_written_to", [reference])

    def run(quick: bool) -> dict[str, Any]:
        result = {"results": {"smoke": {"raw": summarize([1.0, 2.0])}}}
        common.write_result("pool", result)
        return result

    monkeypatch.setattr(importlib, "import_module", lambda name: types.SimpleNamespace(run=run))
    monkeypatch.setattr(sys, "argv", ["bench", *argv])
    runner.main()
    out = reference / written if written else reference
    assert (out / "pool.json").exists() and (out / "SUMMARY.md").exists()
    if written:
        assert not (reference / "pool.json").exists()
        assert not (reference / "SUMMARY.md").exists()


# Each benchmark's own functions with a handful of steps; nothing is written to bench/results/.


def test_every_registered_benchmark_has_a_smoke_test() -> None:
    from bench.__main__ import BENCHES

    assert set(BENCHES) == set(SMOKES), "a benchmark without a smoke test below (or a stale one)"


def _samples(rows: dict[str, Any]) -> None:
    assert rows and all(r["n"] > 0 and r["median_ms"] > 0 for r in rows.values()), rows


def smoke_lsp_bridge(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    raw = bench_lsp.bench_raw(tmp_path, 3, 2)
    bridge, phases = anyio.run(bench_lsp.bench_bridge, tmp_path, 3, 2)
    assert set(phases) == {"first_progress_ms", "last_diagnostics_ms"}
    full, _ = anyio.run(bench_lsp._no_incremental, tmp_path, 3, 2)
    rows = {
        "raw LSP (floor)": summarize(raw),
        "lsp_bridge": summarize(bridge),
        "lsp_bridge, no incremental diagnostics": summarize(full),
    }
    _samples(rows)
    return {"results": {"3 preceding declarations": rows}}


def smoke_pool(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    from bench import bench_pool
    from lsp_bridge import find_lean
    from repl_pool import LeanEnvironment

    env = LeanEnvironment(find_lean(), tmp_path)
    acquire = anyio.run(bench_pool.acquire_latencies, env, 3, 1)
    _samples(acquire)
    texts = bench_pool.check_texts(4)
    rows = {
        "spawn `lean file.lean` per check, 2 parallel": bench_pool.spawn_throughput(
            tmp_path, texts[:2], 2
        ),
        "WarmPool, 1 process(es)": anyio.run(bench_pool.pool_throughput, env, texts, 1),
    }  # pool_throughput asserts half of the checks fail, as check_texts makes them
    assert all(rate > 0 for rate in rows.values()), rows
    return {"acquire": acquire, "throughput_checks_per_s": rows, "checks": len(texts)}


def smoke_agent_step(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    from bench import bench_agent

    def no_peers() -> Path:  # peers come from PyPI: test_bench_peers runs them when installed
        raise OSError("peers are not installed by the test suite")

    def no_ts_client(*_args: object) -> None:  # from npm: test_ts_client_path runs it
        raise TsClientUnavailable("not installed by the test suite")

    monkeypatch.setattr(bench_agent, "ensure_peers", no_peers)
    monkeypatch.setattr(bench_agent, "TsMcp", no_ts_client)
    notes: list[str] = []
    rows, cpu = bench_agent.measure(tmp_path, 2, 2, notes)
    _samples(rows)
    assert {
        "raw Lean LSP (floor)",
        "leanrig set_proof, MCP stdio",
        "leanrig set_proof, MCP stdio, minimal client",
    } <= set(cpu), cpu
    assert not set(cpu) & {"leanrig set_proof, JSON-RPC stdio"}, cpu
    assert all(s["n"] == 2 and s["median_ms"] > 0 for s in cpu.values()), cpu
    assert any("peers not installed" in n for n in notes), notes
    assert any("TypeScript SDK client rows missing" in n for n in notes), notes
    return {
        "results": {"prefix 2": rows},
        "client_cpu": {"prefix 2": cpu},
        "ratios": {"prefix 2": bench_agent.ratios_of(rows)},
    }


def smoke_sessions(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    from bench import bench_sessions
    from tests.rpc_client import DEMO, rpc_server

    async def measure() -> dict[str, Any]:
        async with rpc_server(DEMO, "--run-dir", str(tmp_path), "--max-processes", "2") as rpc:
            latencies, queue = await bench_sessions.sessions(rpc, 2, 2)
            memory = await bench_sessions.memory(rpc, 3)
        return {
            "concurrency": {
                "2 concurrent session(s), set_proof": summarize(latencies),
                "2 session(s): of which queue": summarize(queue),
            },
            "memory": {"edits": 3, "samples": memory},
        }

    result = anyio.run(measure)
    assert len(result["concurrency"]["2 concurrent session(s), set_proof"]) and result["memory"]
    assert result["concurrency"]["2 concurrent session(s), set_proof"]["n"] == 4
    assert all(s["processes"] >= 1 and s["rss_mb"] > 0 for s in result["memory"]["samples"])
    return result


def smoke_editor(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    from bench import bench_editor
    from bench.raw_lsp import time_alternating_edits
    from lsp_bridge import find_lean

    bad, good = bench_editor.HEADER + bench_editor.BAD, bench_editor.HEADER + bench_editor.GOOD
    suite = bench_editor._suite(tmp_path)
    direct = tmp_path / "direct"
    # The unsandboxed proxy is the same code with a flag; each proxy start is slow.
    variants = {
        "lean --server (direct)": ([str(find_lean().lean), "--server"], direct),
        "leanrig lsp (sandboxed)": (
            bench_editor.proxy_argv(suite, tmp_path / "ws2", tmp_path / "run2"),
            tmp_path / "ws2",
        ),
    }
    rows = {}
    for name, (argv, cwd) in variants.items():
        cwd.mkdir()
        rows[name] = summarize(time_alternating_edits(argv, cwd, bad, good, 2))
    _samples(rows)
    assert (tmp_path / "run2" / "ledger.jsonl").read_text().strip()
    return {"results": rows}


def smoke_ray(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    """The Ray variant only (the local one is the same function without an address)."""
    pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install .[ray])")
    from ray.cluster_utils import Cluster

    from bench import bench_ray

    cluster: Any = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"lean_slots": 1}, "include_dashboard": False},
    )
    try:
        remote = anyio.run(bench_ray.variant, cluster.address, 2, tmp_path)
    finally:
        cluster.shutdown()
    assert set(remote) == {"1 session(s)", "2 session(s)"}
    assert all(r["n"] > 0 and r["steps_per_s"] > 0 for r in remote.values()), remote
    return {name: {"Ray (1 node, same machine)": row} for name, row in remote.items()}


def smoke_run_ray(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    """`leanrig run --ray`, two tasks without think time, on the shared two-node cluster."""
    from bench import bench_run_ray

    suite = Path(shutil.copytree(DEMO, tmp_path / "demo"))
    cluster = _request.getfixturevalue("two_node_cluster")
    placed = anyio.run(
        lambda: bench_run_ray.measure(
            suite,
            tmp_path / "ray",
            tasks=["refl_z", "and_swap"],
            parallel=2,
            delay=0,
            ray=cluster.address,
        ),
        backend="asyncio",
    )
    assert placed["verdicts"] == {"refl_z": True, "and_swap": True}
    assert placed["nodes"] and placed["placement"]["n"] == 2, placed
    return {"overhead": {"Ray": placed["overhead"]}, "placement": {"Ray": placed["placement"]}}


def smoke_gateway(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    """A few calls each way; the gateway's rows beside the direct ones."""
    from bench import bench_gateway

    result: dict[str, Any] = anyio.run(bench_gateway.measure, 3)
    assert set(result["anthropic call"]) == {"anthropic direct call", "anthropic gateway call"}
    assert all(row["n"] == 3 for row in result["responses ttft"].values())
    return result


def smoke_queries(tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    """leanrig's question tools over MCP stdio, a few calls each, every answer checked (no peer)."""
    from bench import bench_queries

    notes: list[str] = []
    measured = anyio.run(
        functools.partial(bench_queries.measure, 3, tmp_path, notes, with_peer=False)
    )
    assert not [n for n in notes if "answered unexpectedly" in n or "has no" in n], notes
    rows = {
        f"{file} / {tool}": summarize(ms)
        for file, tools in measured["samples"].items()
        for tool, by_row in tools.items()
        for ms in by_row.values()
    }
    assert len(rows) == 2 * 8, sorted(rows)  # two task files, eight rows each
    _samples(rows)
    return {"results": {"smoke": rows}}


def smoke_equiv(_tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    """Two candidates' statement verdicts beside proof verdicts; their outcomes the plan's."""
    from bench import bench_equiv

    result: dict[str, Any] = anyio.run(bench_equiv.measure, 1, 2)
    assert result["outcomes"] == {"add_comm": True, "add_zero": False}
    _samples(result["results"])
    return result


def smoke_pygls_relay(_tmp_path: Path, _request: pytest.FixtureRequest) -> dict[str, Any]:
    """Both relays time every message; pygls's typed round trip drops Lean's diagnostic extras."""
    from bench import pygls_relay

    result: dict[str, Any] = pygls_relay.measure(5, 2)
    assert result["round_trip_changes"]["publishDiagnostics (1)"], result["round_trip_changes"]
    for rows in result["results"].values():
        _samples(rows)
    return result


SMOKES: dict[str, Callable[[Path, pytest.FixtureRequest], dict[str, Any]]] = {
    "lsp_bridge": smoke_lsp_bridge,
    "pool": smoke_pool,
    "agent_step": smoke_agent_step,
    "sessions": smoke_sessions,
    "editor": smoke_editor,
    "ray": smoke_ray,
    "gateway": smoke_gateway,
    "queries": smoke_queries,
    "run_ray": smoke_run_ray,
    "equiv": smoke_equiv,
    "pygls_relay": smoke_pygls_relay,
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.ray] if n in ("ray", "run_ray") else []) for n in SMOKES],
)
def test_the_benchmark_runs_small_and_summarizes(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    result = SMOKES[name](tmp_path, request)
    text = render_summary({name: result}, quick=True)
    assert f"## {name}" in text and "| variant | n | median ms | p95 ms | vs first |" in text


def test_the_peer_paths_of_agent_step_when_installed(tmp_path: Path) -> None:
    import shutil

    from bench import bench_agent
    from bench.peers import PACKAGES, VENV

    stamp = VENV / ".installed"
    if not stamp.exists() or stamp.read_text() != " ".join(PACKAGES):
        pytest.skip(
            "the bench peers (lean-lsp-mcp, leanclient) are not installed; `make bench` "
            "installs them from PyPI into bench/.peers, the test suite does not"
        )
    python = VENV / "bin" / "python"
    suite = bench_agent.make_suite(tmp_path, 0)
    bad, good, lib = bench_agent.texts(suite)
    (tmp_path / "peer").mkdir()
    assert bench_agent.leanclient_peer(python, tmp_path / "peer", bad, good, lib, 2)
    shutil.copytree(bench_agent.DEMO / "Demo", tmp_path / "mcp" / "Demo")
    peer = anyio.run(bench_agent.lean_lsp_mcp_peer, python, tmp_path / "mcp", bad, good, lib, 2)
    assert len(peer) == 2


def test_the_typescript_client_path_of_agent_step_when_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import bench_agent
    from bench.ts_mcp import CLIENT, SDK, sdk_version

    installed = CLIENT / "node_modules" / SDK / "package.json"
    if not installed.exists() or orjson.loads(installed.read_bytes())["version"] != sdk_version():
        pytest.skip(
            "the TypeScript SDK client is not installed; `make bench` installs it from npm "
            "into bench/ts_client, the test suite does not"
        )
    monkeypatch.setattr(bench_agent, "TS_WARMUP", 1)
    suite = bench_agent.make_suite(tmp_path, 0)
    with ExitStack() as stack:
        step = bench_agent.ts_mcp_variant(
            stack,
            suite,
            tmp_path / "runs",
            {
                bench_agent.TASK: "this",
                bench_agent.OTHER: "other",
            },
        )
        rows = [anyio.run(step, i) for i in range(2)]  # a proof, then a wrong body
    assert all(set(r) == {"this", "other"} and min(r.values()) > 0 for r in rows), rows
    from bench.ts_mcp import TsClientUnavailable, TsMcp

    with pytest.raises(TsClientUnavailable):
        TsMcp(tmp_path / "no-such-suite", tmp_path / "runs-none", tmp_path)


def test_the_early_barrier_diagnostic_runs_small() -> None:
    from bench import early_barrier

    result = anyio.run(early_barrier.measure, 1)
    assert len(result["rows"]) == 8  # two files x two bodies x the two barriers
    assert result["early_barrier_ends"] > 0 and result["early_barrier_faults"] == 0
