"""A pool slot: one warm Lean server process with one document whose header is elaborated.

The slot interface is what callers (sessions, checkers) use, and it is backend-neutral:
``elaborate(text)``, goal queries by position, ``alive``. Today's backend is the LSP server
(`lean --server` / `lake serve`) through lsp_bridge; a REPL backend would implement the same.

Slot health is decided in one place, ``slot_fate``: a pure function from an error to what
happens to the slot (keep it, or discard it: killed on release and replaced) and to the work
(may an idempotent operation run again). The slot's own guard and ``WarmPool.run`` both use
it, so a slot is never kept by one and killed by the other.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import anyio
from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    ContentModified,
    DocumentReport,
    ElaborationFailed,
    InteractiveGoal,
    LeanClient,
    LeanrigError,
    LspPos,
    PlainGoal,
    PlainTermGoal,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    ResponseError,
    RpcNeedsReconnect,
    ServerCommand,
    ServerError,
    WorkerCrashed,
    WorkerExited,
)

from .errors import PoolError, SlotBroken
from .oneshot import tree_rss

SlotState = Literal["starting", "idle", "busy", "stopping"]


@dataclass(frozen=True, slots=True)
class PoolKey:
    """What makes two slots interchangeable: the Lean environment and the normalized header."""

    environment: str  # lean executable + version + project root (+ sandbox/env variant)
    header: str  # normalized module header (see header.py)

    def short(self) -> str:
        header = self.header.replace("\n", " ")
        return header if len(header) <= 60 else header[:57] + "..."


@dataclass(frozen=True, slots=True)
class SlotFate:
    """What an error means for the slot it happened on and for the work that raised it."""

    discard: bool  # the process must not serve again: killed on release, replaced
    retry: bool  # idempotent work may run once more (on the kept slot, or a fresh one)
    why: str


_KEEP = "the server process is fine"
# Most specific first: WorkerCrashed, ContentModified ... are ResponseErrors, which are
# ServerErrors. The first matching class decides.
_FATES: tuple[tuple[type[BaseException], SlotFate], ...] = (
    # The file worker died; the server is fine and the next change (the retry sends one)
    # restarts the worker.
    (WorkerCrashed, SlotFate(False, True, "worker crashed; the next change restarts it")),
    (WorkerExited, SlotFate(False, True, "worker exited; the next change restarts it")),
    # Processing of the version stopped (crash or fatal error). Which of this and WorkerCrashed
    # a caller sees for one crash depends on which of Lean's messages arrives first, so both
    # are treated alike; a deterministic fatal error costs one repeat.
    (ElaborationFailed, SlotFate(False, True, "processing stopped; the next change restarts")),
    # Transient answers about the document, not the process: ask again.
    (ContentModified, SlotFate(False, True, "the document changed under the request")),
    (RequestCancelled, SlotFate(False, True, "the server cancelled the request")),
    (RpcNeedsReconnect, SlotFate(False, True, "the RPC session was dropped")),
    # Any other answer: the server is alive and answered; asking again gives the same answer.
    (ResponseError, SlotFate(False, False, f"the server answered with an error; {_KEEP}")),
    # A missed deadline: the process may be hung or stuck in a runaway elaboration. Kill it;
    # deadlines are never retried (the same work would miss the same deadline).
    (RequestTimeout, SlotFate(True, False, "missed a deadline")),
    # The process died, closed, could not start, or broke the protocol: a fresh one may work.
    (ServerError, SlotFate(True, True, "the server process failed")),
    (ProtocolError, SlotFate(True, True, "the server broke the protocol")),
    (SlotBroken, SlotFate(True, True, "the slot was already broken")),
    # No slot involved (busy, closed pool): nothing to discard, nothing to gain by retrying.
    (PoolError, SlotFate(False, False, "a pool state, not a slot fault")),
)
# DocumentError and other LeanrigErrors, and bugs in the caller's operation: the process did
# nothing wrong (the text is the state, the next use replaces it), and the work would fail again.
_CALLER = SlotFate(False, False, f"the caller's error; {_KEEP}")


def slot_fate(error: BaseException) -> SlotFate:
    """The one classification of slot health: keep or discard the slot, retry or not."""
    for cls, fate in _FATES:
        if isinstance(error, cls):
            return fate
    return _CALLER


def describe(error: BaseException) -> str:
    message = error.message if isinstance(error, LeanrigError) else str(error)
    return f"{type(error).__name__}: {message}"


class Slot:
    def __init__(self, number: int, key: PoolKey, command: ServerCommand, header_text: str) -> None:
        self.number = number
        self.key = key
        self.command = command
        self.header_text = header_text
        self.uri = (command.cwd / f"_leanrig_slot_{number}.lean").as_uri()
        self.state: SlotState = "starting"
        self.uses = 0
        self.started_at = time.monotonic()
        self.last_used = self.started_at
        self.broken: str | None = None  # why the slot must not be reused
        self.client: LeanClient | None = None
        self.stop_requested = anyio.Event()
        self.last_holder: str | None = None  # affinity: the session that used it last
        self._rss_checked_at = 0.0
        self._rss_cache = 0

    # -- identity and health ---------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.client.pid if self.client is not None else None

    @property
    def alive(self) -> bool:
        return self.client is not None and self.client.alive and self.broken is None

    def age(self) -> float:
        return time.monotonic() - self.started_at

    def rss_bytes(self, max_age: float = 0.0) -> int:
        """Resident memory of the server and all its workers (cached for ``max_age`` s)."""
        now = time.monotonic()
        if max_age and now - self._rss_checked_at < max_age:
            return self._rss_cache
        total = 0
        if self.client is not None:
            total = tree_rss(self.client.pid)
        self._rss_checked_at, self._rss_cache = now, total
        return total

    def mark_broken(self, reason: str) -> None:
        if self.broken is None:
            self.broken = reason

    def kill(self, reason: str) -> None:
        """Kill the process tree now (hung or over cap); the pool replaces it."""
        self.mark_broken(reason)
        if self.client is not None:
            self.client.transport.kill()
        self.stop_requested.set()

    # -- operations --------------------------------------------------------------------------

    def _client(self) -> LeanClient:
        if self.client is None or self.broken is not None:
            raise SlotBroken(f"slot {self.number} is not usable: {self.broken or 'not started'}")
        return self.client

    def judge(self, error: BaseException) -> SlotFate:
        """Apply ``slot_fate`` to this slot: mark it broken if the error says so."""
        fate = slot_fate(error)
        if fate.discard:
            self.mark_broken(describe(error))
        return fate

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        try:
            yield
        except Exception as exc:
            self.judge(exc)
            raise

    async def elaborate(self, text: str, *, timeout: float) -> DocumentReport:
        """Make ``text`` the slot document's content and wait until it is fully elaborated."""
        await self.send(text)
        return await self.wait(timeout=timeout)

    async def send(self, text: str) -> None:
        """Make ``text`` the document's content without waiting (queries may follow at once:
        Lean answers them for this version)."""
        client = self._client()
        async with self._guard():
            if client.is_open(self.uri):
                await client.change(self.uri, text)
            else:
                await client.open(self.uri, text)

    async def wait(self, *, timeout: float) -> DocumentReport:
        """The barrier: the current version fully elaborated, with its diagnostics."""
        async with self._guard():
            return await self._client().wait_for(self.uri, timeout=timeout)

    def text(self) -> str:
        return self._client().text(self.uri)

    async def plain_goal(self, pos: LspPos, *, timeout: float) -> PlainGoal:
        async with self._guard():
            return await self._client().plain_goal(self.uri, pos, timeout=timeout)

    async def plain_term_goal(self, pos: LspPos, *, timeout: float) -> PlainTermGoal:
        async with self._guard():
            return await self._client().plain_term_goal(self.uri, pos, timeout=timeout)

    async def document_symbols(self, *, timeout: float) -> list[DocumentSymbol]:
        async with self._guard():
            return await self._client().document_symbols(self.uri, timeout=timeout)

    async def interactive_goals(self, pos: LspPos, *, timeout: float) -> list[InteractiveGoal]:
        async with self._guard():
            return await self._client().interactive_goals(self.uri, pos, timeout=timeout)
