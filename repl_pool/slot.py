"""A pool slot: one warm Lean server process with a document per holder, all of one header.

``slot_fate`` alone decides slot health, for the slot and the pool alike."""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import structlog
from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    TRACE_EVENT,
    ContentModified,
    DocQuery,
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
    common_prefix,
    minimal_edit,
)

from .errors import PoolError, SlotBroken
from .oneshot import tree_rss

log = structlog.get_logger("leanrig.slot")

SlotState = Literal["starting", "idle", "busy", "stopping"]

ABANDON_SECONDS = 1.0  # bound on closing an abandoned document (Slot._abandon)

DOCUMENTS_PER_PROCESS = 4  # documents (so Lean workers) one server process keeps open
# A worker start, in characters elaborated meanwhile (a new document also elaborates its text).
OPEN_COST_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Elaboration:
    """A version's report, symbols and goals (a goal is None if not asked, clean or refused)."""

    report: DocumentReport
    symbols: list[DocumentSymbol]
    goal: PlainGoal | None
    term_goal: PlainTermGoal | None


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
_ANSWERED = SlotFate(False, False, f"the server answered with an error; {_KEEP}")
# Most specific first (subclasses before ResponseError and ServerError): the first match decides.
_FATES: tuple[tuple[type[BaseException], SlotFate], ...] = (
    (WorkerCrashed, SlotFate(False, True, "worker crashed; the next change restarts it")),
    (WorkerExited, SlotFate(False, True, "worker exited; the next change restarts it")),
    # One crash may surface as this or WorkerCrashed, depending on message order: treat alike.
    (ElaborationFailed, SlotFate(False, True, "processing stopped; the next change restarts")),
    (ContentModified, SlotFate(False, True, "the document changed under the request")),
    (RequestCancelled, SlotFate(False, True, "the server cancelled the request")),
    (RpcNeedsReconnect, SlotFate(False, True, "the RPC session was dropped")),
    (ResponseError, _ANSWERED),
    # The process may be hung; the same work would miss the same deadline, so never retried.
    (RequestTimeout, SlotFate(True, False, "missed a deadline")),
    (ServerError, SlotFate(True, True, "the server process failed")),
    (ProtocolError, SlotFate(True, True, "the server broke the protocol")),
    (SlotBroken, SlotFate(True, True, "the slot was already broken")),
    (PoolError, SlotFate(False, False, "a pool state, not a slot fault")),
)
# Any other error is the caller's: the process did nothing wrong, and the work would fail again.
_CALLER = SlotFate(False, False, f"the caller's error; {_KEEP}")


def slot_fate(error: BaseException) -> SlotFate:
    """The one classification of slot health: keep or discard the slot, retry or not."""
    for cls, fate in _FATES:
        if isinstance(error, cls):
            return fate
    return _CALLER


def lean_refused(error: BaseException) -> bool:
    """Lean's own handler failed on the request: the process is fine, and a retry fails alike."""
    return slot_fate(error) is _ANSWERED


def portable_deadline(operation: object) -> float | None:
    """Seconds a *portable* operation may take on its slot; None for a plain one.

    Portable: picklable, self-contained, ``portable = True``; a pool may run it remotely."""
    if getattr(operation, "portable", False) is not True:
        return None
    deadline = getattr(operation, "deadline", None)
    return float(deadline) if isinstance(deadline, int | float) else None


def describe(error: BaseException) -> str:
    message = error.message if isinstance(error, LeanrigError) else str(error)
    return f"{type(error).__name__}: {message}"


class Slot:
    def __init__(
        self,
        number: int,
        key: PoolKey,
        command: ServerCommand,
        header_text: str,
        *,
        max_documents: int = DOCUMENTS_PER_PROCESS,
    ) -> None:
        if max_documents < 1:
            raise ValueError("max_documents must be at least 1")
        self.number = number
        self.key = key
        self.command = command
        self.header_text = header_text
        self.max_documents = max_documents
        # uri -> owning holder (None: nobody's), least recently used first.
        self._documents: OrderedDict[str, str | None] = OrderedDict()
        self._document_numbers = 0
        self.holder: str | None = None  # who borrows the slot now (set by the pool on acquire)
        self.uri = self._new_uri()  # the document the current operation works on
        self.documents_opened = 0
        self.documents_taken_over = 0
        self.state: SlotState = "starting"
        self.uses = 0
        self.started_at = time.monotonic()
        self.last_used = self.started_at
        self.broken: str | None = None  # why the slot must not be reused
        self.client: LeanClient | None = None
        self.stop_requested = anyio.Event()
        self._rss_checked_at = 0.0
        self._rss_cache = 0

    @property
    def pid(self) -> int | None:
        pids = self.client.pids if self.client is not None else ()
        return pids[0] if pids else None

    @property
    def alive(self) -> bool:
        return self.client is not None and self.client.alive and self.broken is None

    def age(self) -> float:
        return time.monotonic() - self.started_at

    def rss_bytes(self, max_age: float = 0.0) -> int:
        """Resident bytes of the server and all its workers (cached for ``max_age`` seconds)."""
        now = time.monotonic()
        if max_age and now - self._rss_checked_at < max_age:
            return self._rss_cache
        total = 0
        if self.client is not None:
            total = sum(tree_rss(pid) for pid in self.client.pids)
        self._rss_checked_at, self._rss_cache = now, total
        return total

    def mark_broken(self, reason: str) -> None:
        if self.broken is None:
            self.broken = reason

    def kill(self, reason: str) -> None:
        """Kill the process tree now (hung or over cap); the pool replaces it."""
        self.mark_broken(reason)
        if self.client is not None:
            self.client.kill()
        self.stop_requested.set()

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
    async def _guard(self, *, abandon_on_cancel: bool = False) -> AsyncIterator[None]:
        """Judge errors here; ``abandon_on_cancel``: close a cancelled operation's document."""
        try:
            yield
        except anyio.get_cancelled_exc_class():
            if abandon_on_cancel:
                await self._abandon()
            raise
        except Exception as exc:
            self.judge(exc)
            raise

    async def _abandon(self) -> None:
        """Close the current document, shielded and bounded: it runs while being cancelled."""
        uri, client = self.uri, self.client
        self._documents.pop(uri, None)
        if client is None or not client.is_open(uri):
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(ABANDON_SECONDS):
            try:
                await client.close_document(uri)
            except LeanrigError:
                pass  # the process is gone or going: nothing left to stop
        log.info("slot.document_abandoned", slot=self.number, uri=uri)

    async def elaborate(self, text: str, *, timeout: float) -> DocumentReport:
        """Make ``text`` the slot document's content and wait until it is fully elaborated."""
        await self.send(text)
        return await self.wait(timeout=timeout)

    def _new_uri(self) -> str:
        self._document_numbers += 1
        name = f"_leanrig_slot_{self.number}_{self._document_numbers}.lean"
        return (self.command.cwd / name).as_uri()

    def bind(self, holder: str | None) -> None:
        """Lend the slot to ``holder``: its own document, if any, becomes current."""
        self.holder = holder
        uri = self.document_of(holder)
        if uri is not None:
            self.uri = uri

    def document_of(self, holder: str | None) -> str | None:
        """The uri of ``holder``'s document in this process, or None."""
        if holder is None:
            return None
        for uri, owner in self._documents.items():
            if owner == holder:
                return uri
        return None

    def holders(self) -> tuple[str, ...]:
        return tuple(owner for owner in self._documents.values() if owner is not None)

    def _choose_document(self, client: LeanClient, text: str) -> tuple[str, bool]:
        """The cheapest document for ``text`` by re-elaboration: (uri, must it be opened)."""
        own = self.document_of(self.holder)
        if own is not None:
            return own, False
        room = len(self._documents) < self.max_documents
        if room:
            # Never take another holder's document while there is room: they would alternate.
            chosen, least = None, OPEN_COST_CHARS + len(text) - len(self.header_text)
            for uri, owner in self._documents.items():
                if owner is None:
                    current = client.text(uri)
                    shared = common_prefix(current, text)
                    if (cost := len(text) - shared + len(current) - shared) <= least:
                        chosen, least = uri, cost
            if chosen is not None:
                return chosen, False
            return self._new_uri(), True
        best: str | None = None
        best_cost = 0
        for uri, owner in self._documents.items():
            current = client.text(uri)
            shared = common_prefix(current, text)
            cost = len(text) - shared + (len(current) - shared if owner is not None else 0)
            if best is None or cost < best_cost:
                best, best_cost = uri, cost
        assert best is not None
        if self._documents[best] not in (None, self.holder):
            self.documents_taken_over += 1
        return best, False

    def _place(self, client: LeanClient, text: str) -> tuple[str, bool]:
        """Choose and record the holder's document for ``text``: (uri, must it be opened)."""
        uri, new = self._choose_document(client, text)
        self.uri = uri
        self._documents[uri] = self.holder
        self._documents.move_to_end(uri)
        if new:
            self.documents_opened += 1
        return uri, new

    async def send(self, text: str) -> None:
        """Make ``text`` the holder's document content without waiting for elaboration."""
        client = self._client()
        async with self._guard(abandon_on_cancel=True):
            uri, new = self._place(client, text)
            if new:
                try:
                    await client.open(uri, text)
                except BaseException:
                    # Never keep a document recorded that the client does not hold.
                    self._documents.pop(uri, None)
                    raise
            else:
                await client.edit(uri, [minimal_edit(client.text(uri), text)])

    async def elaborate_and_ask(
        self,
        text: str,
        *,
        goal_at: LspPos | None,
        term_at: LspPos | None,
        timeout: float,
        symbols_from: int = 0,
    ) -> Elaboration:
        """``elaborate(text)`` plus symbols and, unless clean, goals, all in the same write.

        ``goal_at``/``term_at``: None means not asked; ``symbols_from``: first line kept."""
        client = self._client()
        queries = [DocQuery.symbols(symbols_from)]
        if goal_at is not None:
            queries.append(DocQuery.plain_goal(goal_at).made_optional().made_unless_clean())
        if term_at is not None:
            queries.append(DocQuery.plain_term_goal(term_at).made_optional().made_unless_clean())
        async with self._guard(abandon_on_cancel=True):
            uri, _ = self._place(client, text)
            try:
                report, answers = await client.update(uri, text, queries, timeout=timeout)
            except BaseException:
                if not client.is_open(uri):
                    self._documents.pop(uri, None)
                raise
            sys.audit(TRACE_EVENT, "Lean's answers in")
            symbols, *goals = answers
            goal = goals.pop(0) if goal_at is not None else None
            term = goals.pop(0) if term_at is not None else None
            # A failure behind a goal fails the step; a refused goal query only leaves it out.
            if not report.clean:
                for answer in (goal, term):
                    if isinstance(answer, LeanrigError) and not lean_refused(answer):
                        raise answer
            return Elaboration(
                report,
                symbols,
                goal if isinstance(goal, PlainGoal) else None,
                term if isinstance(term, PlainTermGoal) else None,
            )

    async def elaborate_with(
        self, text: str, queries: Sequence[DocQuery], *, timeout: float
    ) -> tuple[DocumentReport, list[Any]]:
        """``elaborate(text)`` with ``queries`` about that version in the same write."""
        client = self._client()
        async with self._guard(abandon_on_cancel=True):
            uri, _ = self._place(client, text)
            try:
                return await client.update(uri, text, queries, timeout=timeout)
            except BaseException:
                if not client.is_open(uri):
                    self._documents.pop(uri, None)
                raise

    async def wait(self, *, timeout: float) -> DocumentReport:
        """The barrier: the current version fully elaborated, with its diagnostics."""
        async with self._guard(abandon_on_cancel=True):
            return await self._client().wait_for(self.uri, timeout=timeout)

    def text(self) -> str:
        """The text of the holder's document ("" when it has none in this process)."""
        client = self._client()
        uri = self.document_of(self.holder)
        return client.text(uri) if uri is not None else ""

    async def ask(self, query: DocQuery, *, timeout: float) -> Any:
        """``query`` about the holder's document as it is now (lsp_bridge ``DocQuery``)."""
        async with self._guard():
            return await self._client().ask(self.uri, query, timeout)

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
