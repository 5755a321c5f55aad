"""Where one `set_proof` step's wall time goes, span by span: `time.perf_counter` stamps
(CLOCK_MONOTONIC, shared by processes) in a minimal blocking MCP client and in the server —
line read, our tool start and end, the one write to Lean, each Lean answer, the reply — and the
median of each span over the steps, beside the raw floor measured in the same run. Each server
stamp also records the server's CPU time (``time.process_time``), so each span shows how much
of it the server spent computing: on two cores, CPU this process spends while Lean elaborates
is taken from Lean.

    python -m bench.step_stamps [--steps N] [--idle SECONDS] [--library]

The server is `leanrig serve` with a few methods wrapped to stamp (``--serve`` mode of this
module, like bench/profiled_serve.py); the wrapping costs a few microseconds per stamp. Not in
`make bench` (a diagnostic): prints a table, writes bench/results/step_stamps.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

import psutil

STAMPS_VAR = "LEANRIG_STAMPS_OUT"
LINE_READ = "server: line read"  # (the trace point that starts a step)


def _serve() -> int:
    """`leanrig serve`, stamping. Run as ``python -m bench.step_stamps --serve serve ...``:
    leanrig's trace points (the ``leanrig.trace`` audit event, lsp_bridge.TRACE_EVENT)
    stamped through an audit hook; no method of leanrig's is replaced."""
    from agent_tools.cli import main as leanrig
    from lsp_bridge import TRACE_EVENT

    out: TextIO = open(os.environ[STAMPS_VAR], "a", buffering=1)  # noqa: SIM115 (process-long)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == TRACE_EVENT:
            what = " ".join(str(a) for a in args)
            out.write(
                f"{time.perf_counter():.6f} {time.process_time() * 1000:.4f} server: {what}\n"
            )

    sys.addaudithook(hook)
    return leanrig(sys.argv[2:])


Span = tuple[float, float | None]  # median ms from the client's send; server CPU ms since read


def _spans(path: Path, client: list[tuple[float, float]]) -> dict[str, Span]:
    """Per stamp (its first occurrence in a step): the median ms from the client's send, and
    the median server CPU ms from the step's line read to it."""
    stamps = []
    for line in path.read_text().splitlines():
        when, cpu_ms, label = line.split(" ", 2)
        stamps.append((float(when), float(cpu_ms), label))
    stamps.sort()
    at: dict[str, list[float]] = defaultdict(list)
    cpu_at: dict[str, list[float]] = defaultdict(list)
    i = 0
    for sent, received in client:
        seen: set[str] = set()
        read_cpu: float | None = None
        while i < len(stamps) and stamps[i][0] < sent:
            i += 1
        while i < len(stamps) and stamps[i][0] <= received:
            t, cpu, what = stamps[i]
            if what not in seen:
                seen.add(what)
                at[what].append((t - sent) * 1000)
                if read_cpu is None and what == LINE_READ:
                    read_cpu = cpu
                if read_cpu is not None:
                    cpu_at[what].append(cpu - read_cpu)
            i += 1
        at["client: answer read"].append((received - sent) * 1000)
    steps = len(client)
    return {
        w: (
            round(statistics.median(v), 3),
            round(statistics.median(cpu_at[w]), 3) if len(cpu_at[w]) >= steps * 0.9 else None,
        )
        for w, v in at.items()
        if len(v) >= steps * 0.9
    }


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        raise SystemExit(_serve())
    from lsp_bridge import REPORT_DELAY_MS, find_lean

    from .bench_agent import RIGHT, TASK, WRONG, make_library_suite, make_suite, texts
    from .common import CpuMeter, write_result
    from .raw_lsp import RawLean
    from .raw_mcp import RawMcp

    parser = argparse.ArgumentParser(prog="python -m bench.step_stamps")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument(
        "--idle",
        type=float,
        default=0.0,
        help="seconds of idle before each step (an agent thinks between steps)",
    )
    parser.add_argument(
        "--library",
        action="store_true",
        help="the task imports the corpus's large library (bench_agent.make_library_suite)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="leanrig-stamps-") as tmp:
        work = Path(tmp)
        suite = make_library_suite(work) if args.library else make_suite(work, 0)
        bad, good, lib = texts(suite)
        stamps = work / "stamps.txt"
        os.environ[STAMPS_VAR] = str(stamps)
        raw_dir = work / "raw"
        raw_dir.mkdir()
        argv = [str(find_lean().lean), "--server", f"-Dserver.reportDelayMs={REPORT_DELAY_MS}"]
        lean = RawLean(argv, raw_dir, {**os.environ, "LEAN_PATH": str(lib)})
        try:
            uri = (raw_dir / "Raw.lean").as_uri()
            lean.open(uri, bad)
            lean.alternate(uri, good, bad, 4)  # warm-up, as the server's steps below
            raw_cpu = CpuMeter(psutil.Process(lean.proc.pid), "raw Lean (its two processes)")
            raw_samples = lean.alternate(uri, good, bad, args.steps, idle=args.idle)
            raw_cpu.stop(args.steps)
        finally:
            lean.close()
        raw = statistics.median(raw_samples)
        server = RawMcp(suite, work / "runs", Path(__file__).resolve().parent.parent,
                        module=("bench.step_stamps", "--serve"))  # fmt: skip
        client: list[tuple[float, float]] = []
        try:
            sid = server.call_tool("open_task", {"task_id": TASK})["session_id"]
            for i in range(args.steps + 4):
                if i == 4:
                    server_process = psutil.Process(server.proc.pid)
                    ours = CpuMeter(server_process, "leanrig serve (the server process)",
                                    children=False)  # fmt: skip
                    theirs = CpuMeter(server_process, "leanrig's Lean (its processes)",
                                      itself=False)  # fmt: skip
                time.sleep(args.idle)
                sent = time.perf_counter()
                body = RIGHT if i % 2 == 0 else WRONG
                server.call_tool("set_proof", {"session_id": sid, "body": body})
                if i >= 4:
                    client.append((sent, time.perf_counter()))
            ours.stop(args.steps)
            theirs.stop(args.steps)
        finally:
            server.close()
        spans = _spans(stamps, client)
        # The steps alternate, right body first (i = 4 is even).
        by_body = {
            "right body (clean: goals not waited for)": _spans(stamps, client[::2]),
            "wrong body (goals asked with the change)": _spans(stamps, client[1::2]),
        }
    print(f"## one set_proof step over MCP stdio, minimal client ({args.steps} steps, medians)")
    for title, of_body in [("all steps", spans), *by_body.items()]:
        print(f"### {title}")
        print("  wall from send (+ span)   server CPU from read (+ span)")
        previous, previous_cpu = 0.0, 0.0
        for what, (ms, cpu) in sorted(of_body.items(), key=lambda kv: kv[1][0]):
            cpu_text = f"{cpu:7.2f} ms  (+{cpu - previous_cpu:5.2f})" if cpu is not None else ""
            print(f"  {ms:7.2f} ms  (+{ms - previous:5.2f})  {cpu_text:24}  {what}")
            previous = ms
            previous_cpu = cpu if cpu is not None else previous_cpu
    print(f"  raw Lean LSP floor, same run: {raw:.2f} ms")
    print("## CPU per step (user + system, all threads), beside the wall time per step")
    for meter, wall in ((raw_cpu, raw), (ours, spans["client: answer read"][0]), (theirs, None)):
        print(f"  {meter.per_step_ms:6.2f} ms  {meter.name}"
              + (f"   (wall {wall:.2f} ms per step)" if wall is not None else ""))  # fmt: skip

    def as_json(of_body: dict[str, Span]) -> dict[str, dict[str, float]]:
        return {
            "ms_from_send": {w: ms for w, (ms, _) in of_body.items()},
            "server_cpu_ms_from_read": {
                w: cpu for w, (_, cpu) in of_body.items() if cpu is not None
            },
        }

    write_result(
        "step_stamps",
        {"steps": args.steps, **as_json(spans),
         "by_body": {title: as_json(b) for title, b in by_body.items()}, "raw_ms": raw,
         "cpu_ms_per_step": {m.name: m.per_step_ms for m in (raw_cpu, ours, theirs)}},
    )  # fmt: skip


if __name__ == "__main__":
    main()
