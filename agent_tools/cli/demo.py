"""`leanrig demo`: a scripted agent solves a demo task through MCP, with per-step latencies."""

from __future__ import annotations

import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from ..servers import serve_argv

# The repository root (the package is installed editable).
DEMO_SUITE = Path(__file__).resolve().parents[2] / "lean_project" / "suites" / "demo"


async def call(client: Client, tool: str, **args: Any) -> tuple[dict[str, Any], float]:
    t = time.perf_counter()
    result = await client.call_tool(tool, args)
    ms = (time.perf_counter() - t) * 1000
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise RuntimeError(f"{tool} failed: {text}")
    assert isinstance(result.structured_content, dict)
    return result.structured_content, ms


def show(label: str, result: dict[str, Any], ms: float) -> None:
    step = result.get("elapsed_ms")
    server = f" (server-side step {step} ms)" if step is not None else ""
    print(f"\n[{label}] {ms:.1f} ms round trip{server}")
    for d in result.get("diagnostics", []):
        first = d["message"].splitlines()[0]
        print(f"  {d['line']}:{d['column']} {d['severity']}: {first}")
    for goal in result.get("goals", []):
        print("  goal: " + goal.replace("\n", "\n        "))
    print(f"  complete: {result.get('complete')}")


async def _demo() -> int:
    if not (DEMO_SUITE / "suite.toml").is_file():
        print(f"leanrig demo: the demo suite is not at {DEMO_SUITE}", file=sys.stderr)
        return 2
    run_dir = Path(tempfile.mkdtemp(prefix="leanrig-demo-"))
    argv = serve_argv(DEMO_SUITE, run_dir)
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    t0 = time.perf_counter()
    async with Client(params) as client:
        tools = await client.list_tools()
        print(
            f"MCP server up in {(time.perf_counter() - t0) * 1000:.0f} ms; "
            f"{len(tools.tools)} tools: {', '.join(t.name for t in tools.tools)}"
        )
        tasks, _ = await call(client, "list_tasks")
        print(f"suite {tasks['suite']}: {len(tasks['tasks'])} tasks")
        opened, ms = await call(client, "open_task", task_id="and_swap")
        sid = opened["session_id"]
        print(f"\nopened and_swap in {ms:.0f} ms (includes warming a Lean process); body:")
        print("  " + opened["body"].strip())
        show("initial body", opened, ms)

        attempt = "\n  @And.intro p q h h"
        result, ms = await call(client, "set_proof", session_id=sid, body=attempt)
        show(f"set_proof {attempt.strip()!r}", result, ms)

        attempt = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"
        result, ms = await call(client, "set_proof", session_id=sid, body=attempt)
        show("set_proof via And.rec (arguments swapped wrongly)", result, ms)

        result, ms = await call(
            client,
            "replace_in_proof",
            session_id=sid,
            old="@And.intro q p hp hq",
            new="@And.intro q p hq hp",
        )
        show("replace_in_proof: swap hp and hq", result, ms)

        try:
            await call(client, "set_proof", session_id=sid, body="\n  h\n  #exit")
        except RuntimeError as exc:
            why = textwrap.fill(str(exc), width=96, initial_indent="  ", subsequent_indent="  ")
            print(f"\n[escape attempt] rejected as expected:\n{why}")

        verdict, ms = await call(client, "check_proof", session_id=sid)
        status = "ACCEPTED" if verdict["accepted"] else f"REJECTED {verdict['reasons']}"
        print(
            f"\n[check_proof] {status} in {ms:.0f} ms; axioms: {verdict['axioms'] or 'none'}; "
            f"stages: {verdict['stages_ms']}"
        )

        timings, _ = await call(client, "get_timings", session_id=sid)
        totals = timings["totals"]
        print(
            f"\nledger for session {sid} ({totals['calls']} calls, session wall "
            f"{timings['session_wall_ms']:.0f} ms):"
        )
        print(f"  {'tool':<18}{'total ms':>10}{'queue ms':>10}{'lean ms':>10}  outcome")
        for e in timings["entries"]:
            print(
                f"  {e['tool']:<18}{e['total_ms']:>10.1f}{e['queue_ms']:>10.1f}"
                f"{e['lean_ms']:>10.1f}  {e['outcome']}"
            )
        print(f"  totals: {totals}")
        await call(client, "close_session", session_id=sid)
    print(f"\nledger under: {run_dir}")
    return 0 if verdict["accepted"] else 1


def run_demo() -> int:
    return anyio.run(_demo)
