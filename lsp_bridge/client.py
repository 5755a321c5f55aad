"""An async client for Lean's language server: documents, the elaboration barrier, goals, RPC.

Reaches Lean through its watchdog or straight to one ``lean --worker`` per document (one API);
a change goes out with its barrier and queries in one write (``exchange_change``).
Must not own pools, sessions or policy: callers decide what to open and when to give up."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskGroup
from lsprotocol import types as lsp

from .channels import DocumentChannels, WatchdogServer, initialize_params
from .doc_queries import DocQuery, framed_requests, parse_hover, parse_symbols
from .doc_requests import ask_alone, doc_request, fatal_progress, mark_fatal
from .errors import (
    ContentModified,
    DocumentError,
    ElaborationFailed,
    LeanrigError,
    ServerClosed,
    ServerError,
    WorkerCrashed,
    WorkerExited,
)
from .exception_groups import single_errors
from .file_workers import FileWorkers
from .lean_rpc import RpcSessions
from .lean_types import (
    DocumentReport,
    FileProgress,
    InteractiveGoal,
    LeanDiagnostic,
    PlainGoal,
    PlainTermGoal,
)
from .open_document import OpenDocument, find_document
from .pending_requests import Conditional
from .positions import LspPos
from .server_command import ServerCommand
from .text_edits import TextEdit, minimal_edit
from .timeouts import DEFAULT_TIMEOUTS, Timeouts
from .transport import LspTransport

log = structlog.get_logger("leanrig.lsp")


class EarlyBarrier:
    """Whether a step may end once its version's last diagnostics are known to be published.

    ``ends``: steps ended before Lean's answer; ``faults``: rule broken (off from the first one)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.ends = 0
        self.faults = 0

    @property
    def on(self) -> bool:
        return self.enabled and self.faults == 0

    def broken(self, doc: OpenDocument) -> None:
        """Diagnostics came after ``doc``'s early step ended: use Lean's barrier from now on."""
        self.faults += 1
        if self.faults == 1:
            log.warning(
                "lsp.early_barrier_off",
                uri=doc.uri,
                version=doc.early_version,
                detail="diagnostics came after the version was reported done; "
                "steps wait for Lean's barrier from now on",
            )


async def exchange_change(
    doc: OpenDocument,
    version: int,
    changes: list[tuple[str, Any]],
    now: list[DocQuery],
    later: list[DocQuery],
    channels: DocumentChannels,
    early_barrier: EarlyBarrier,
    remaining: Callable[[], float],
) -> tuple[list[Any], bool]:
    """Send ``changes``, the barrier for ``version``, ``now`` and (conditionally) ``later``.

    Returns the answers in that order (errors in place; None for a barrier ended early) and
    whether ``later`` was waited for."""
    uri = doc.uri

    def on_error(error: LeanrigError) -> None:
        if isinstance(error, (WorkerCrashed, WorkerExited)):
            mark_fatal(doc, channels)

    def has_problem() -> bool:
        # Asked once the barrier is in: all the version's diagnostics are published.
        return doc.diag_version == version and any(d.is_problem for d in doc.diagnostics)

    conditional = Conditional(framed_requests(uri, later), has_problem) if later else None
    early: Callable[[], bool] | None = None
    if changes and channels.direct and early_barrier.on:
        doc.early_version = version

        def early() -> bool:
            return doc.final_version == version

    conn = channels.conn(uri)
    try:
        answers = await conn.exchange(
            changes,
            [
                ("textDocument/waitForDiagnostics", {"uri": uri, "version": version}, None),
                *framed_requests(uri, now),
            ],
            timeout=remaining(),
            tag=uri,
            on_error=on_error,
            conditional=conditional,
            early=early,
        )
    except ServerError as exc:
        if changes:
            doc.resync = True
        error = channels.error(uri, exc, conn)
        if error is exc:
            raise
        if isinstance(error, WorkerCrashed):
            mark_fatal(doc, channels)
        raise error from exc
    except BaseException:
        if changes:
            doc.resync = True
        raise
    if channels.direct:
        answers = [
            channels.error(uri, a, conn) if isinstance(a, LeanrigError) else a for a in answers
        ]
        if any(isinstance(a, WorkerCrashed) for a in answers):
            mark_fatal(doc, channels)
    if early is not None and answers[0] is None:
        early_barrier.ends += 1
    return answers, conditional is not None and conditional.waited


def path_to_uri(path: Path) -> str:
    return path.absolute().as_uri()


class LeanClient:
    """A Lean language server with its documents. Create with ``LeanClient.start(command)``."""

    def __init__(self, command: ServerCommand, timeouts: Timeouts) -> None:
        self.command = command
        self.timeouts = timeouts
        self._docs: dict[str, OpenDocument] = {}
        self._channels: DocumentChannels | None = None
        self._transport: LspTransport | None = None  # the watchdog's (None: direct workers)
        self._workers: FileWorkers | None = None  # direct file workers (None: the watchdog)
        self._rpc: RpcSessions | None = None
        self._tg: TaskGroup | None = None
        self.server_info: dict[str, Any] = {}
        self._early = EarlyBarrier(command.early_barrier)

    @classmethod
    @asynccontextmanager
    async def start(
        cls, command: ServerCommand, *, timeouts: Timeouts = DEFAULT_TIMEOUTS
    ) -> AsyncIterator[LeanClient]:
        client = cls(command, timeouts)
        params = initialize_params(command, path_to_uri(command.cwd))
        worker_argv = command.worker_argv() if command.direct_workers else None
        channels: AbstractAsyncContextManager[FileWorkers | WatchdogServer]
        if worker_argv is not None:
            # Looked up per message, not bound at spawn: one handler for every worker, old and new.
            channels = FileWorkers.start(
                worker_argv,
                command,
                timeouts,
                params,
                lambda method, p: client._on_notification(method, p),
            )
        else:
            channels = WatchdogServer.start(command, timeouts, params, client._on_notification)
        with single_errors():
            async with channels as lean, anyio.create_task_group() as tg:
                client._started(lean, tg)
                try:
                    yield client
                finally:
                    client._tg = None  # Lean's last words must not start tasks in it
                    tg.cancel_scope.cancel()

    def _started(self, channels: FileWorkers | WatchdogServer, tg: TaskGroup) -> None:
        self._channels = channels
        if isinstance(channels, FileWorkers):
            self._workers = channels
        else:
            self._transport, self.server_info = channels.transport, channels.info
        self._rpc = RpcSessions(self._docs, channels, self.timeouts, self._start_soon)
        self._tg = tg

    def _start_soon(self, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if self._tg is not None:
            self._tg.start_soon(loop)

    @property
    def transport(self) -> LspTransport:
        assert self._transport is not None, "client not started"
        return self._transport

    @property
    def pid(self) -> int:
        """The server's process id (with direct workers: the oldest live worker's)."""
        pids = self._lean.pids()
        if not pids:
            raise ServerClosed("no Lean file worker is running")
        return pids[0]

    @property
    def pids(self) -> tuple[int, ...]:
        """Every Lean process this client started (the server, or each document's worker)."""
        return self._channels.pids() if self._channels is not None else ()

    @property
    def direct(self) -> bool:
        return self._workers is not None

    @property
    def alive(self) -> bool:
        return self._channels is not None and self._channels.alive

    def kill(self) -> None:
        """Kill every Lean process of this client now (hung or over a cap)."""
        self._lean.kill()

    @property
    def _lean(self) -> DocumentChannels:
        assert self._channels is not None, "client not started"
        return self._channels

    @property
    def _rpc_sessions(self) -> RpcSessions:
        assert self._rpc is not None, "client not started"
        return self._rpc

    def _conn(self, uri: str) -> LspTransport:
        return self._lean.conn(uri)

    def _needs_worker(self, doc: OpenDocument, unchanged: int = 0) -> bool:
        return self._workers is not None and self._workers.needs_new(doc.uri, doc.text, unchanged)

    async def _start_worker(self, doc: OpenDocument, dependency_build_mode: str = "never") -> None:
        assert self._workers is not None
        await self._workers.open(doc.uri, doc.text, doc.version, dependency_build_mode)
        if self._docs.get(doc.uri) is not doc:
            self._workers.stop(doc.uri)

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "textDocument/publishDiagnostics":
            doc = self._docs.get(params.get("uri", ""))
            if doc is not None and doc.diagnostics_reported(params):
                self._early.broken(doc)
        elif method == "$/lean/fileProgress":
            # Hot path: look only at what we need; parse fully on demand.
            text_doc = params.get("textDocument") or {}
            doc = self._docs.get(text_doc.get("uri", ""))
            if doc is not None and doc.progress_reported(params, text_doc.get("version")):
                fatal_progress(doc, self._docs, self._lean, self._start_soon)

    @property
    def early_barrier_ends(self) -> int:
        """Steps the early barrier ended before Lean's answer (``EarlyBarrier``)."""
        return self._early.ends

    @property
    def early_barrier_faults(self) -> int:
        """Versions reported after the early barrier ended their step (it is off after one)."""
        return self._early.faults

    def progress(self, uri: str) -> FileProgress | None:
        """The latest ``$/lean/fileProgress`` of the current version, if any."""
        raw = find_document(self._docs, uri).progress
        return FileProgress.from_json(raw) if raw is not None else None

    def current_diagnostics(self, uri: str) -> tuple[int, tuple[LeanDiagnostic, ...]]:
        """What has been reported so far (possibly partial): (version, diagnostics)."""
        doc = find_document(self._docs, uri)
        return doc.diag_version, tuple(doc.diagnostics)

    def text(self, uri: str) -> str:
        return find_document(self._docs, uri).text

    def version(self, uri: str) -> int:
        return find_document(self._docs, uri).version

    def is_open(self, uri: str) -> bool:
        return uri in self._docs

    async def open(self, uri: str, text: str, *, dependency_build_mode: str = "never") -> int:
        """Open a document (its text need not exist on disk); returns its version (1)."""
        await self._lean.settled(uri, self.timeouts.spawn, "textDocument/didOpen")
        if uri in self._docs:
            raise DocumentError(f"document {uri} is already open", path=uri)
        doc = OpenDocument(uri, text, 1)
        self._docs[uri] = doc
        if self._workers is not None:
            try:
                await self._start_worker(doc, dependency_build_mode)
            except BaseException:
                self._docs.pop(uri, None)
                self._workers.stop(uri)
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
        await self._lean.settled(uri, self.timeouts.spawn, "textDocument/didChange")
        doc = find_document(self._docs, uri)
        return await self.edit(uri, [minimal_edit(doc.text, text)])

    async def edit(self, uri: str, edits: Sequence[TextEdit]) -> int:
        """Apply code point range edits in order (each against the text left by the previous)."""
        lean = self._lean
        await lean.settled(uri, self.timeouts.spawn, "textDocument/didChange")
        doc = find_document(self._docs, uri)
        params = doc.change(edits)
        version = doc.version
        conn: LspTransport | None = None
        try:
            if self._needs_worker(doc, min((e.start for e in edits), default=0)):
                await self._start_worker(doc)
            else:
                conn = lean.conn(uri)
                await conn.notify("textDocument/didChange", params)
        except ServerError as exc:
            doc.resync = True
            error = lean.error(uri, exc, conn) if conn is not None else exc
            if error is exc:
                raise
            raise error from exc
        except BaseException:
            doc.resync = True
            raise
        return version

    async def close_document(self, uri: str) -> None:
        doc = self._docs.pop(uri, None)
        if self._rpc is not None:
            self._rpc.forget(uri)
        if self._workers is not None:
            self._workers.stop(uri)
        elif doc is not None and self.alive:
            await self.transport.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    async def wait_for(
        self, uri: str, version: int | None = None, *, timeout: float | None = None
    ) -> DocumentReport:
        """Barrier: return when ``version`` (default: the current one) is fully elaborated.

        Superseded: waits for the newest version instead. On timeout raises ``RequestTimeout``."""
        doc = find_document(self._docs, uri)
        requested = doc.version if version is None else version
        if requested > doc.version or requested < 1:
            raise DocumentError(f"version {requested} of {uri} was never sent", path=uri)
        deadline = time.monotonic() + (self.timeouts.barrier if timeout is None else timeout)
        started = time.perf_counter()
        target = requested
        while True:
            remaining = deadline - time.monotonic()
            if not doc.fatal.is_set():
                await doc_request(
                    doc,
                    self._lean,
                    "textDocument/waitForDiagnostics",
                    {"uri": uri, "version": target},
                    max(remaining, 0.001),
                )
            doc = find_document(self._docs, uri)
            if doc.version == target:
                break
            target = doc.version
        return self._report(doc, requested, target, started)

    def _report(
        self, doc: OpenDocument, requested: int, target: int, started: float
    ) -> DocumentReport:
        """The report of finished version ``target``; raises ``WorkerCrashed`` on a crash."""
        if doc.crashed(target):
            mark_fatal(doc, self._lean)
            raise WorkerCrashed(
                "textDocument/waitForDiagnostics",
                -32902,
                f"the Lean worker for {doc.uri} stopped without reporting an error (crash)",
            )
        return doc.report(requested, target, started)

    async def update(
        self,
        uri: str,
        text: str,
        queries: Sequence[DocQuery] = (),
        *,
        timeout: float | None = None,
    ) -> tuple[DocumentReport, list[Any]]:
        """Set ``uri``'s text (opening it if needed), wait for that version and ask ``queries``.

        All in one write. Returns the report (as ``wait_for``) and the answers in order (None:
        ``unless_clean`` about a clean version); a failed non-optional query raises its error."""
        deadline = time.monotonic() + (self.timeouts.barrier if timeout is None else timeout)
        started = time.perf_counter()

        def remaining() -> float:
            return max(deadline - time.monotonic(), 0.001)

        if uri not in self._docs:
            await self.open(uri, text)
            doc, version = find_document(self._docs, uri), 1
            changes: list[tuple[str, Any]] = []
        else:
            doc, version, changes = await self._changed(uri, text, remaining())
        now = [q for q in queries if not q.unless_clean]
        later = [q for q in queries if q.unless_clean]
        answers, waited = await exchange_change(
            doc, version, changes, now, later, self._lean, self._early, remaining
        )
        barrier = answers[0]
        if isinstance(barrier, ContentModified) and self.version(uri) != version:
            barrier = None
        if isinstance(barrier, LeanrigError) and not isinstance(barrier, ElaborationFailed):
            raise barrier
        now_answers, later_answers = iter(answers[1 : 1 + len(now)]), iter(answers[1 + len(now) :])
        answered = [next(later_answers) if q.unless_clean else next(now_answers) for q in queries]
        if self.version(uri) != version:
            # Changed meanwhile: report as wait_for does, and ask again.
            report = await self.wait_for(uri, version, timeout=remaining())
            answered = [
                None if q.unless_clean and report.clean else await self.ask(uri, q, remaining())
                for q in queries
            ]
        else:
            report = self._report(doc, version, version, started)
            if later and report.clean:
                # Waited for on an error a later report dropped: they explain nothing shown.
                answered = [
                    None if q.unless_clean else a for q, a in zip(queries, answered, strict=True)
                ]
            elif later and not waited:
                answered = [
                    await self.ask(uri, q, remaining()) if q.unless_clean else a
                    for q, a in zip(queries, answered, strict=True)
                ]
        for query, result in zip(queries, answered, strict=True):
            if isinstance(result, LeanrigError) and not query.optional:
                raise result
        return report, answered

    async def _changed(
        self, uri: str, text: str, timeout: float
    ) -> tuple[OpenDocument, int, list[tuple[str, Any]]]:
        """Make ``text`` the next version; return the document, version and didChange to send."""
        await self._lean.settled(uri, timeout, "textDocument/didChange")
        doc = find_document(self._docs, uri)
        edit = minimal_edit(doc.text, text)
        params = doc.change([edit])
        # Taken before the worker start: a change meanwhile is a later, not yet sent, version.
        version = doc.version
        if self._needs_worker(doc, edit.start):
            await self._start_worker(doc)
            return doc, version, []
        return doc, version, [("textDocument/didChange", params)]

    async def ask(self, uri: str, query: DocQuery, timeout: float) -> Any:
        return await ask_alone(self._docs, uri, self._lean, query, timeout)

    async def _request(self, uri: str, method: str, params: Any, timeout: float | None) -> Any:
        doc = find_document(self._docs, uri)
        return await doc_request(doc, self._lean, method, params, self._t(timeout))

    async def _at(self, uri: str, pos: LspPos, method: str, timeout: float | None) -> Any:
        params = {"textDocument": {"uri": uri}, "position": pos.to_json()}
        return await self._request(uri, method, params, timeout)

    async def plain_goal(self, uri: str, pos: LspPos, *, timeout: float | None = None) -> PlainGoal:
        return PlainGoal.from_json(await self._at(uri, pos, "$/lean/plainGoal", timeout))

    async def plain_term_goal(
        self, uri: str, pos: LspPos, *, timeout: float | None = None
    ) -> PlainTermGoal:
        return PlainTermGoal.from_json(await self._at(uri, pos, "$/lean/plainTermGoal", timeout))

    async def hover(
        self, uri: str, pos: LspPos, *, timeout: float | None = None
    ) -> lsp.Hover | None:
        return parse_hover(await self._at(uri, pos, "textDocument/hover", timeout))

    async def document_symbols(
        self, uri: str, *, timeout: float | None = None
    ) -> list[lsp.DocumentSymbol]:
        params = {"textDocument": {"uri": uri}}
        return parse_symbols(
            await self._request(uri, "textDocument/documentSymbol", params, timeout)
        )

    async def interactive_goals(
        self, uri: str, pos: LspPos, *, timeout: float | None = None
    ) -> list[InteractiveGoal]:
        """Structured goals via RPC ``Lean.Widget.getInteractiveGoals`` (references released)."""
        return await self._rpc_sessions.interactive_goals(uri, pos, self._t(timeout))

    async def rpc_connect(self, uri: str) -> str:
        return await self._rpc_sessions.connect(uri)

    async def rpc_call(
        self, uri: str, pos: LspPos, method: str, params: Any, *, timeout: float | None = None
    ) -> Any:
        """Call a Lean RPC method; reconnects once if the session was dropped."""
        return await self._rpc_sessions.call(uri, pos, method, params, self._t(timeout))

    def _t(self, timeout: float | None) -> float:
        return self.timeouts.request if timeout is None else timeout
