"""`make soak`: many concurrent sessions over MCP for a long time, against one `leanrig serve`.

16 sessions × 1200 steps (``--sessions``, ``--steps``), each a mix: valid and wrong bodies
(``set_proof``), a body the prechecks reject, goal queries, ``try_proofs`` with two candidates.
Checked: no error other than the expected rejections, no call over its deadline (the server's
step timeout), and the leanrig server's RSS and every Lean process tree's RSS growing < 10 %
from the 100th step of every session to the last. Numbers to bench/results/soak.json. Not part
of `make test`; it prints and records, and exits non-zero when a check fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agent_tools.servers import serve_argv

from .bench_sessions import lean_trees
from .common import summarize, write_result

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "lean_project" / "suites" / "demo"
TASK = "and_swap"
RIGHT = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"
WRONG = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"
REJECTED = "\n  h\nend Demo.AndSwap"  # a column-0 line: the prechecks refuse it
STEP_TIMEOUT = 60.0


def server_pid(run_dir: Path) -> int:
    for child in psutil.Process().children(recursive=True):
        try:
            if str(run_dir) in " ".join(child.cmdline()):
                return int(child.pid)
        except psutil.Error:
            continue
    raise RuntimeError("the leanrig server process was not found")


class Soak:
    def __init__(self, sessions: int, steps: int) -> None:
        self.sessions = sessions
        self.steps = steps
        self.latencies: dict[str, list[float]] = {}
        self.unexpected: list[str] = []
        self.over_deadline: list[tuple[str, float]] = []
        self.progress = [0] * sessions
        self.samples: list[dict[str, Any]] = []
        self.marked = anyio.Event()  # every session has done its 100th step

    async def call(self, client: Client, tool: str, args: dict[str, Any], expect: str) -> Any:
        t = time.perf_counter()
        with anyio.fail_after(STEP_TIMEOUT * 2):
            result = await client.call_tool(tool, args)
        ms = (time.perf_counter() - t) * 1000
        self.latencies.setdefault(tool, []).append(ms)
        if ms > STEP_TIMEOUT * 1000:
            self.over_deadline.append((tool, ms))
        content = result.structured_content if isinstance(result.structured_content, dict) else {}
        if expect == "rejected":
            text = " ".join(getattr(c, "text", "") for c in result.content)
            if not result.is_error or "rejected" not in text:
                self.unexpected.append(f"{tool}: expected a rejection, got {text[:200]}")
        elif result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            self.unexpected.append(f"{tool}: {text[:300]}")
        elif expect in ("complete", "incomplete") and content.get("complete") != (
            expect == "complete"
        ):
            self.unexpected.append(f"{tool}: complete={content.get('complete')}, want {expect}")
        return content

    async def session(self, client: Client, n: int) -> None:
        opened = await self.call(client, "open_task", {"task_id": TASK}, "incomplete")
        sid = opened["session_id"]
        line = opened["body_range"]["start"]["line"] + 1
        for i in range(self.steps):
            kind = i % 10
            if kind in (0, 2, 4, 6):
                await self.call(client, "set_proof", {"session_id": sid,
                                "body": RIGHT + f" -- {n}.{i}"}, "complete")  # fmt: skip
            elif kind in (1, 3, 5):
                await self.call(client, "set_proof", {"session_id": sid, "body": WRONG},
                                "incomplete")  # fmt: skip
            elif kind == 7:
                await self.call(client, "set_proof", {"session_id": sid, "body": REJECTED},
                                "rejected")  # fmt: skip
            elif kind == 8:
                await self.call(client, "get_goals", {"session_id": sid, "line": line,
                                "column": 3}, "any")  # fmt: skip
            else:
                await self.call(client, "try_proofs", {"session_id": sid,
                                "bodies": [WRONG, RIGHT]}, "any")  # fmt: skip
            self.progress[n] = i + 1
            if i + 1 == 100 and min(self.progress) >= 100:
                self.marked.set()
        await self.call(client, "close_session", {"session_id": sid}, "any")

    def sample(self, pid: int, label: str) -> dict[str, Any]:
        trees = lean_trees(pid)
        entry = {
            "label": label,
            "calls": sum(len(v) for v in self.latencies.values()),
            "server_rss_mb": round(psutil.Process(pid).memory_info().rss / 2**20, 1),
            "lean_trees_mb": {str(k): round(v / 2**20, 1) for k, v in trees.items()},
            "lean_total_mb": round(sum(trees.values()) / 2**20, 1),
        }
        self.samples.append(entry)
        print(
            f"  {label:>10}: {entry['calls']:>6} calls, server {entry['server_rss_mb']} MB, "
            f"Lean {entry['lean_total_mb']} MB in {len(trees)} tree(s)",
            flush=True,
        )
        return entry

    async def run(self) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="leanrig-soak-") as tmp:
            run_dir = Path(tmp) / "runs"
            argv = serve_argv(DEMO, run_dir, "--step-timeout", str(STEP_TIMEOUT))
            params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
            started = time.perf_counter()
            async with Client(params) as client:
                pid = server_pid(run_dir)
                self.sample(pid, "start")
                async with anyio.create_task_group() as tg:

                    async def monitor() -> None:
                        await self.marked.wait()
                        self.sample(pid, "step 100")
                        while True:
                            await anyio.sleep(30)
                            self.sample(pid, f"{min(self.progress)} steps")

                    tg.start_soon(monitor)
                    async with anyio.create_task_group() as sessions:
                        for n in range(self.sessions):
                            sessions.start_soon(self.session, client, n)
                    tg.cancel_scope.cancel()
                self.sample(pid, "end")
            wall = time.perf_counter() - started
        return self.report(wall)

    def report(self, wall: float) -> dict[str, Any]:
        at100 = next((s for s in self.samples if s["label"] == "step 100"), self.samples[0])
        end = self.samples[-1]
        server_growth = end["server_rss_mb"] / at100["server_rss_mb"] - 1
        lean_growth = {
            pid: end["lean_trees_mb"][pid] / mb - 1
            for pid, mb in at100["lean_trees_mb"].items()
            if pid in end["lean_trees_mb"] and mb
        }
        total_growth = (
            end["lean_total_mb"] / at100["lean_total_mb"] - 1 if at100["lean_total_mb"] else 0
        )
        calls = sum(len(v) for v in self.latencies.values())
        checks = {
            "no_unexpected_errors": not self.unexpected,
            "no_call_over_deadline": not self.over_deadline,
            "server_rss_growth_under_10pct": server_growth < 0.10,
            "lean_tree_rss_growth_under_10pct": all(g < 0.10 for g in lean_growth.values())
            and total_growth < 0.10,
        }
        return {
            "sessions": self.sessions,
            "steps_per_session": self.steps,
            "calls": calls,
            "wall_s": round(wall, 1),
            "calls_per_s": round(calls / wall, 1),
            "latency": {tool: summarize(v) for tool, v in self.latencies.items()},
            "max_call_ms": round(max(max(v) for v in self.latencies.values()), 1),
            "unexpected": self.unexpected[:20],
            "unexpected_count": len(self.unexpected),
            "over_deadline": self.over_deadline[:20],
            "server_rss_growth_pct": round(server_growth * 100, 2),
            "lean_tree_rss_growth_pct": {k: round(v * 100, 2) for k, v in lean_growth.items()},
            "lean_total_rss_growth_pct": round(total_growth * 100, 2),
            "samples": self.samples,
            "checks": checks,
            "median_step_ms": round(statistics.median(self.latencies.get("set_proof", [0.0])), 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1200)
    args = parser.parse_args()
    soak = Soak(args.sessions, args.steps)
    print(f"# soak: {args.sessions} sessions x {args.steps} steps over MCP", flush=True)
    result = anyio.run(soak.run)
    path = write_result("soak", result)
    for name, ok in result["checks"].items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    print(f"  {result['calls']} calls in {result['wall_s']} s, max call {result['max_call_ms']} ms,"
          f" server RSS {result['server_rss_growth_pct']:+.1f} %, Lean total "
          f"{result['lean_total_rss_growth_pct']:+.1f} % (step 100 -> end); wrote {path}")  # fmt: skip
    sys.exit(0 if all(result["checks"].values()) else 1)


if __name__ == "__main__":
    main()
