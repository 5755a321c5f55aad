"""`leanrig serve`'s run directory: its own for every server, and the verdict's files outside
what the sessions' sandboxed Lean may write (found by a red-team sweep of the servers)."""

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
    """A red team's finding (full toolchains): the verifier worked in the scratch directory
    the sessions' sandboxed Lean may write, so code a body runs while a session elaborates
    it could rewrite the files of a verdict in progress."""
    sandbox_or_skip()
    options = ServeOptions(suite=DEMO, run_dir=tmp_path,
                           max_processes=1)  # fmt: skip
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
    """Two `leanrig serve` started in one second with one --run-dir shared `<timestamp>/`:
    one ledger for both (no server id on its lines), one scratch (a red-team sweep, 2 of 3
    tries)."""
    runs = tmp_path / "runs"
    taken = [runs / time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() + s))
             for s in range(3)]  # fmt: skip
    for path in taken:  # another server's, in this second and the next two
        (path / "scratch").mkdir(parents=True)
    options = ServeOptions(suite=DEMO, run_dir=runs,
                           max_processes=1)  # fmt: skip
    async with open_service(options) as first, open_service(options) as second:
        ours = {first.ledger.path.parent, second.ledger.path.parent}
    assert len(ours) == 2 and not ours & set(taken), (ours, taken)
    assert all(list(path.iterdir()) == [path / "scratch"] for path in taken)


async def test_sessions_left_open_get_their_closing_line_when_the_service_ends(
    tmp_path: Path,
) -> None:
    """MCP never closed a session (stdio's end, HTTP): the ledger had no close_session line,
    so no session wall time (a red-team sweep); JSON-RPC closes a client's sessions itself."""
    import orjson

    async with open_service(ServeOptions(suite=DEMO, run_dir=tmp_path, max_processes=1)) as s:
        sid = (await s.open_task("refl_z", "mcp")).session_id
        ledger = s.ledger.path
    lines = [orjson.loads(x) for x in ledger.read_bytes().splitlines()]
    (closed,) = [e for e in lines if e["tool"] == "close_session"]
    assert closed["session"] == sid and closed["session_wall_ms"] > 0
    assert closed["closed_by"] == "server"  # no call of the client's (the runner's count)
