"""The trace points (lsp_bridge.TRACE_EVENT via `sys.audit`) a proof step through the MCP server
and the real Lean raises, in the step's order; bench/step_stamps.py uses them."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_tools.servers import ServeOptions, build_mcp, open_service
from agent_tools.sessions import ProofService
from lsp_bridge import TRACE_EVENT

from .suites import DEMO

pytestmark = pytest.mark.anyio

PROOF = json.loads((Path(__file__).parent / "demo_reference_proofs.json").read_text())["and_swap"]
_seen: list[list[str]] = []  # the recording in progress (an audit hook cannot be removed)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == TRACE_EVENT and _seen:
        _seen[-1].append(" ".join(str(a) for a in args))


sys.addaudithook(_hook)


@contextmanager
def recording() -> Iterator[list[str]]:
    points: list[str] = []
    _seen.append(points)
    try:
        yield points
    finally:
        _seen.pop()


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ProofService]:
    async with open_service(ServeOptions(suite=DEMO, run_dir=tmp_path, sandbox=False)) as s:
        yield s


async def test_a_proof_step_raises_its_trace_points_in_order(service: ProofService) -> None:
    mcp = build_mcp(service)
    opened = await mcp.call_tool("open_task", {"task_id": "and_swap"})
    session = (opened.structured_content or {})["session_id"]
    with recording() as points:
        await mcp.call_tool("set_proof", {"session_id": session, "body": PROOF})
    step = [p for p in points if not p.startswith("Lean answers")]
    assert step == [
        "tool starts",
        "write to Lean",
        "Lean's answers in",
        "step done on its slot",
        "slot released",
        "scope checked",
        "result built",
        "tool ends",
    ]
    assert "Lean answers textDocument/documentSymbol" in points
    first_answer = points.index("Lean answers textDocument/documentSymbol")
    assert points.index("write to Lean") < first_answer < points.index("Lean's answers in")


async def test_nothing_is_raised_when_no_step_runs(service: ProofService) -> None:
    with recording() as points:
        await service.list_tasks()
    assert points == []
