"""A pool slot: one warm Lean server process with a few open documents, all of one header.

Lean's server runs one worker per open document, and a worker keeps the command snapshots of
its document: a change re-elaborates only from the first changed command. A slot therefore
keeps up to ``max_documents`` documents, one per holder (a session), so sessions that take
turns on one process each keep their own warm document instead of re-elaborating the whole
file at every switch (measured: two sessions alternating on one process, one task with 1000
preceding declarations, 1.4-1.7 s per step with one shared document). A holder without a
document here gets the cheapest one: a document whose text shares all but a little with the
new text is reused (same task, another session: only the body changes), otherwise a new
document is opened while there is room, else the least recently used one is taken over.

The slot interface is what callers (sessions, checkers) use, and it is backend-neutral:
``elaborate(text)``, goal queries by position, ``alive``. Today's backend is the LSP server
(`lean --server` / `lake serve`) through lsp_bridge; a REPL backend would implement the same.

Slot health is decided in one place, ``slot_fate``: a pure function from an error to what
happens to the slot (keep it, or discard it: killed on release and replaced) and to the work
(may an idempotent operation run again). The slot's own guard and ``WarmPool.run`` both use
it, so a slot is never kept by one and killed by the other.
"""

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

# How long closing an abandoned document may take (Slot._abandon): with direct workers it is
# a signal to the worker; behind a server, one notification on its pipe.
ABANDON_SECONDS = 1.0

# Documents (so Lean workers, ~100 MB each with the bootstrap Lean; a full toolchain's workers
# map the same .olean files) one server process keeps open for different holders.
DOCUMENTS_PER_PROCESS = 4
# Re-using another document costs the commands after the first difference; opening a new one
# costs the whole text plus a worker start (~60 ms, about what 2,000 characters of commands
# take here). Counted in characters of text to re-elaborate.
OPEN_COST_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Elaboration:
    """A version's report and, about the same version, what `Slot.elaborate_and_ask` asked
    (a goal asked is None when the report is clean — not waited for, or its error ignored —
    and when Lean answered its query with an error, ``lean_refused``; one not asked is
    None)."""

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
    (ResponseError, _ANSWERED),
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


def lean_refused(error: BaseException) -> bool:
    """Lean answered the request with an error of its own (its handler failed, e.g. the pretty
    printer on a term it cannot show): the process is fine, and asking the same again gets the
    same answer."""
    return slot_fate(error) is _ANSWERED


def portable_deadline(operation: object) -> float | None:
    """Seconds a *portable* operation may take on its slot; None for a plain one.

    An operation is what `WarmPool.run` runs on a slot: ``async (slot) -> result``. A portable
    one is also picklable and self-contained (its state is its own fields, its result plain
    data) and says so with ``portable = True`` and a ``deadline`` (seconds): a pool may then run
    it where the slot lives — a `RayPool` ships it to the node, so the whole operation is one
    round trip instead of one per slot call. A plain operation (a closure over the caller's
    state) runs in the caller's process against the slot's methods."""
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
        # uri -> holder that owns it (None: nobody's, e.g. the header document), LRU first.
        self._documents: OrderedDict[str, str | None] = OrderedDict()
        self._document_numbers = 0
        self.holder: str | None = None  # who borrows the slot now (set by the pool on acquire)
        self.uri = self._new_uri()  # the document the current operation works on
        self.documents_opened = 0  # didOpen sent (each one starts a Lean worker)
        self.documents_taken_over = 0  # another holder's document re-used for a new holder
        self.state: SlotState = "starting"
        self.uses = 0
        self.started_at = time.monotonic()
        self.last_used = self.started_at
        self.broken: str | None = None  # why the slot must not be reused
        self.client: LeanClient | None = None
        self.stop_requested = anyio.Event()
        self._rss_checked_at = 0.0
        self._rss_cache = 0

    # -- identity and health ---------------------------------------------------------------

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
        """Resident memory of the server and all its workers (cached for ``max_age`` s)."""
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
    async def _guard(self, *, abandon_on_cancel: bool = False) -> AsyncIterator[None]:
        """Judge an error on this slot. ``abandon_on_cancel``: the operation puts text in the
        holder's document or waits for it; if it is cancelled (an agent's cancel, a client
        gone, shutdown), nothing will wait for that version, and a runaway one would go on
        using a core and memory until the next change: the document is closed (``_abandon``)."""
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
        """Close the current document (its worker stops elaborating); the holder's next
        operation opens a fresh one. Shielded and bounded: it runs while being cancelled."""
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

    # -- documents ---------------------------------------------------------------------------

    def _new_uri(self) -> str:
        self._document_numbers += 1
        name = f"_leanrig_slot_{self.number}_{self._document_numbers}.lean"
        return (self.command.cwd / name).as_uri()

    def bind(self, holder: str | None) -> None:
        """The pool lends the slot to ``holder``: its own document, if any, becomes current."""
        self.holder = holder
        uri = self.document_of(holder)
        if uri is not None:
            self.uri = uri

    def document_of(self, holder: str | None) -> str | None:
        """The uri of ``holder``'s document in this process (None: it has none here)."""
        if holder is None:
            return None
        for uri, owner in self._documents.items():
            if owner == holder:
                return uri
        return None

    def holders(self) -> tuple[str, ...]:
        return tuple(owner for owner in self._documents.values() if owner is not None)

    def _choose_document(self, client: LeanClient, text: str) -> tuple[str, bool]:
        """The document ``text`` goes to for the current holder, and whether it must be opened.
        Weighs the cost of switching: characters Lean re-elaborates (after the first
        difference) in an open document, now and when its owner comes back, versus the whole
        text plus a worker start."""
        own = self.document_of(self.holder)
        if own is not None:
            return own, False
        room = len(self._documents) < self.max_documents
        if room:
            # Another holder's document is never taken while there is room: sessions taking
            # turns would take it from each other at every step (measured: 55 vs 21 ms).
            free = [u for u, owner in self._documents.items() if owner is None]
            cheap = [
                u
                for u in free
                if len(text) - common_prefix(client.text(u), text) <= OPEN_COST_CHARS
            ]
            if cheap:
                return cheap[-1], False
            return self._new_uri(), True
        best: str | None = None
        best_cost = 0
        for uri, owner in self._documents.items():  # LRU first: ties go to the LRU
            current = client.text(uri)
            shared = common_prefix(current, text)
            # What we re-elaborate now, plus what its owner re-elaborates on its next step.
            cost = len(text) - shared + (len(current) - shared if owner is not None else 0)
            if best is None or cost < best_cost:
                best, best_cost = uri, cost
        assert best is not None
        if self._documents[best] not in (None, self.holder):
            self.documents_taken_over += 1
        return best, False

    def _place(self, client: LeanClient, text: str) -> tuple[str, bool]:
        """Choose the holder's document for ``text`` and record it: (uri, must it be opened)."""
        uri, new = self._choose_document(client, text)
        self.uri = uri
        self._documents[uri] = self.holder
        self._documents.move_to_end(uri)
        if new:
            self.documents_opened += 1
        return uri, new

    async def send(self, text: str) -> None:
        """Make ``text`` the content of the holder's document without waiting (queries may
        follow at once: Lean answers them for this version)."""
        client = self._client()
        async with self._guard(abandon_on_cancel=True):
            uri, new = self._place(client, text)
            if new:
                try:
                    await client.open(uri, text)
                except BaseException:
                    # Not open (e.g. the caller was cancelled: its client went away): no
                    # document may stay recorded that the client does not hold.
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
        """``elaborate(text)`` and, about the same version, its document symbols and — unless
        the version is clean — the tactic goals at ``goal_at`` and the expected type at
        ``term_at`` (None: not asked; each goal query costs Lean CPU that the version's
        elaboration competes with, a few percent of a short step, so a caller asks the one it
        will show). All go to Lean with the change
        in one write, so none costs a round trip after the barrier; a clean version's step
        does not wait for the goals (lsp_bridge ``LeanClient.update``, ``unless_clean``).
        ``symbols_from``: only the symbols ending on or after this line
        (``parse_symbols``)."""
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
                    self._documents.pop(uri, None)  # as in send(): never opened
                raise
            sys.audit(TRACE_EVENT, "Lean's answers in")
            symbols, *goals = answers
            goal = goals.pop(0) if goal_at is not None else None
            term = goals.pop(0) if term_at is not None else None
            # The goals explain a report with something in it; a failure of the process or
            # worker behind them is the step's then. An error Lean answered a goal query with
            # leaves that goal out: the version's report stands. (Asked on a first error that
            # a later report of the version dropped, they are not needed, and neither is
            # their error.)
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
        """``elaborate(text)`` with ``queries`` about that version in the same write (each
        answered as Lean gets there: no round trip after the barrier)."""
        client = self._client()
        async with self._guard(abandon_on_cancel=True):
            uri, _ = self._place(client, text)
            try:
                return await client.update(uri, text, queries, timeout=timeout)
            except BaseException:
                if not client.is_open(uri):
                    self._documents.pop(uri, None)  # as in send(): never opened
                raise

    async def wait(self, *, timeout: float) -> DocumentReport:
        """The barrier: the current version fully elaborated, with its diagnostics."""
        async with self._guard(abandon_on_cancel=True):
            return await self._client().wait_for(self.uri, timeout=timeout)

    def text(self) -> str:
        """The text of the holder's document ("" when it has none in this process yet)."""
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
