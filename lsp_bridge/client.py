"""An async client for Lean's language server: documents, the elaboration barrier, goals, RPC.

Responsibilities (and nothing else): the LSP lifecycle (initialize / shutdown), document sync
(didOpen / didChange / didClose with versions), collecting diagnostics per version (including
Lean 4.31+ ``isIncremental`` streaming), the barrier that returns only when a version is fully
elaborated, and queries (plain goals, term goals, hover, document symbols, RPC interactive goals).

Two ways to reach Lean, one API: through Lean's watchdog (``lean --server``: one process that
starts a file worker per document and relays every message), or — ``ServerCommand.
direct_workers`` — straight to one ``lean --worker`` per document, doing the little the
watchdog does for a client that sends no workspace requests: start the worker with
``initialize`` + ``didOpen`` (it never answers ``initialize``), and start it again when it died
or the document's header changed (a worker exits with code 2 on a header change; Lean's
watchdog restarts it on the next change, and so does this client). Measured with the bootstrap
Lean (docs/architecture.md): the relay costs ~0.5-0.9 ms and ~1.5 ms of Lean CPU per edit, and
a process per server.

It must not own pools, sessions or policy: callers decide what to open and when to give up.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus
from lsprotocol import types as lsp
from lsprotocol.converters import get_converter

from ._groups import single_errors
from .errors import (
    ContentModified,
    DocumentError,
    ElaborationFailed,
    LeanrigError,
    RequestTimeout,
    RpcNeedsReconnect,
    ServerClosed,
    ServerDied,
    ServerError,
    ServerStartFailed,
    WorkerCrashed,
    WorkerExited,
)
from .header import parse_header
from .lean_types import (
    DocumentReport,
    FileProgress,
    InteractiveGoal,
    LeanDiagnostic,
    PlainGoal,
    PlainTermGoal,
    ReportStatus,
    collect_rpc_refs,
)
from .positions import LspPos, lsp_position
from .timeouts import DEFAULT_TIMEOUTS, REPORT_DELAY_MS, Timeouts
from .transport import Conditional, LspTransport, unreadable_answer

log = structlog.get_logger("leanrig.lsp")
_converter = get_converter()

RPC_KEEPALIVE_SECONDS = 5.0  # Lean drops RPC sessions not kept alive for ~30 s


# After a version's fatal `fileProgress` through the watchdog, how long its requests may still
# be answered before they are ended (``LeanClient._on_fatal_progress``): a live worker answers
# within milliseconds; a crashed one never.
FATAL_GRACE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """How to start a Lean language server in a project.

    ``argv`` is the full command (e.g. ``[lean, --server]`` or ``[lake, serve, --]``); server
    options are appended. ``env`` is the complete environment (None: inherit).
    """

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str] | None = None
    report_delay_ms: int = REPORT_DELAY_MS
    edit_delay_ms: int = 1
    incremental_diagnostics: bool = True
    # Talk to one `lean --worker` per document instead of the watchdog (module docstring);
    # only where ``worker_argv`` knows the worker's command.
    direct_workers: bool = False
    # With direct workers: end a step when Lean's reporter is known to have published the
    # version's last diagnostics, not when it answers the barrier (``LeanClient.update``).
    early_barrier: bool = True

    @property
    def program(self) -> str:
        """The Lean (or lake) executable, past any sandbox wrapper in front of it."""
        for arg in self.argv:
            name = arg.rsplit("/", 1)[-1]
            if name in ("lean", "lake") or name.startswith(("lean-", "lake-")):
                return arg
        return self.argv[0]

    def full_argv(self) -> list[str]:
        return [*self.argv, f"-Dserver.reportDelayMs={self.report_delay_ms}"]

    def worker_argv(self) -> list[str] | None:
        """The file worker's command: this command with ``lean --server`` made ``lean
        --worker`` (what the watchdog itself runs per document: the same executable, options
        and environment). None for ``lake serve``: Lake's watchdog gives its workers an
        environment of its own, which has not been checked against a full toolchain here."""
        argv = self.full_argv()
        # The last `--server` right after a `lean`: a sandbox wrapper's own arguments (a bind
        # of a directory named `lean-…`) come before the program.
        for at in range(len(argv) - 1, 0, -1):
            if argv[at] == "--server":
                name = argv[at - 1].rsplit("/", 1)[-1]
                if name != "lean" and not name.startswith("lean-"):
                    return None
                argv[at] = "--worker"
                return argv
        return None


@dataclass(slots=True)
class _Document:
    uri: str
    text: str
    version: int
    diag_version: int = -1
    diagnostics: list[LeanDiagnostic] = field(default_factory=list)
    progress: dict[str, Any] | None = None  # raw $/lean/fileProgress of the current version
    fatal_version: int = -1
    # The early barrier (``LeanClient.update``): the version a step waits for with it, the
    # latest version whose diagnostics are known final before Lean answers the barrier, and
    # the version whose next diagnostics will be (reported done with none published before).
    early_version: int = -1
    final_version: int = -1
    final_after_next: int = -1
    # A change may not have reached Lean (its write was cancelled or failed): the next one
    # sends the whole text.
    resync: bool = False
    # Set when processing of the current version stopped for good (crash, fatal header error);
    # requests the watchdog would queue for a dead worker are not sent.
    fatal: anyio.Event = field(default_factory=anyio.Event)


@dataclass(slots=True)
class _Worker:
    """A direct file worker (``ServerCommand.direct_workers``) and the header it was opened
    with: Lean's worker exits when a change alters it, so such a change starts a new one."""

    transport: LspTransport
    stop: anyio.Event = field(default_factory=anyio.Event)
    header: str = ""
    # The document's text before this offset is the text its header was parsed from (every
    # change since began at or after it): a change from here on keeps the header.
    header_read_to: int = 0


def header_region(text: str) -> tuple[str, int]:
    """``text`` up to the end of its module header (a change here restarts a file worker),
    and how far the header's parse read (``Header.read_to``)."""
    header = parse_header(text)
    return text[: header.end], header.read_to


def parse_symbols(result: Any, from_line: int = 0) -> list[lsp.DocumentSymbol]:
    """Lean's document symbols; with ``from_line``, only those ending on or after that line
    (a container ending earlier is dropped with its children). Reading a symbol into its
    lsprotocol type costs ~20 µs, so a file with 1000 declarations cost ~20 ms per answer,
    while a proof step needs the few around and after its theorem."""
    if from_line <= 0:
        return [_converter.structure(s, lsp.DocumentSymbol) for s in result or ()]
    return [_converter.structure(s, lsp.DocumentSymbol) for s in _ending_from(result, from_line)]


def _ending_from(symbols: Any, line: int) -> list[dict[str, Any]]:
    """The raw symbols ending on or after ``line``, their children likewise (a namespace
    holding the whole file is kept, its earlier declarations are not)."""
    kept = []
    for s in symbols or ():
        if s["range"]["end"]["line"] >= line:
            children = s.get("children")
            kept.append({**s, "children": _ending_from(children, line)} if children else s)
    return kept


@dataclass(frozen=True, slots=True)
class DocQuery:
    """A request about a document's version, asked with the change (``LeanClient.update``):
    ``method``, the position if it takes one, and how to read its answer."""

    method: str
    parse: Callable[[Any], Any]
    position: LspPos | None = None
    # An optional query's error is returned in its place instead of raised (the caller may
    # not need its answer, e.g. the goals of a proof that turned out complete).
    optional: bool = False
    # Needed only if the version is not clean (``DocumentReport.clean``): asked with the
    # change, but not waited for when the version turns out clean (its answer is then None).
    unless_clean: bool = False

    def made_optional(self) -> DocQuery:
        return DocQuery(self.method, self.parse, self.position, True, self.unless_clean)

    def made_unless_clean(self) -> DocQuery:
        """This query, needed only about a version that is not clean. It goes to Lean with
        the change, so a version with an error gets it while Lean finishes the version (asked
        on the version's first error instead, it cost a round trip after the barrier: the
        first error of a short file comes at its end); a clean version's step does not wait
        for it (``Conditional``)."""
        return DocQuery(self.method, self.parse, self.position, self.optional, True)

    @staticmethod
    def symbols(from_line: int = 0) -> DocQuery:
        """Document symbols (with ``from_line``: those ending on or after it, see
        ``parse_symbols``)."""
        if from_line <= 0:
            return DocQuery("textDocument/documentSymbol", parse_symbols)
        return DocQuery(
            "textDocument/documentSymbol", functools.partial(parse_symbols, from_line=from_line)
        )

    @staticmethod
    def plain_goal(pos: LspPos) -> DocQuery:
        return DocQuery("$/lean/plainGoal", PlainGoal.from_json, pos)

    @staticmethod
    def plain_term_goal(pos: LspPos) -> DocQuery:
        return DocQuery("$/lean/plainTermGoal", PlainTermGoal.from_json, pos)


def _query_params(uri: str, query: DocQuery) -> dict[str, Any]:
    params: dict[str, Any] = {"textDocument": {"uri": uri}}
    if query.position is not None:
        params["position"] = query.position.to_json()
    return params


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replace the code point range ``[start, end)`` of the current text with ``text``."""

    start: int
    end: int
    text: str


def apply_edit(text: str, edit: TextEdit) -> str:
    return text[: edit.start] + edit.text + text[edit.end :]


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``: a binary search over slice
    comparisons (C speed; a character loop costs ~1 ms per 25,000 characters)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # a[:lo] == b[:lo], a[:hi] != b[:hi]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    lo, hi = 0, max(0, min(len(a), len(b), limit))
    if a[len(a) - hi :] == b[len(b) - hi :]:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def minimal_edit(old: str, new: str) -> TextEdit:
    """The smallest single replacement turning ``old`` into ``new`` (common prefix, then the
    common suffix of what remains). On every edit's path: slice comparisons, not a loop."""
    start = common_prefix(old, new)
    tail = common_suffix(old, new, min(len(old), len(new)) - start)
    return TextEdit(start, len(old) - tail, new[start : len(new) - tail])


def path_to_uri(path: Path) -> str:
    return path.absolute().as_uri()


class LeanClient:
    """A Lean language server with its documents. Create with ``LeanClient.start(command)``."""

    def __init__(self, command: ServerCommand, timeouts: Timeouts) -> None:
        self.command = command
        self.timeouts = timeouts
        self._docs: dict[str, _Document] = {}
        self._transport: LspTransport | None = None
        self._tg: TaskGroup | None = None
        self._rpc_sessions: dict[str, str] = {}
        self.server_info: dict[str, Any] = {}
        # Direct file workers (ServerCommand.direct_workers): the worker command, each open
        # document's worker, the `initialize` parameters every worker is started with.
        self._worker_argv: list[str] | None = None
        self._workers: dict[str, _Worker] = {}
        self._starting: dict[str, anyio.Event] = {}  # uri -> set when its worker start ends
        self._init_params: dict[str, Any] = {}
        self._closed = False
        # Diagnostics that came after the early barrier had ended their version's step (the
        # rule does not hold for this Lean): counted, and the early barrier is off from then.
        self.early_barrier_faults = 0
        self.early_barrier_ends = 0  # steps the early barrier ended (before Lean's answer)

    @classmethod
    @asynccontextmanager
    async def start(
        cls, command: ServerCommand, *, timeouts: Timeouts = DEFAULT_TIMEOUTS
    ) -> AsyncIterator[LeanClient]:
        client = cls(command, timeouts)
        worker_argv = command.worker_argv() if command.direct_workers else None
        if worker_argv is not None:
            with single_errors():
                async with anyio.create_task_group() as tg:
                    client._tg = tg
                    client._worker_argv = worker_argv
                    client._init_params = client._initialize_params()
                    try:
                        yield client
                    finally:
                        client._closed = True
                        client._tg = None  # (nothing is started in it from here on)
                        # Each worker's task kills and reaps it (shielded) as it is cancelled.
                        tg.cancel_scope.cancel()
            return
        with single_errors():
            async with (
                LspTransport.spawn(
                    command.full_argv(),
                    cwd=command.cwd,
                    env=command.env,
                    on_notification=client._on_notification,
                    shutdown_timeout=timeouts.shutdown,
                    write_timeout=timeouts.request,
                ) as transport,
                anyio.create_task_group() as tg,
            ):
                client._transport = transport
                client._tg = tg
                try:
                    await client._initialize()
                    yield client
                finally:
                    client._tg = None  # (the server's last words must not start tasks in it)
                    tg.cancel_scope.cancel()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def transport(self) -> LspTransport:
        assert self._transport is not None, "client not started"
        return self._transport

    @property
    def pid(self) -> int:
        """The server's process id (with direct workers: the oldest live worker's)."""
        if self._worker_argv is None:
            return self.transport.pid
        pids = self.pids
        if not pids:
            raise ServerClosed("no Lean file worker is running")
        return pids[0]

    @property
    def pids(self) -> tuple[int, ...]:
        """Every Lean process this client started (the server, or each document's worker);
        a walk of their trees finds all the memory they hold."""
        if self._worker_argv is None:
            return (self.transport.pid,) if self._transport is not None else ()
        return tuple(w.transport.pid for w in self._workers.values() if w.transport.alive)

    @property
    def direct(self) -> bool:
        """True when this client talks to file workers directly (no watchdog)."""
        return self._worker_argv is not None

    @property
    def alive(self) -> bool:
        if self._worker_argv is not None:
            return not self._closed  # a dead worker is restarted by the next change
        return self._transport is not None and self._transport.alive

    def kill(self) -> None:
        """Kill every Lean process of this client now (hung or over a cap)."""
        if self._worker_argv is None:
            self.transport.kill()
            return
        for worker in self._workers.values():
            if worker.transport.alive:  # (a dead one's orphans cost a /proc scan to find)
                worker.transport.kill()

    def _conn(self, uri: str) -> LspTransport:
        """Where messages about ``uri`` go: the server, or the document's own worker."""
        if self._worker_argv is None:
            return self.transport
        worker = self._workers.get(uri)
        if worker is None:
            raise self._worker_gone(uri, None, None)
        if not worker.transport.alive:
            cause = worker.transport.failure or ServerDied("its output ended")
            raise self._worker_error(uri, cause, worker.transport)
        return worker.transport

    def _replaced(self, uri: str, conn: LspTransport) -> bool:
        """Did a change give ``uri`` a new worker since ``conn`` was its connection?"""
        if self._worker_argv is None:
            return False
        worker = self._workers.get(uri)
        return worker is None or worker.transport is not conn

    def _worker_gone(
        self, uri: str, cause: LeanrigError | None, transport: LspTransport | None
    ) -> WorkerCrashed:
        """What a request about ``uri`` meets when its direct worker is gone: what the
        watchdog answers then (the next change starts a new worker), with the worker's exit
        code and last words."""
        why = f": {cause.message}" if cause is not None else ""
        error = WorkerCrashed("request", -32902, f"the Lean file worker for {uri} stopped{why}")
        if transport is not None:
            error.stderr_tail = transport.stderr_tail()
            error.returncode = transport.returncode
        return error

    def _worker_error(self, uri: str, error: LeanrigError, conn: LspTransport) -> LeanrigError:
        """An error from the direct worker ``conn``, as the watchdog would report it: its
        death is a worker crash (the server is fine, the next change restarts the worker) —
        unless a change replaced it meanwhile (header change): the document changed under the
        request. Anything else, and every error through a server, unchanged."""
        if self._worker_argv is None or self._closed:
            return error
        if not isinstance(error, (ServerDied, ServerClosed)):
            return error
        if self._replaced(uri, conn):
            return ContentModified(
                "request", -32801, f"{uri} changed: its Lean file worker was replaced"
            )
        if not conn.heard:  # gone before it said anything: it could not start
            return self._not_started(error, conn.stderr_tail(), conn.returncode)
        return self._worker_gone(uri, error, conn)

    async def _run_worker(self, uri: str, *, task_status: TaskStatus[_Worker]) -> None:
        assert self._worker_argv is not None
        async with LspTransport.spawn(
            self._worker_argv,
            cwd=self.command.cwd,
            env=self.command.env,
            # Looked up per message, not bound at spawn: one handler for every worker, old
            # and new (and a test's spy on the client sees them all).
            on_notification=lambda method, params: self._on_notification(method, params),
            shutdown_timeout=self.timeouts.shutdown,
            write_timeout=self.timeouts.request,
            polite=False,
        ) as transport:
            worker = _Worker(transport)
            task_status.started(worker)
            await worker.stop.wait()

    async def _start_worker(self, doc: _Document, dependency_build_mode: str = "never") -> None:
        """A new worker for ``doc`` (its text and version now), the old one stopped. The
        worker is the document's only once it has been sent ``initialize`` and ``didOpen``:
        interrupted before (cancelled, or it could not start), it is stopped, and the document
        has none (the next change starts one).

        Callers settle first (``_settled``) and then apply their change and call this with no
        wait between: so a start never overlaps another of the same document, and whatever
        comes for the document meanwhile waits for it and is about this text or a later
        one."""
        if self._tg is None:
            raise ServerClosed("the Lean client is closed")
        uri = doc.uri
        text_document = {"uri": uri, "languageId": "lean4", "version": doc.version,
                         "text": doc.text}  # fmt: skip
        header, header_read_to = header_region(doc.text)
        assert uri not in self._starting, "a start overlapped another (callers settle first)"
        started = self._starting[uri] = anyio.Event()
        worker: _Worker | None = None
        try:
            self._stop_worker(uri)
            worker = await self._tg.start(self._run_worker, uri)
            await worker.transport.post(
                [
                    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": self._init_params},
                    {"jsonrpc": "2.0", "method": "textDocument/didOpen",
                     "params": {"textDocument": text_document,
                                "dependencyBuildMode": dependency_build_mode}},
                ]
            )  # fmt: skip
        except ServerError as exc:
            error = await self._start_failed(exc, worker)  # (before stopping: its exit says why)
            if worker is not None:
                worker.stop.set()
            raise error from exc
        except BaseException:
            if worker is not None:
                worker.stop.set()
            raise
        finally:
            started.set()
            del self._starting[uri]
        if self._docs.get(uri) is not doc:  # closed meanwhile: the worker serves nothing
            worker.stop.set()
            return
        worker.header, worker.header_read_to = header, header_read_to
        self._workers[uri] = worker

    async def _settled(self, uri: str, timeout: float, method: str) -> None:
        """Wait (at most ``timeout`` s) until no worker start for ``uri`` is under way; still
        starting then: ``RequestTimeout`` for ``method`` (the worker is not known to be bad)."""
        deadline = anyio.current_time() + timeout
        # (None at once: no checkpoint, the caller's next steps run without a wait between.
        # Woken, another waiter may have begun the next start: wait for that one too.)
        while (starting := self._starting.get(uri)) is not None:
            with anyio.move_on_at(deadline):
                await starting.wait()
            if anyio.current_time() >= deadline and uri in self._starting:
                raise RequestTimeout(method, timeout)

    async def _start_failed(self, exc: ServerError, worker: _Worker | None) -> ServerStartFailed:
        """A worker that could not start, or died before it read its document: why, from its
        exit code and stderr (waited for, within the shutdown deadline)."""
        cause: ServerError = exc
        if worker is not None:
            with anyio.move_on_after(self.timeouts.shutdown):
                await worker.transport.exited.wait()
            cause = worker.transport.failure or exc
        return self._not_started(cause, cause.stderr_tail, cause.returncode)

    def _not_started(
        self, cause: LeanrigError, stderr_tail: str, returncode: int | None
    ) -> ServerStartFailed:
        """A file worker that could not start: why, its stderr and exit code."""
        return ServerStartFailed(
            f"Lean file worker {self.command.program} did not start: {cause.message}",
            stderr_tail=stderr_tail,
            returncode=returncode,
        )

    def _needs_worker(self, doc: _Document, unchanged: int = 0) -> bool:
        """With direct workers: must ``doc``'s (already updated) text go to a new worker — its
        worker is gone, or the change touched the header? ``unchanged``: the change kept the
        text before this offset (a proof step's change begins far after the header: no parse
        of the header on every step)."""
        if self._worker_argv is None:
            return False
        worker = self._workers.get(doc.uri)
        if worker is None or not worker.transport.alive:
            return True
        if unchanged >= worker.header_read_to:
            return False
        header, worker.header_read_to = header_region(doc.text)
        return header != worker.header

    def _initialize_params(self) -> dict[str, Any]:
        params = lsp.InitializeParams(
            process_id=os.getpid(),
            root_uri=path_to_uri(self.command.cwd),
            capabilities=lsp.ClientCapabilities(
                text_document=lsp.TextDocumentClientCapabilities(
                    publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(
                        version_support=True
                    ),
                    document_symbol=lsp.DocumentSymbolClientCapabilities(
                        hierarchical_document_symbol_support=True
                    ),
                    hover=lsp.HoverClientCapabilities(
                        content_format=[lsp.MarkupKind.Markdown, lsp.MarkupKind.PlainText]
                    ),
                ),
            ),
        )
        raw: dict[str, Any] = _converter.unstructure(params)
        raw["capabilities"]["lean"] = {
            "silentDiagnosticSupport": True,
            "incrementalDiagnosticSupport": self.command.incremental_diagnostics,
        }
        raw["initializationOptions"] = {
            "editDelay": self.command.edit_delay_ms,
            "hasWidgets": False,
        }
        return raw

    async def _initialize(self) -> None:
        raw = self._initialize_params()
        try:
            result = await self.transport.request("initialize", raw, timeout=self.timeouts.spawn)
            await self.transport.notify("initialized", {})
        except Exception as exc:
            failure = ServerStartFailed(
                f"Lean server {self.command.program} did not initialize: {exc}",
                stderr_tail=self.transport.stderr_tail(),
                returncode=self.transport.returncode,
            )
            raise failure from exc
        self.server_info = dict(result.get("serverInfo") or {}) if isinstance(result, dict) else {}

    # -- notifications (called synchronously by the transport's reader) ----------------------

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "textDocument/publishDiagnostics":
            self._on_diagnostics(params)
        elif method == "$/lean/fileProgress":
            # Hot path (~10 per edit): look only at what we need; parse fully on demand.
            text_doc = params.get("textDocument") or {}
            doc = self._docs.get(text_doc.get("uri", ""))
            version = text_doc.get("version")
            if doc is not None and (version is None or version == doc.version):
                doc.progress = params
                processing = params.get("processing")
                if processing:
                    if any(p.get("kind") == 2 for p in processing):
                        self._on_fatal_progress(doc)
                elif version == doc.early_version and doc.final_version < version:
                    # Done: Lean's reporter publishes a version's diagnostics as it goes if
                    # it ever waited for elaboration (then they are all out by now), else once,
                    # right after this (lsp_bridge/README.md, "the early barrier").
                    if doc.diag_version == version:
                        doc.final_version = version
                    else:
                        doc.final_after_next = version

    def _on_diagnostics(self, params: dict[str, Any]) -> None:
        doc = self._docs.get(params.get("uri", ""))
        if doc is None:
            return
        version = params.get("version")
        if not isinstance(version, int):
            version = doc.version
        if version < doc.diag_version:
            return  # late report of an outdated version
        new = [LeanDiagnostic.from_json(d) for d in params.get("diagnostics", ())]
        if params.get("isIncremental") and version == doc.diag_version:
            doc.diagnostics.extend(new)
        else:
            doc.diagnostics = new
            doc.diag_version = version
        if version == doc.early_version:
            if version == doc.final_version:
                self._early_barrier_wrong(doc, version)
            elif version == doc.final_after_next:
                doc.final_version = version

    # -- documents ---------------------------------------------------------------------------

    def text(self, uri: str) -> str:
        return self._doc(uri).text

    def version(self, uri: str) -> int:
        return self._doc(uri).version

    def is_open(self, uri: str) -> bool:
        return uri in self._docs

    def _doc(self, uri: str) -> _Document:
        try:
            return self._docs[uri]
        except KeyError:
            raise DocumentError(f"document {uri} is not open", path=uri) from None

    async def open(self, uri: str, text: str, *, dependency_build_mode: str = "never") -> int:
        """Open a document (its text need not exist on disk); returns its version (1)."""
        await self._settled(uri, self.timeouts.spawn, "textDocument/didOpen")  # (closed, now)
        if uri in self._docs:
            raise DocumentError(f"document {uri} is already open", path=uri)
        doc = _Document(uri, text, 1)
        self._docs[uri] = doc
        if self._worker_argv is not None:
            try:
                await self._start_worker(doc, dependency_build_mode)
            except BaseException:
                self._docs.pop(uri, None)
                self._stop_worker(uri)
                raise
            return 1
        params = {
            "textDocument": {"uri": uri, "languageId": "lean4", "version": 1, "text": text},
            "dependencyBuildMode": dependency_build_mode,
        }
        try:
            await self.transport.notify("textDocument/didOpen", params)
        except BaseException:
            self._docs.pop(uri, None)
            raise
        return 1

    async def open_file(self, path: Path) -> tuple[str, int]:
        """Open a file from disk; typed errors for a missing file or non-UTF-8 bytes."""
        try:
            data = await anyio.Path(path).read_bytes()
        except FileNotFoundError:
            raise DocumentError(f"no such file: {path}", path=str(path)) from None
        except OSError as exc:
            raise DocumentError(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(
                f"{path} is not UTF-8 (byte {exc.start}); Lean source files must be UTF-8",
                path=str(path),
            ) from exc
        uri = path_to_uri(path)
        return uri, await self.open(uri, text)

    async def change(self, uri: str, text: str) -> int:
        """Replace the document's text; sends the minimal range edit. Returns the new version."""
        # (The edit is computed against the text left by a worker start under way.)
        await self._settled(uri, self.timeouts.spawn, "textDocument/didChange")
        doc = self._doc(uri)
        return await self.edit(uri, [minimal_edit(doc.text, text)])

    async def edit(self, uri: str, edits: Sequence[TextEdit]) -> int:
        """Apply code point range edits in order (each against the text left by the previous)."""
        await self._settled(uri, self.timeouts.spawn, "textDocument/didChange")
        doc = self._doc(uri)
        params = self._change_params(doc, edits)
        version = doc.version
        conn: LspTransport | None = None
        try:
            if self._needs_worker(doc, min((e.start for e in edits), default=0)):
                await self._start_worker(doc)
            else:
                conn = self._conn(uri)
                await conn.notify("textDocument/didChange", params)
        except ServerError as exc:
            doc.resync = True
            error = self._worker_error(uri, exc, conn) if conn is not None else exc
            if error is exc:
                raise
            raise error from exc
        except BaseException:
            doc.resync = True  # the change may not have reached Lean
            raise
        return version

    def _change_params(self, doc: _Document, edits: Sequence[TextEdit]) -> dict[str, Any]:
        """The didChange parameters for ``edits``; the document's state moves to the new
        version (the caller sends them at once)."""
        uri = doc.uri
        changes: list[dict[str, Any]] = []
        text = doc.text
        for e in edits:
            changes.append(
                {
                    "range": {
                        "start": lsp_position(text, e.start).to_json(),
                        "end": lsp_position(text, e.end).to_json(),
                    },
                    "text": e.text,
                }
            )
            text = apply_edit(text, e)
        if doc.resync:
            # A previous change may never have reached Lean (its write was cancelled or
            # failed), so range edits could apply to a text Lean does not have: send the
            # whole text once (Lean still re-elaborates only from the first changed command).
            changes = [{"text": text}]
            doc.resync = False
        doc.version += 1
        doc.text = text
        doc.progress = None
        if doc.fatal.is_set():
            doc.fatal = anyio.Event()  # this change restarts the worker
        return {
            "textDocument": {"uri": uri, "version": doc.version},
            "contentChanges": changes,
        }

    async def close_document(self, uri: str) -> None:
        doc = self._docs.pop(uri, None)
        self._rpc_sessions.pop(uri, None)
        if self._worker_argv is not None:
            self._stop_worker(uri)  # a worker serves one document: closing it is the end
        elif doc is not None and self.alive:
            await self.transport.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def _stop_worker(self, uri: str) -> None:
        worker = self._workers.pop(uri, None)
        if worker is not None:
            worker.stop.set()

    async def wait_for(
        self, uri: str, version: int | None = None, *, timeout: float | None = None
    ) -> DocumentReport:
        """Barrier: return when ``version`` (default: the current one) is fully elaborated.

        Diagnostics are exactly those of the reported version. If newer versions were sent in the
        meantime, waits for the newest and says so (``status="superseded"``). Never returns a
        report for a version that did not finish: on timeout it raises ``RequestTimeout``.
        """
        doc = self._doc(uri)
        requested = doc.version if version is None else version
        if requested > doc.version or requested < 1:
            raise DocumentError(f"version {requested} of {uri} was never sent", path=uri)
        deadline = time.monotonic() + (self.timeouts.barrier if timeout is None else timeout)
        started = time.perf_counter()
        target = requested
        while True:
            remaining = deadline - time.monotonic()
            if not doc.fatal.is_set():
                await self._doc_request(
                    doc,
                    "textDocument/waitForDiagnostics",
                    {"uri": uri, "version": target},
                    max(remaining, 0.001),
                )
            doc = self._doc(uri)
            if doc.version == target:
                break
            target = doc.version  # superseded while we waited: the newest is what counts
        return self._report(doc, requested, target, started)

    def _report(
        self, doc: _Document, requested: int, target: int, started: float
    ) -> DocumentReport:
        """The report of version ``target`` (fully elaborated) when ``requested`` was asked."""
        uri = doc.uri
        status: ReportStatus = "done" if target == requested else "superseded"
        diagnostics = tuple(doc.diagnostics) if doc.diag_version == target else ()
        if doc.fatal_version == target:
            status = "fatal"
            if not any(d.is_error for d in diagnostics):
                self._mark_fatal(doc)  # a crash: its other requests end, later ones are refused
                raise WorkerCrashed(
                    "textDocument/waitForDiagnostics",
                    -32902,
                    f"the Lean worker for {uri} stopped without reporting an error (crash)",
                )
        return DocumentReport(
            uri=uri,
            version=target,
            requested_version=requested,
            status=status,
            diagnostics=diagnostics,
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )

    async def update(
        self,
        uri: str,
        text: str,
        queries: Sequence[DocQuery] = (),
        *,
        timeout: float | None = None,
    ) -> tuple[DocumentReport, list[Any]]:
        """Make ``text`` the content of document ``uri`` (opened if it is not open) and wait
        until that version is fully elaborated, asking ``queries`` about the same version:
        the change, the barrier and the queries go to Lean in one write (see
        ``LspTransport.exchange``), so the queries cost no round trip of their own;
        ``unless_clean`` ones are waited for only if the version has an error or warning
        (asked again after the barrier for a version that did not finish). Returns the report
        (as ``wait_for``) and each query's parsed answer, in order (None: an
        ``unless_clean`` query about a clean version); a failed query raises its error (after
        the barrier's own errors)."""
        deadline = time.monotonic() + (self.timeouts.barrier if timeout is None else timeout)
        started = time.perf_counter()
        changes: list[tuple[str, Any]] = []

        def remaining() -> float:
            return max(deadline - time.monotonic(), 0.001)

        if uri not in self._docs:
            await self.open(uri, text)  # the first version: rare, its own write
            doc, version = self._doc(uri), 1
        else:
            await self._settled(uri, remaining(), "textDocument/didChange")
            doc = self._doc(uri)
            edit = minimal_edit(doc.text, text)
            params = self._change_params(doc, [edit])
            # This call's version: a change made while a worker starts (below) is a later one,
            # and a barrier for a version not yet sent is never answered.
            version = doc.version
            if self._needs_worker(doc, edit.start):
                await self._start_worker(doc)  # the change goes as the new worker's didOpen
            else:
                changes.append(("textDocument/didChange", params))
        now = [q for q in queries if not q.unless_clean]
        later = [q for q in queries if q.unless_clean]

        def on_error(error: LeanrigError) -> None:
            if isinstance(error, (WorkerCrashed, WorkerExited)):
                self._mark_fatal(doc)  # ends this document's other requests at once

        def has_problem() -> bool:
            # Asked once the barrier is in: the version's diagnostics are all published.
            return doc.diag_version == version and any(d.is_problem for d in doc.diagnostics)

        conditional = Conditional(self._requests(uri, later), has_problem) if later else None
        early: Callable[[], bool] | None = None
        if changes and self._worker_argv is not None and self._early_barrier_on():
            doc.early_version = version

            def early() -> bool:
                return doc.final_version == version

        conn = self._conn(uri)
        try:
            answers = await conn.exchange(
                changes,
                [("textDocument/waitForDiagnostics", {"uri": uri, "version": version}, None),
                 *self._requests(uri, now)],
                timeout=remaining(),
                tag=uri,
                on_error=on_error,
                conditional=conditional,
                early=early,
            )  # fmt: skip
        except ServerError as exc:
            if changes:
                doc.resync = True
            error = self._worker_error(uri, exc, conn)
            if error is exc:
                raise
            if isinstance(error, WorkerCrashed):
                self._mark_fatal(doc)
            raise error from exc
        except BaseException:
            if changes:
                doc.resync = True  # the change may not have reached Lean
            raise
        if self._worker_argv is not None:
            answers = [
                self._worker_error(uri, a, conn) if isinstance(a, LeanrigError) else a
                for a in answers
            ]
            if any(isinstance(a, WorkerCrashed) for a in answers):
                self._mark_fatal(doc)
        barrier = answers[0]
        if early is not None and barrier is None:
            self.early_barrier_ends += 1
        if isinstance(barrier, ContentModified) and self._doc(uri).version != version:
            barrier = None  # superseded (its worker replaced): reported below as wait_for does
        if isinstance(barrier, LeanrigError) and not isinstance(barrier, ElaborationFailed):
            raise barrier  # an ElaborationFailed barrier: the report says fatal (as wait_for)
        now_answers = iter(answers[1 : 1 + len(now)])
        later_answers = iter(answers[1 + len(now) :])
        answered = [next(later_answers) if q.unless_clean else next(now_answers) for q in queries]
        if self._doc(uri).version != version:
            # Someone changed the document meanwhile: report as wait_for does, and ask again.
            report = await self.wait_for(uri, version, timeout=remaining())
            answered = [
                None
                if q.unless_clean and report.clean
                else await self._ask_again(uri, q, remaining())
                for q in queries
            ]
        else:
            report = self._report(doc, version, version, started)
            if conditional is not None:
                if report.clean:
                    # Not needed (waited for on a first error that a later report of the
                    # version dropped, they would explain nothing the report shows).
                    answered = [
                        None if q.unless_clean else a
                        for q, a in zip(queries, answered, strict=True)
                    ]
                elif not conditional.waited:
                    # Not waited for (the version did not finish, so no problem was reported
                    # before the barrier): asked now, a round trip of their own.
                    answered = [
                        await self._ask_again(uri, q, remaining()) if q.unless_clean else a
                        for q, a in zip(queries, answered, strict=True)
                    ]
        for query, result in zip(queries, answered, strict=True):
            if isinstance(result, LeanrigError) and not query.optional:
                raise result
        return report, answered  # parsed as they arrived (LspTransport.exchange)

    @staticmethod
    def _requests(
        uri: str, queries: Sequence[DocQuery]
    ) -> list[tuple[str, Any, Callable[[Any], Any] | None]]:
        return [(q.method, _query_params(uri, q), q.parse) for q in queries]

    async def _ask_again(self, uri: str, query: DocQuery, timeout: float) -> Any:
        """``query`` alone, about the current version: parsed, or its error if optional."""
        try:
            raw = await self._query(self._doc(uri), query, timeout)
        except LeanrigError as exc:
            if query.optional:
                return exc
            raise
        try:
            return query.parse(raw)
        except Exception as exc:
            error = unreadable_answer(query.method, exc)
            if query.optional:
                return error
            raise error from exc

    async def _query(self, doc: _Document, query: DocQuery, timeout: float) -> Any:
        return await self._doc_request(doc, query.method, _query_params(doc.uri, query), timeout)

    async def _doc_request(self, doc: _Document, method: str, params: Any, timeout: float) -> Any:
        """A request about one document that also ends if the document's worker dies.

        Lean's watchdog queues requests for a crashed worker until the next change; without
        ending them on the fatal report they would wait for their whole deadline.
        """
        if doc.fatal.is_set():
            raise self._fatal_error(doc, method)
        await self._settled(doc.uri, timeout, method)
        try:
            conn = self._conn(doc.uri)
            try:
                return await conn.request(method, params, timeout=timeout, tag=doc.uri)
            except ServerError as exc:
                error = self._worker_error(doc.uri, exc, conn)
                if error is exc:
                    raise
                if isinstance(error, ContentModified) and method == (
                    "textDocument/waitForDiagnostics"
                ):
                    return None  # superseded: wait_for goes on with the newest version
                raise error from exc
        except (WorkerCrashed, WorkerExited):
            self._mark_fatal(doc)
            raise
        except ElaborationFailed:
            if method == "textDocument/waitForDiagnostics":
                return None  # wait_for reports the fatal version itself
            raise

    def _on_fatal_progress(self, doc: _Document) -> None:
        """Lean reported that processing of the current version stopped for good. A worker
        that is alive (a header that does not elaborate: a missing import) still publishes
        the version's error and answers what is asked, after this report; one that crashed
        is reported so by the watchdog, which then holds the document's requests until its
        next change. So the version is fatal at once (``_report``), and only through the
        watchdog, after ``FATAL_GRACE_SECONDS``, are its requests still unanswered ended and
        later ones refused (``_mark_fatal``). A direct worker answers a fatal version's
        queries; a dead one ends its requests as it exits. (Ended at once, a missing import
        was reported as a crash: its error had not arrived yet.)"""
        doc.fatal_version = doc.version
        if self._worker_argv is None and self._tg is not None:
            self._tg.start_soon(self._fatal_after_grace, doc, doc.version)

    async def _fatal_after_grace(self, doc: _Document, version: int) -> None:
        await anyio.sleep(FATAL_GRACE_SECONDS)
        if self._docs.get(doc.uri) is doc and doc.version == version:
            self._mark_fatal(doc)

    def _early_barrier_on(self) -> bool:
        return self.command.early_barrier and self.early_barrier_faults == 0

    def _early_barrier_wrong(self, doc: _Document, version: int) -> None:
        """Diagnostics of ``version`` came after the early barrier had ended its step: that
        step reported too few. Steps wait for Lean's own barrier from now on."""
        self.early_barrier_faults += 1
        if self.early_barrier_faults == 1:
            log.warning(
                "lsp.early_barrier_off",
                uri=doc.uri,
                version=version,
                detail="diagnostics came after the version was reported done; "
                "steps wait for Lean's barrier from now on",
            )

    def _mark_fatal(self, doc: _Document) -> None:
        doc.fatal_version = doc.version
        if not doc.fatal.is_set():
            doc.fatal.set()
            worker = self._workers.get(doc.uri)
            transport = worker.transport if worker is not None else self._transport
            if transport is not None:
                transport.fail_tagged(doc.uri, self._fatal_error(doc, "request"))

    @staticmethod
    def _fatal_error(doc: _Document, method: str) -> ElaborationFailed:
        return ElaborationFailed(
            f"{method}: processing of {doc.uri} stopped (worker crash or fatal error)",
            hint="send a change to the document to restart its worker",
        )

    def progress(self, uri: str) -> FileProgress | None:
        """The latest ``$/lean/fileProgress`` of the current version, if any."""
        raw = self._doc(uri).progress
        return FileProgress.from_json(raw) if raw is not None else None

    def current_diagnostics(self, uri: str) -> tuple[int, tuple[LeanDiagnostic, ...]]:
        """What has been reported so far (possibly partial): (version, diagnostics)."""
        doc = self._doc(uri)
        return doc.diag_version, tuple(doc.diagnostics)

    # -- queries -----------------------------------------------------------------------------

    async def _position_request(
        self, uri: str, pos: LspPos, method: str, timeout: float | None
    ) -> Any:
        params = {"textDocument": {"uri": uri}, "position": pos.to_json()}
        return await self._doc_request(self._doc(uri), method, params, self._t(timeout))

    async def plain_goal(self, uri: str, pos: LspPos, *, timeout: float | None = None) -> PlainGoal:
        result = await self._position_request(uri, pos, "$/lean/plainGoal", timeout)
        return PlainGoal.from_json(result)

    async def plain_term_goal(
        self, uri: str, pos: LspPos, *, timeout: float | None = None
    ) -> PlainTermGoal:
        result = await self._position_request(uri, pos, "$/lean/plainTermGoal", timeout)
        return PlainTermGoal.from_json(result)

    async def hover(
        self, uri: str, pos: LspPos, *, timeout: float | None = None
    ) -> lsp.Hover | None:
        result = await self._position_request(uri, pos, "textDocument/hover", timeout)
        return None if result is None else _converter.structure(result, lsp.Hover)

    async def document_symbols(
        self, uri: str, *, timeout: float | None = None
    ) -> list[lsp.DocumentSymbol]:
        result = await self._doc_request(
            self._doc(uri),
            "textDocument/documentSymbol",
            {"textDocument": {"uri": uri}},
            self._t(timeout),
        )
        return parse_symbols(result)

    async def interactive_goals(
        self, uri: str, pos: LspPos, *, timeout: float | None = None
    ) -> list[InteractiveGoal]:
        """Structured goals via RPC ``Lean.Widget.getInteractiveGoals`` (references released)."""
        params = {"textDocument": {"uri": uri}, "position": pos.to_json()}
        result = await self.rpc_call(
            uri, pos, "Lean.Widget.getInteractiveGoals", params, timeout=timeout
        )
        if not result:
            return []
        goals = [InteractiveGoal.from_json(g) for g in result.get("goals", ())]
        refs = collect_rpc_refs(result)
        session = self._rpc_sessions.get(uri)
        if refs and session is not None:
            try:
                await self._conn(uri).notify(
                    "$/lean/rpc/release", {"uri": uri, "sessionId": session, "refs": refs}
                )
            except (WorkerCrashed, ServerDied, ServerClosed):
                if self._worker_argv is None:
                    raise
                # The worker went after answering: nothing left to release; the goals stand.
        return goals

    async def rpc_connect(self, uri: str) -> str:
        result = await self._doc_request(
            self._doc(uri), "$/lean/rpc/connect", {"uri": uri}, self.timeouts.request
        )
        session = str(result["sessionId"])
        first = not self._rpc_sessions
        self._rpc_sessions[uri] = session
        if first and self._tg is not None:
            self._tg.start_soon(self._keepalive_loop)
        return session

    async def rpc_call(
        self, uri: str, pos: LspPos, method: str, params: Any, *, timeout: float | None = None
    ) -> Any:
        """Call a Lean RPC method; reconnects once if the session was dropped (worker restart)."""
        for attempt in (1, 2):
            session = self._rpc_sessions.get(uri) or await self.rpc_connect(uri)
            try:
                return await self._doc_request(
                    self._doc(uri),
                    "$/lean/rpc/call",
                    {
                        "textDocument": {"uri": uri},
                        "position": pos.to_json(),
                        "sessionId": session,
                        "method": method,
                        "params": params,
                    },
                    self._t(timeout),
                )
            except RpcNeedsReconnect:
                self._rpc_sessions.pop(uri, None)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _keepalive_loop(self) -> None:
        while self.alive:
            await anyio.sleep(RPC_KEEPALIVE_SECONDS)
            for uri, session in list(self._rpc_sessions.items()):
                try:
                    await self._conn(uri).notify(
                        "$/lean/rpc/keepAlive", {"uri": uri, "sessionId": session}
                    )
                except Exception:
                    if self._worker_argv is None:
                        return  # the server is gone

    def _t(self, timeout: float | None) -> float:
        return self.timeouts.request if timeout is None else timeout
