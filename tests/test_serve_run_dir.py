"""`leanrig serve`'s run directory: its own for every server, and the verdict's files outside
what the sessions' sandboxed Lean may write."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent_tools.servers import ServeOptions, open_service

from .test_as_typed import sandbox_or_skip

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "lean_project" / "suites" / "demo"

pytestmark = pytest.mark.anyio


def _writable(wrapper: tuple[str, ...]) -> list[Path]:
    """The paths a sandbox wrapper (bwrap argv) lets its process write."""
    return [Path(wrapper[i + 1]) for i, a in enumerate(wrapper) if a == "--bind"]


async def test_the_verdicts_files_are_outside_what_the_sessions_lean_may_write(
    tmp_path: Path,
) -> None:
    sandbox_or_skip()
    options = ServeOptions(suite=DEMO, run_dir=tmp_path, max_processes=1)
    async with open_service(options) as service:
        writable = _writable(service.environment.wrapper)
        root = service.verifier.work_root
    assert writable and root is not None
    assert not any(root.is_relative_to(w) or w.is_relative_to(root) for w in writable), (
        root,
        writable,
    )


async def test_servers_started_in_the_same_second_get_their_own_run_directories(
    tmp_path: Path,
) -> None:
    """One --run-dir: separate ledgers and scratch directories."""
    runs = tmp_path / "runs"
    taken = [
        runs / time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() + s)) for s in range(3)
    ]
    for path in taken:  # another server's, in this second and the next two
        (path / "scratch").mkdir(parents=True)
    options = ServeOptions(suite=DEMO, run_dir=runs, max_processes=1)
    async with open_service(options) as first, open_service(options) as second:
        ours = {first.ledger.path.parent, second.ledger.path.parent}
    assert len(ours) == 2 and not ours & set(taken), (ours, taken)
    assert all(list(path.iterdir()) == [path / "scratch"] for path in taken)


async def test_sessions_left_open_get_their_closing_line_when_the_service_ends(
    tmp_path: Path,
) -> None:
    """For each session MCP left open."""
    import orjson

    async with open_service(ServeOptions(suite=DEMO, run_dir=tmp_path, max_processes=1)) as s:
        sid = (await s.open_task("refl_z", "mcp")).session_id
        ledger = s.ledger.path
    lines = [orjson.loads(x) for x in ledger.read_bytes().splitlines()]
    (closed,) = [e for e in lines if e["tool"] == "close_session"]
    assert closed["session"] == sid and closed["session_wall_ms"] > 0
    assert closed["closed_by"] == "server"  # no call of the client's (the runner's count)
