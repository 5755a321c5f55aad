"""Where a `set_proof` step's time goes: raw Lean (plain, and asking the same answers a step
returns) vs leanrig over MCP stdio (the SDK's client, and a minimal blocking client), interleaved
rounds — so a machine that speeds up or slows down moves every row alike —, with the leanrig
server's own CPU time per step (psutil: the server process only, not its Lean
children) — far less sensitive to a loaded machine than wall time — and a cProfile of the
server.

    python -m bench.step_profile [--rounds R] [--steps K] [--baseline DIR] [--profile OUT] [--library]

``--baseline DIR``: also serve from another checkout (e.g. ``git archive HEAD~3 | tar -x -C
DIR``) in the same rounds, so before/after are measured in one run. ``--profile OUT``: run this
tree's server under cProfile (``OUT``: the stats file; a summary is printed); its wall and CPU
rows then include the profiler's overhead, so a profiled run is for the breakdown only.

Not registered in `make bench` (a diagnostic, not a reference table): results go to
bench/results/latest/step_profile.json (bench/results/ holds the committed reference run).
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lsp_bridge import REPORT_DELAY_MS, find_lean

from .bench_agent import RIGHT, TASK, WRONG, make_library_suite, make_suite, step_positions, texts
from .common import ROOT, print_table, summarize, write_result
from .raw_lsp import RawLean
from .raw_mcp import RawMcp


class McpVariant:
    """One `leanrig serve` over MCP stdio, kept open across rounds; its pid for CPU times."""

    def __init__(self, name: str, tree: Path, suite: Path, run_dir: Path, profile: Path | None):
        self.name = name
        self.tree = tree
        self.suite = suite
        self.run_dir = run_dir
        self.profile = profile
        self.sid = ""
        self.client: Client | None = None
        self.proc: psutil.Process | None = None
        self.step = 0
        self.samples: list[float] = []
        self.cpu_ms: list[float] = []
        self.client_cpu_ms: list[float] = []

    async def open(self, stack: AsyncExitStack) -> None:
        entry = "bench.profiled_serve" if self.profile else "agent_tools.cli"
        env = {**os.environ, "PYTHONPATH": str(self.tree)}
        if self.profile:  # this tree's server, profiled in steady state (profiled_serve.py)
            env["PYTHONPATH"] = f"{self.tree}{os.pathsep}{ROOT}"
            env["LEANRIG_PROFILE_OUT"] = str(self.profile)
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", entry, "serve", "--suite", str(self.suite), "--run-dir", str(self.run_dir)],
            cwd=str(self.tree),
            env=env,
        )
        self.client = await stack.enter_async_context(Client(params))
        opened = await self.client.call_tool("open_task", {"task_id": TASK})
        assert isinstance(opened.structured_content, dict)
        self.sid = opened.structured_content["session_id"]
        marker = str(self.run_dir)
        for child in psutil.Process().children(recursive=True):
            try:
                if marker in child.cmdline() and "serve" in child.cmdline():
                    self.proc = child
            except psutil.Error:
                continue
        assert self.proc is not None, "server process not found"
        await self.steps(4, record=False)  # warm-up
        if self.profile:
            self.proc.send_signal(signal.SIGUSR1)
            await anyio.sleep(0.2)

    async def close(self) -> None:
        """Stop the profiler (the stats file is written by the server)."""
        if self.profile and self.proc is not None:
            self.proc.send_signal(signal.SIGUSR2)
            await anyio.sleep(2.0)  # the server writes the stats file on the signal
            assert self.profile.exists(), "no profile written"

    async def steps(self, count: int, record: bool = True) -> None:
        assert self.client is not None
        assert self.proc is not None
        before = self.proc.cpu_times()
        client_before = time.process_time()
        samples = []
        for _ in range(count):
            right = self.step % 2 == 0
            self.step += 1
            body = RIGHT if right else WRONG
            t = time.perf_counter()
            result = await self.client.call_tool(
                "set_proof", {"session_id": self.sid, "body": body}
            )
            samples.append((time.perf_counter() - t) * 1000)
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            assert result.structured_content["complete"] == right
        after = self.proc.cpu_times()
        client = time.process_time() - client_before
        if record:
            self.client_cpu_ms.append(client * 1000 / count)
            self.samples += samples
            cpu = (after.user - before.user) + (after.system - before.system)
            self.cpu_ms.append(cpu * 1000 / count)


async def interleaved(
    work: Path, suite: Path, trees: dict[str, Path], rounds: int, steps: int, profile: Path | None
) -> dict[str, Any]:
    bad, good, lib = texts(suite)
    argv = [str(find_lean().lean), "--server", f"-Dserver.reportDelayMs={REPORT_DELAY_MS}"]
    raw_dir = work / "raw"
    raw_dir.mkdir()
    raw = RawLean(argv, raw_dir, {**os.environ, "LEAN_PATH": str(lib)})
    raw_uri = (raw_dir / "Raw.lean").as_uri()
    raw.open(raw_uri, bad)
    raw_samples: list[float] = []
    raw_step = 0
    # The same answers a leanrig step gets, asked the fastest way (bench_agent.step_positions).
    same_dir = work / "raw-same"
    same_dir.mkdir()
    same = RawLean(argv, same_dir, {**os.environ, "LEAN_PATH": str(lib)})
    same_uri = (same_dir / "Raw.lean").as_uri()
    same.open(same_uri, bad)
    ask = step_positions(suite)
    same_samples: list[float] = []
    # This tree's server driven by a minimal blocking MCP client (bench/raw_mcp.py).
    minimal = RawMcp(suite, work / "runs-minimal", ROOT)
    minimal_proc = psutil.Process(minimal.proc.pid)
    minimal_sid = minimal.call_tool("open_task", {"task_id": TASK})["session_id"]
    minimal_samples: list[float] = []
    minimal_cpu: list[float] = []
    variants = [
        McpVariant(name, tree, suite, work / f"runs-{i}", profile if i == 0 else None)
        for i, (name, tree) in enumerate(trees.items())
    ]
    try:
        async with AsyncExitStack() as stack:
            for v in variants:
                await v.open(stack)
            for r in range(rounds):
                order = variants if r % 2 == 0 else variants[::-1]
                # The blocking clients: fine between the async rounds.
                before = minimal_proc.cpu_times()
                for i in range(steps):
                    right = (raw_step + i) % 2 == 0
                    t = time.perf_counter()
                    out = minimal.call_tool(
                        "set_proof", {"session_id": minimal_sid, "body": RIGHT if right else WRONG}
                    )
                    minimal_samples.append((time.perf_counter() - t) * 1000)
                    assert out["complete"] == right
                after = minimal_proc.cpu_times()
                busy = (after.user - before.user) + (after.system - before.system)
                minimal_cpu.append(busy * 1000 / steps)
                for i in range(steps):
                    t = time.perf_counter()
                    same.change(same_uri, good if (raw_step + i) % 2 == 0 else bad, ask)
                    same_samples.append((time.perf_counter() - t) * 1000)
                for _ in range(steps):
                    t = time.perf_counter()
                    raw.change(raw_uri, good if raw_step % 2 == 0 else bad)
                    raw_samples.append((time.perf_counter() - t) * 1000)
                    raw_step += 1
                for v in order:
                    await v.steps(steps)
            for v in variants:
                await v.close()
    finally:
        raw.close()
        same.close()
        minimal.close()
    rows: dict[str, Any] = {
        "raw Lean LSP (floor)": summarize(raw_samples),
        "raw Lean LSP, same answers (floor)": summarize(same_samples),
        "leanrig set_proof, MCP stdio, minimal client": summarize(minimal_samples),
    }
    raw_median = statistics.median(raw_samples)
    cpu: dict[str, Any] = {
        "leanrig set_proof, MCP stdio, minimal client": {
            "server_cpu_ms_per_step_median": round(statistics.median(minimal_cpu), 3),
            "server_cpu_ms_per_step_min": round(min(minimal_cpu), 3),
            "client_cpu_ms_per_step_median": 0.0,
            "vs_raw": round(statistics.median(minimal_samples) / raw_median, 2),
        }
    }
    for v in variants:
        rows[v.name] = summarize(v.samples)
        cpu[v.name] = {
            "server_cpu_ms_per_step_median": round(statistics.median(v.cpu_ms), 3),
            "server_cpu_ms_per_step_min": round(min(v.cpu_ms), 3),
            "client_cpu_ms_per_step_median": round(statistics.median(v.client_cpu_ms), 3),
            "vs_raw": round(statistics.median(v.samples) / raw_median, 2),
        }
    print_table(f"set_proof over MCP stdio ({rounds} rounds x {steps} steps)", rows,
                "raw Lean LSP (floor)")  # fmt: skip
    for name, c in cpu.items():
        print(f"  {name}: server CPU {c['server_cpu_ms_per_step_median']:.2f} ms/step "
              f"(min {c['server_cpu_ms_per_step_min']:.2f}), MCP client CPU "
              f"{c['client_cpu_ms_per_step_median']:.2f}; {c['vs_raw']:.2f}x raw")  # fmt: skip
    return {"results": rows, "server_cpu": cpu}


def print_profile(path: Path, steps: int) -> None:
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(60)
    print(f"(profile over ~{steps} steps plus startup; divide by steps for per-step figures)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.step_profile")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--baseline", type=Path, help="another checkout, served in the same run")
    parser.add_argument("--profile", type=Path, help="cProfile this tree's server to this file")
    parser.add_argument(
        "--library",
        action="store_true",
        help="the task imports the corpus's large library (bench_agent.make_library_suite)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write bench/results")
    args = parser.parse_args()
    trees = {"leanrig set_proof, MCP stdio (this tree)": ROOT}
    if args.baseline is not None:
        trees["leanrig set_proof, MCP stdio (baseline)"] = args.baseline.resolve()
    with tempfile.TemporaryDirectory(prefix="leanrig-step-profile-") as tmp:
        work = Path(tmp)
        suite = make_library_suite(work) if args.library else make_suite(work, 0)
        manifest = suite / "suite.toml"  # without [lad]: a baseline may predate it
        text = manifest.read_text(encoding="utf-8")
        if "\n[lad]" in text:
            head, rest = text.split("\n[lad]", 1)
            manifest.write_text(head + "\n[[tasks]]" + rest.split("[[tasks]]", 1)[1])
        result = anyio.run(interleaved, work, suite, trees, args.rounds, args.steps, args.profile)
    if args.profile is not None:
        print_profile(args.profile, args.rounds * args.steps)
    result["rounds"], result["steps_per_round"] = args.rounds, args.steps
    if not args.no_write:
        write_result("step_profile", result)


if __name__ == "__main__":
    main()
