"""`RemoteSlot`: a slot leased on a Ray node; each `Slot` method is one actor call.

It must not own a process or a lease's lifetime, nor retry."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    DocQuery,
    DocumentReport,
    InteractiveGoal,
    LspPos,
    PlainGoal,
    PlainTermGoal,
)

from .node_routing import RayNode
from .slot import Elaboration, PoolKey, Slot

if TYPE_CHECKING:
    from .node_actors import NodeActors


def node_of(slot: Slot) -> str | None:
    """The Ray node id a slot lives on (None: a local slot)."""
    return slot.node_id if isinstance(slot, RemoteSlot) else None


class RemoteSlot(Slot):
    """A slot leased on a node: every method runs on the node's real `Slot`."""

    def __init__(
        self,
        actors: NodeActors,
        node: RayNode,
        lease: str,
        key: PoolKey,
        text: str,
        *,
        request_deadline: float,
    ) -> None:
        """``request_deadline``: how long ``send`` may take (it has no deadline of its own)."""
        # Not Slot.__init__: there is no process here.
        self.number = 0
        self.key = key
        self.node_id = node.node_id
        self.state = "busy"
        self.uses = 1
        self.started_at = self.last_used = time.monotonic()
        self.broken = None
        self.holder = None
        self._actors = actors
        self._node = node
        self._lease = lease
        self._text = text
        self._request_deadline = request_deadline

    @property
    def pid(self) -> int | None:
        return None

    @property
    def alive(self) -> bool:
        return self._node.alive and self.broken is None

    def rss_bytes(self, max_age: float = 0.0) -> int:
        return 0

    def kill(self, reason: str) -> None:
        self.mark_broken(reason)

    def bind(self, holder: str | None) -> None:
        self.holder = holder

    async def _remote(self, method: str, deadline: float, *args: Any, **kwargs: Any) -> Any:
        ref = self._node.handle.call.remote(self._lease, method, args, kwargs)
        return await self._actors.call(self._node, ref, deadline)

    async def elaborate(self, text: str, *, timeout: float) -> DocumentReport:
        report: DocumentReport = await self._remote("elaborate", timeout, text, timeout=timeout)
        self._text = text
        return report

    async def send(self, text: str) -> None:
        await self._remote("send", self._request_deadline, text)
        self._text = text

    async def wait(self, *, timeout: float) -> DocumentReport:
        report: DocumentReport = await self._remote("wait", timeout, timeout=timeout)
        return report

    def text(self) -> str:
        return self._text

    async def elaborate_and_ask(
        self,
        text: str,
        *,
        goal_at: LspPos | None,
        term_at: LspPos | None,
        timeout: float,
        symbols_from: int = 0,
    ) -> Elaboration:
        done: Elaboration = await self._remote(
            "elaborate_and_ask",
            timeout,
            text,
            goal_at=goal_at,
            term_at=term_at,
            timeout=timeout,
            symbols_from=symbols_from,
        )
        self._text = text
        return done

    async def elaborate_with(
        self, text: str, queries: Sequence[DocQuery], *, timeout: float
    ) -> tuple[DocumentReport, list[Any]]:
        done: tuple[DocumentReport, list[Any]] = await self._remote(
            "elaborate_with", timeout, text, list(queries), timeout=timeout
        )
        self._text = text
        return done

    async def ask(self, query: DocQuery, *, timeout: float) -> Any:
        return await self._remote("ask", timeout, query, timeout=timeout)

    async def plain_goal(self, pos: LspPos, *, timeout: float) -> PlainGoal:
        goal: PlainGoal = await self._remote("plain_goal", timeout, pos, timeout=timeout)
        return goal

    async def plain_term_goal(self, pos: LspPos, *, timeout: float) -> PlainTermGoal:
        goal: PlainTermGoal = await self._remote("plain_term_goal", timeout, pos, timeout=timeout)
        return goal

    async def document_symbols(self, *, timeout: float) -> list[DocumentSymbol]:
        symbols: list[DocumentSymbol] = await self._remote(
            "document_symbols", timeout, timeout=timeout
        )
        return symbols

    async def interactive_goals(self, pos: LspPos, *, timeout: float) -> list[InteractiveGoal]:
        goals: list[InteractiveGoal] = await self._remote(
            "interactive_goals", timeout, pos, timeout=timeout
        )
        return goals
