"""`NodeRouter`: which Ray node serves a request (sticky sessions, header affinity, least load).

Bookkeeping and decisions only: it must not call Ray or an actor."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from .errors import NoNodes
from .pool_stats import PoolStats
from .slot import PoolKey

RESOURCE = "lean_slots"  # the Ray resource: one unit per Lean process


@dataclass(slots=True)
class RayNode:
    """One node with a `LeanNode` actor, as the router sees it."""

    node_id: str
    address: str
    slots: int
    handle: Any  # the actor's Ray handle
    pid: int = 0
    alive: bool = True
    lost: anyio.Event = field(default_factory=anyio.Event)
    inflight: int = 0
    holders: set[str] = field(default_factory=set)
    keys: OrderedDict[PoolKey, None] = field(default_factory=OrderedDict)  # LRU: newest last
    stats: PoolStats | None = None
    steps: int = 0

    def load(self) -> tuple[float, float]:
        return (self.inflight / self.slots, len(self.holders) / self.slots)

    def touch(self, key: PoolKey) -> None:
        self.keys[key] = None
        self.keys.move_to_end(key)
        while len(self.keys) > self.slots:  # the node's pool evicts the LRU idle key too
            self.keys.popitem(last=False)


@dataclass(frozen=True, slots=True)
class NodeStatus:
    node_id: str
    address: str
    alive: bool
    slots: int
    sessions: int
    inflight: int
    steps: int
    headers: tuple[str, ...]
    pool: PoolStats | None

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "address": self.address,
            "alive": self.alive,
            "slots": self.slots,
            "sessions": self.sessions,
            "inflight": self.inflight,
            "steps": self.steps,
            "headers": list(self.headers),
            "queued": dict(self.pool.queued) if self.pool else {},
            "pool": self.pool.to_json() if self.pool else None,
        }


class NodeRouter:
    """The nodes with an actor, the nodes lost lately, and the sessions' sticky nodes."""

    def __init__(self) -> None:
        self.nodes: dict[str, RayNode] = {}
        self.lost_at: dict[str, float] = {}  # node id -> when it was lost (or failed to start)
        self.sticky: dict[str, RayNode] = {}

    def live(self) -> list[RayNode]:
        return [n for n in self.nodes.values() if n.alive]

    def add(self, node: RayNode) -> None:
        self.nodes[node.node_id] = node

    def failed_to_start(self, node_id: str) -> None:
        """Not tried again before the cooldown (see `wanted`)."""
        self.lost_at[node_id] = time.monotonic()

    def wanted(
        self, infos: Iterable[Mapping[str, Any]], cooldown: float
    ) -> list[tuple[str, str, int]]:
        """(node id, address, slots) of alive nodes needing an actor, unless lost lately."""
        now = time.monotonic()
        found = []
        for info in sorted(infos, key=lambda n: str(n["NodeID"])):
            node_id = str(info["NodeID"])
            slots = int(info.get("Resources", {}).get(RESOURCE, 0))
            if not info.get("Alive") or slots < 1 or node_id in self.nodes:
                continue
            if now - self.lost_at.get(node_id, -1e9) < cooldown:
                continue
            found.append((node_id, str(info.get("NodeManagerAddress", "")), slots))
        return found

    def lose(self, node: RayNode) -> bool:
        """Forget ``node`` and unstick its sessions; False when it was lost already."""
        if not node.alive:
            return False
        node.alive = False
        node.lost.set()
        self.lost_at[node.node_id] = time.monotonic()
        self.nodes.pop(node.node_id, None)
        for holder in node.holders:
            self.sticky.pop(holder, None)
        return True

    def place(self, key: PoolKey, holder: str | None) -> RayNode:
        """Holder's node > a warm node (spill when saturated) > least-loaded free > least-loaded."""
        node = self.sticky.get(holder) if holder is not None else None
        if node is None or not node.alive:
            live = self.live()
            if not live:
                raise NoNodes("every Ray node with lean_slots is gone")
            free = [n for n in live if key not in n.keys and len(n.keys) < n.slots]
            warm = [n for n in live if key in n.keys]
            if warm:
                node = min(warm, key=RayNode.load)
                if node.inflight >= node.slots and free:
                    node = min(free, key=RayNode.load)
            else:
                node = min(free or live, key=RayNode.load)
            if holder is not None:
                self.sticky[holder] = node
                node.holders.add(holder)
        node.touch(key)
        return node

    def forget(self, holder: str) -> None:
        """A session ended: its node no longer counts it."""
        node = self.sticky.pop(holder, None)
        if node is not None:
            node.holders.discard(holder)

    def statuses(self) -> list[NodeStatus]:
        return [
            NodeStatus(
                node_id=n.node_id,
                address=n.address,
                alive=n.alive,
                slots=n.slots,
                sessions=len(n.holders),
                inflight=n.inflight,
                steps=n.steps,
                headers=tuple(k.short() for k in n.keys),
                pool=n.stats,
            )
            for n in self.nodes.values()
        ]
