"""The warm pool on a local two-node Ray cluster (one ``lean_slots`` each): sessions over two
headers, and a node killed mid-run. Skipped without the `ray` extra."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import psutil
import pytest

from agent_tools.servers import ServeOptions, open_service
from repl_pool import RayPool
from tests.conftest import start_two_nodes, stop_cluster
from tests.rpc_client import DEMO, rpc_server

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install .[ray])")

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.timeout(110)]

PROOF = "@Eq.refl N N.z"
ROUNDS = 6  # steps per session in the node-kill test
TASK = """prelude
{imports}
namespace Demo.{name}

theorem main : @Eq N N.z N.z :=
  sorryAx (@Eq N N.z N.z) Bool.false

end Demo.{name}
"""


def two_header_suite(root: Path) -> Path:
    """Tasks a0..a3 import Demo.Basic; b0..b3 also import Demo.Extra: two pool keys."""
    (root / "Demo").mkdir(parents=True)
    shutil.copy(DEMO / "Demo" / "Basic.lean", root / "Demo" / "Basic.lean")
    (root / "Demo" / "Extra.lean").write_text(
        "prelude\nimport Demo.Basic\nnamespace Demo.Extra\ndef one : N := N.s N.z\nend Demo.Extra\n"
    )
    toml = [
        'name = "two-headers"',
        'version = "1"',
        'lean = "prelude"',
        'library = ["Demo.Basic", "Demo.Extra"]',
    ]
    for group, imports in (
        ("a", "import Demo.Basic"),
        ("b", "import Demo.Basic\nimport Demo.Extra"),
    ):
        for i in range(4):
            name = f"{group.upper()}{i}"
            (root / "Demo" / f"{name}.lean").write_text(TASK.format(imports=imports, name=name))
            toml += [
                "[[tasks]]",
                f'id = "{group}{i}"',
                f'file = "Demo/{name}.lean"',
                f'theorem = "Demo.{name}.main"',
                f'title = "{name}"',
                'field = "equality"',
                "difficulty = 1",
            ]
    (root / "suite.toml").write_text("\n".join(toml) + "\n")
    return root


@pytest.fixture
def cluster() -> Iterator[Any]:
    """Head + one worker node, 1 lean_slots each (a node of it may be killed)."""
    c = start_two_nodes()
    try:
        yield c
    finally:
        stop_cluster(c)


def ledger_steps(path: Path) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return [e for e in lines if e["tool"] in ("open_task", "set_proof")]


async def test_sessions_spread_over_nodes_with_header_affinity(
    two_node_cluster: Any, tmp_path: Path
) -> None:
    cluster = two_node_cluster
    suite = two_header_suite(tmp_path / "suite")
    ledger = tmp_path / "ledger.jsonl"
    options = ServeOptions(
        suite=suite, run_dir=tmp_path / "runs", ledger=ledger, ray=cluster.address, step_timeout=30
    )
    async with open_service(options) as service:
        tasks = [f"{g}{i}" for i in range(4) for g in "ab"]
        sessions: dict[str, str] = {}

        async def solve(task: str) -> None:
            opened = await service.open_task(task)
            sessions[task] = opened.session_id
            result = await service.set_proof(opened.session_id, PROOF)
            assert result.complete, (task, result)
            # Goals and questions run against the node's slot (a RemoteSlot), which must
            # forward every slot call they make.
            at = opened.body_range.start
            goals = await service.get_goals(opened.session_id, at.line, at.column)
            assert goals.line == at.line
            hover = await service.get_hover(opened.session_id, at.line, at.column - 2)
            assert hover.line == at.line
            checked = await service.check_term(opened.session_id, "N.z", False)
            assert checked.type == "N", checked

        async with anyio.create_task_group() as tg:
            for task in tasks:
                tg.start_soon(solve, task)
        assert isinstance(service.pool, RayPool)
        nodes = (await service.server_status()).nodes
        assert nodes is not None and len(nodes) == 2
        # each node: 4 sessions and their tasks' question documents
        assert sorted(n.sessions for n in nodes) == [8, 8]
        assert sorted(len(n.headers) for n in nodes) == [1, 1]
        for session in sessions.values():
            await service.close_session(session)

    steps = ledger_steps(ledger)
    assert len(steps) == 16 and all(e["outcome"] == "ok" for e in steps)
    by_header: dict[str, set[str]] = {}
    for e in steps:
        by_header.setdefault(e["header"], set()).add(e["node"])
    assert len(by_header) == 2
    assert all(len(used) == 1 for used in by_header.values())
    assert len(set.union(*by_header.values())) == 2


async def test_a_node_killed_mid_run_loses_no_call_and_stdout_stays_protocol(
    cluster: Any, tmp_path: Path
) -> None:
    """Over `leanrig serve --jsonrpc --ray`: every session completes, no process is left."""
    suite = two_header_suite(tmp_path / "suite")
    ledger = tmp_path / "ledger.jsonl"
    head_raylet = cluster.head_node.all_processes["raylet"][0].process.pid
    async with rpc_server(suite, "--ray", cluster.address, "--ledger", str(ledger)) as rpc:
        tasks = [f"{g}{i}" for i in range(4) for g in "ab"]
        sessions: dict[str, str] = {}

        async def open_one(task: str) -> None:
            opened = await rpc.call("open_task", timeout=90, task_id=task)
            sessions[task] = opened["session_id"]

        async with anyio.create_task_group() as tg:
            for task in tasks:
                tg.start_soon(open_one, task)
        used = {e["node"] for e in ledger_steps(ledger)}
        assert len(used) == 2
        victim = next(iter(cluster.worker_nodes))
        assert victim.node_id in used

        results: dict[str, Any] = {}
        first_round = anyio.Event()
        done_first: set[str] = set()
        wrong = "sorryAx (@Eq N N.z N.z) Bool.false"

        killed = anyio.Event()

        async def prove(task: str) -> None:
            for round_ in range(ROUNDS):
                if round_ == ROUNDS - 1:
                    # The proof step comes after the node is gone, so every session finds its
                    # node dead at least once.
                    await killed.wait()
                body = PROOF if round_ == ROUNDS - 1 else wrong
                results[task] = await rpc.call(
                    "set_proof", timeout=90, session_id=sessions[task], body=body
                )
                done_first.add(task)
                if len(done_first) == len(tasks):
                    first_round.set()

        async def kill() -> None:
            await first_round.wait()  # steps keep flowing while the node dies
            await anyio.to_thread.run_sync(lambda: cluster.remove_node(victim, False))
            # Ray ends a dead node's actor a while after its raylet, and steps may complete
            # there until the router has seen the loss: wait for that (no event exists).
            with anyio.fail_after(60):
                while any(
                    n["node_id"] == victim.node_id
                    for n in (await rpc.call("server_status"))["nodes"]
                ):
                    await anyio.sleep(0.1)
            killed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill)
            for task in tasks:
                tg.start_soon(prove, task)
        assert sorted(results) == sorted(tasks)
        assert all(r["complete"] for r in results.values()), results
        nodes = (await rpc.call("server_status"))["nodes"]
        assert [(n["node_id"], n["sessions"]) for n in nodes] == [(cluster.head_node.node_id, 8)]
    assert rpc.unmatched == []
    steps = ledger_steps(ledger)
    assert all("node" in e and "header" in e for e in steps if e["outcome"] == "ok")
    proofs = [e for e in steps if e["tool"] == "set_proof"]
    assert len(proofs) == 8 * ROUNDS and all(e["outcome"] == "ok" for e in proofs)
    assert {e["node"] for e in proofs[-8:]} == {cluster.head_node.node_id}
    assert psutil.pid_exists(head_raylet)


def test_a_lease_may_run_every_slot_method_a_remote_slot_forwards() -> None:
    import inspect

    from repl_pool import Slot
    from repl_pool.ray_actor import SLOT_METHODS
    from repl_pool.remote_slot import RemoteSlot

    forwarded = {
        name
        for name, member in vars(RemoteSlot).items()
        if inspect.iscoroutinefunction(member) and not name.startswith("_") and name in vars(Slot)
    }
    assert forwarded - SLOT_METHODS == set()
    assert "elaborate_and_ask" in forwarded
