"""`leanrig agent scripted --plan FILE`: replay a JSON plan of tool calls over MCP.

The plan format is in docs/agents.md. Exit 0 when every expectation held."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

from ..models import fill_placeholders
from .mcp_connection import AgentError, connect, load_config, task_id, workspace_dir, write_usage


def load_plan(path: Path) -> dict[str, Any]:
    try:
        plan = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise AgentError(f"cannot read the plan {path}: {exc}", hint="a JSON plan") from None
    if isinstance(plan, list):
        plan = {"calls": plan}
    if not isinstance(plan, dict) or not isinstance(plan.get("calls", []), list):
        raise AgentError(f"{path}: a plan is a list of calls or {{'calls': [...]}}", hint="")
    for step in [*plan.get("calls", []), *(c for v in plan.get("tasks", {}).values() for c in v)]:
        if not isinstance(step, dict) or not ("tool" in step or "sleep" in step):
            raise AgentError(f"{path}: each call needs a `tool` (or `sleep`): {step!r}", hint="")
        if step.get("expect", "any") not in EXPECTATIONS:
            raise AgentError(
                f"{path}: `expect` is one of {', '.join(EXPECTATIONS)}, not {step['expect']!r}",
                hint="",
            )
    return plan


EXPECTATIONS = ("ok", "error", "any")


async def run_scripted_agent(plan_path: Path, *, mcp_config: str | None, task: str | None) -> int:
    plan = load_plan(plan_path)
    config = load_config(mcp_config)
    workspace = workspace_dir()
    transcript = workspace / "transcript.jsonl"
    failed = 0
    async with connect(config) as client:
        tid = task_id(task)
        if tid is None:
            listed = await client.call("list_tasks")
            tid = listed["tasks"][0]["id"]
        calls = plan.get("tasks", {}).get(tid, plan.get("calls", []))
        names = {"task": tid, "session": ""}
        for i, step in enumerate(calls):
            if "sleep" in step:
                await anyio.sleep(float(step["sleep"]))
                continue
            args = fill_placeholders(step.get("args", {}), names)
            t0 = time.perf_counter()
            is_error, value = await client.call_raw(step["tool"], args)
            ms = round((time.perf_counter() - t0) * 1000, 1)
            if not is_error and isinstance(value, dict) and "session_id" in value:
                names["session"] = str(value["session_id"])
            line = {"i": i, "tool": step["tool"], "error": is_error, "ms": ms, "result": value}
            await anyio.to_thread.run_sync(_append, transcript, line)
            expect = step.get("expect", "any")
            if (expect == "ok" and is_error) or (expect == "error" and not is_error):
                print(f"step {i} ({step['tool']}): expected {expect}: {value}", file=sys.stderr)
                failed += 1
                if expect == "ok":
                    break
    if isinstance(plan.get("usage"), dict):
        write_usage(workspace, plan["usage"])
    return 1 if failed else 0


def _append(path: Path, line: dict[str, Any]) -> None:
    with path.open("ab") as out:
        out.write(orjson.dumps(line, default=str) + b"\n")
