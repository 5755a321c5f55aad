"""Lean's RPC (``$/lean/rpc/*``): one kept-alive session per document, and interactive goals.

Must not open, change or wait for documents: it asks about their current versions."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio

from .channels import DocumentChannels
from .doc_requests import doc_request
from .errors import RpcNeedsReconnect, ServerClosed, ServerDied, WorkerCrashed
from .lean_types import InteractiveGoal, collect_rpc_refs
from .open_document import OpenDocument, find_document
from .positions import LspPos
from .timeouts import Timeouts

RPC_KEEPALIVE_SECONDS = 5.0  # well within the time after which Lean drops an idle session


class RpcSessions:
    """The RPC sessions of one client's open ``docs``; ``start_soon`` runs the keep-alive loop."""

    def __init__(
        self,
        docs: Mapping[str, OpenDocument],
        channels: DocumentChannels,
        timeouts: Timeouts,
        start_soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    ) -> None:
        self._docs = docs
        self._channels = channels
        self._timeouts = timeouts
        self._start_soon = start_soon
        self._by_uri: dict[str, str] = {}  # uri -> session id

    def forget(self, uri: str) -> None:
        self._by_uri.pop(uri, None)

    async def connect(self, uri: str) -> str:
        """Open a new session for document ``uri``; returns its id."""
        result = await doc_request(
            find_document(self._docs, uri),
            self._channels,
            "$/lean/rpc/connect",
            {"uri": uri},
            self._timeouts.request,
        )
        session = str(result["sessionId"])
        first = not self._by_uri
        self._by_uri[uri] = session
        if first:
            self._start_soon(self._keep_alive)
        return session

    async def call(self, uri: str, pos: LspPos, method: str, params: Any, timeout: float) -> Any:
        """Call a Lean RPC method; reconnects once if the session was dropped."""
        for try_number in (1, 2):
            session = self._by_uri.get(uri) or await self.connect(uri)
            try:
                return await doc_request(
                    find_document(self._docs, uri),
                    self._channels,
                    "$/lean/rpc/call",
                    {
                        "textDocument": {"uri": uri},
                        "position": pos.to_json(),
                        "sessionId": session,
                        "method": method,
                        "params": params,
                    },
                    timeout,
                )
            except RpcNeedsReconnect:
                self._by_uri.pop(uri, None)
                if try_number == 2:
                    raise
        raise AssertionError("unreachable")

    async def interactive_goals(
        self, uri: str, pos: LspPos, timeout: float
    ) -> list[InteractiveGoal]:
        """Structured goals via ``Lean.Widget.getInteractiveGoals`` (references released)."""
        params = {"textDocument": {"uri": uri}, "position": pos.to_json()}
        result = await self.call(uri, pos, "Lean.Widget.getInteractiveGoals", params, timeout)
        if not result:
            return []
        goals = [InteractiveGoal.from_json(g) for g in result.get("goals", ())]
        refs = collect_rpc_refs(result)
        session = self._by_uri.get(uri)
        if refs and session is not None:
            try:
                await self._channels.conn(uri).notify(
                    "$/lean/rpc/release", {"uri": uri, "sessionId": session, "refs": refs}
                )
            except (WorkerCrashed, ServerDied, ServerClosed):
                if not self._channels.direct:
                    raise
                # The worker went after answering: nothing left to release.
        return goals

    async def _keep_alive(self) -> None:
        while self._channels.alive:
            await anyio.sleep(RPC_KEEPALIVE_SECONDS)
            for uri, session in list(self._by_uri.items()):
                try:
                    await self._channels.conn(uri).notify(
                        "$/lean/rpc/keepAlive", {"uri": uri, "sessionId": session}
                    )
                except Exception:
                    if not self._channels.direct:
                        return
