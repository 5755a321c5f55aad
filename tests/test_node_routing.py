"""Which Ray node serves a request (repl_pool.node_routing), without Ray: stickiness, header
affinity with spill, least loaded, lost nodes, and the `Pool` both pools implement."""

from __future__ import annotations

import pytest

from repl_pool import NoNodes, Pool, PoolKey, PoolStats, ProcessStat, RayPool, WarmPool
from repl_pool.node_routing import NodeRouter, RayNode
from repl_pool.pool_stats import AcquireTimes, merged_stats

A = PoolKey("env", "prelude\nimport A")
B = PoolKey("env", "prelude\nimport B")


def router(*slots: int) -> tuple[NodeRouter, list[RayNode]]:
    routing = NodeRouter()
    nodes = [RayNode(f"node{i}", f"10.0.0.{i}", n, handle=None) for i, n in enumerate(slots)]
    for node in nodes:
        routing.add(node)
    return routing, nodes


def test_a_session_sticks_to_its_node_while_the_node_lives() -> None:
    routing, (first, second) = router(1, 1)
    assert routing.place(A, "s1") is first
    second.touch(B)  # another header warm elsewhere does not move the session
    assert routing.place(B, "s1") is first
    assert routing.lose(first)
    assert routing.place(A, "s1") is second


def test_a_header_goes_to_a_node_that_has_it_warm() -> None:
    routing, (first, second) = router(2, 2)
    second.touch(A)
    assert routing.place(A, None) is second
    assert routing.place(B, None) is first  # not warm anywhere: a node with a free slot


def test_a_saturated_warm_node_spills_to_a_node_with_a_free_slot() -> None:
    routing, (first, second) = router(1, 1)
    first.touch(A)
    first.inflight = 1
    assert routing.place(A, None) is second
    second.touch(B)
    second.inflight = 1
    assert routing.place(A, None) is first  # no free slot anywhere: the warm node waits


def test_without_nodes_a_request_is_refused_and_a_lost_node_is_lost_once() -> None:
    routing, (only,) = router(1)
    routing.place(A, "s1")
    assert routing.lose(only) and not routing.lose(only)
    assert only.lost.is_set() and "s1" not in routing.sticky and routing.live() == []
    with pytest.raises(NoNodes):
        routing.place(A, "s1")


def test_new_nodes_are_wanted_unless_known_slotless_dead_or_lost_lately() -> None:
    routing, (first,) = router(1)
    routing.failed_to_start("node3")
    infos = [
        {"NodeID": "node0", "Alive": True, "Resources": {"lean_slots": 1}},
        {
            "NodeID": "node1",
            "Alive": True,
            "Resources": {"lean_slots": 4},
            "NodeManagerAddress": "10.0.0.1",
        },
        {"NodeID": "node2", "Alive": True, "Resources": {"CPU": 8}},
        {"NodeID": "node3", "Alive": True, "Resources": {"lean_slots": 1}},
        {"NodeID": "node4", "Alive": False, "Resources": {"lean_slots": 1}},
    ]
    assert routing.wanted(infos, cooldown=30.0) == [("node1", "10.0.0.1", 4)]  # node0: known
    routing.lose(first)  # the GCS may still call it alive: tried again after the cooldown
    assert routing.wanted(infos, cooldown=30.0) == [("node1", "10.0.0.1", 4)]
    assert [w[0] for w in routing.wanted(infos, cooldown=0.0)] == ["node0", "node1", "node3"]


def test_the_router_reports_the_nodes_pools_as_one_with_its_own_acquire_times() -> None:
    def node_pool(pid: int, acquires: int, median: float) -> PoolStats:
        process = ProcessStat(pid, 1, "prelude", "idle", 3, 100.0, 1.0)
        return PoolStats(
            (process,), {"prelude": 1}, 1, 0, 0, 0, acquires, median, median, {"<=0.1ms": acquires}
        )

    own = AcquireTimes()
    nodes = [node_pool(1, 2, 0.05), node_pool(2, 3, 0.08)]
    merged = merged_stats(nodes, own)
    assert (merged.acquire_count, merged.acquire_ms_median) == (5, 0.08)  # the slowest node's
    assert merged.queued == {"prelude": 2} and [p.pid for p in merged.processes] == [1, 2]
    own.record(3.0)
    merged = merged_stats(nodes, own)
    assert (merged.acquire_count, merged.acquire_ms_median) == (6, 3.0)  # the router's own
    assert merged.acquire_histogram["<=0.1ms"] == 5 and merged.acquire_histogram["<=5ms"] == 1


def test_both_pools_offer_every_pool_operation_and_the_router_is_no_local_pool() -> None:
    members = {name for name in vars(Pool) if not name.startswith("_")}
    assert members == {"config", "key_for", "execute", "stats", "kill_all"}
    for pool in (WarmPool, RayPool):
        assert all(callable(getattr(pool, m)) for m in members - {"config"}), pool
    assert not issubclass(RayPool, WarmPool)


def typed_as_pools(local: WarmPool, cluster: RayPool) -> list[Pool]:
    """For the type checker: both are `Pool`s."""
    return [local, cluster]
