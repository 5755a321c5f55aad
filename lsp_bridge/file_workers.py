"""Direct file workers (``ServerCommand.direct_workers``): one ``lean --worker`` per open
document with no watchdog between, doing the little the watchdog does for a client that sends
no workspace requests.

Responsibilities (and nothing else): start a document's worker with ``initialize`` (which it
reads and never answers) and ``didOpen``; know when a document needs a new one (its worker is
gone, or a change altered the module header: a worker exits with code 2 then); route a
document's messages to its worker; say what a worker's death means as the watchdog would
(``WorkerCrashed``; ``ContentModified`` when a change replaced it; ``ServerStartFailed`` when
it never spoke); stop and kill workers.

Must not track documents' reports or decide when to start: the client starts a worker when it
opens a document or when ``needs_new`` says so (``open``), after ``settled``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from .errors import (
    ContentModified,
    LeanrigError,
    RequestTimeout,
    ServerClosed,
    ServerDied,
    ServerError,
    ServerStartFailed,
    WorkerCrashed,
)
from .header import parse_header
from .server_command import ServerCommand
from .timeouts import Timeouts
from .transport import LspTransport


def header_region(text: str) -> tuple[str, int]:
    """``text`` up to the end of its module header (a change here restarts a file worker),
    and how far the header's parse read (``Header.read_to``)."""
    header = parse_header(text)
    return text[: header.end], header.read_to


@dataclass(slots=True)
class FileWorker:
    """One document's ``lean --worker`` and the header it was opened with: Lean's worker exits
    when a change alters it, so such a change starts a new one."""

    transport: LspTransport
    stop: anyio.Event = field(default_factory=anyio.Event)
    header: str = ""
    # The document's text before this offset is the text its header was parsed from (every
    # change since began at or after it): a change from here on keeps the header.
    header_read_to: int = 0


class FileWorkers:
    """The file workers of one client, each in ``tg`` (its task kills and reaps the worker,
    shielded, as it is stopped or cancelled). Create with ``FileWorkers.start``."""

    @classmethod
    @asynccontextmanager
    async def start(
        cls,
        argv: list[str],
        command: ServerCommand,
        timeouts: Timeouts,
        init_params: dict[str, Any],
        on_notification: Callable[[str, Any], None],
    ) -> AsyncIterator[FileWorkers]:
        """No worker yet (each document's starts with it); every one is killed when the
        context ends."""
        async with anyio.create_task_group() as tg:
            workers = cls(argv, command, timeouts, init_params, on_notification, tg)
            try:
                yield workers
            finally:
                workers.close()  # (nothing is started in the task group from here on)
                # Each worker's task kills and reaps it (shielded) as it is cancelled.
                tg.cancel_scope.cancel()

    def __init__(
        self,
        argv: list[str],
        command: ServerCommand,
        timeouts: Timeouts,
        init_params: dict[str, Any],
        on_notification: Callable[[str, Any], None],
        tg: TaskGroup,
    ) -> None:
        self._argv = argv
        self._command = command
        self._timeouts = timeouts
        self._init_params = init_params  # the `initialize` every worker is started with
        self._on_notification = on_notification
        self._tg: TaskGroup | None = tg
        self._by_uri: dict[str, FileWorker] = {}  # each open document's worker
        self._starting: dict[str, anyio.Event] = {}  # uri -> set when its worker start ends
        self.closed = False

    direct = True

    @property
    def alive(self) -> bool:
        return not self.closed  # a dead worker is restarted by the next change

    def close(self) -> None:
        """No worker starts from now on (``start`` cancels ``tg`` then, which stops them all)."""
        self.closed = True
        self._tg = None

    def pids(self) -> tuple[int, ...]:
        """The live workers' process ids, oldest first."""
        return tuple(w.transport.pid for w in self._by_uri.values() if w.transport.alive)

    def kill(self) -> None:
        for worker in self._by_uri.values():
            if worker.transport.alive:  # (a dead one's orphans cost a /proc scan to find)
                worker.transport.kill()

    def connection_of(self, uri: str) -> LspTransport | None:
        """``uri``'s worker's connection, alive or not (None: it has none)."""
        worker = self._by_uri.get(uri)
        return worker.transport if worker is not None else None

    def conn(self, uri: str) -> LspTransport:
        """Where messages about ``uri`` go: its worker; a worker that is gone is what the
        watchdog answers then (``error``)."""
        worker = self._by_uri.get(uri)
        if worker is None:
            raise self._gone(uri, None, None)
        if not worker.transport.alive:
            cause = worker.transport.failure or ServerDied("its output ended")
            raise self.error(uri, cause, worker.transport)
        return worker.transport

    def error(self, uri: str, error: LeanrigError, conn: LspTransport) -> LeanrigError:
        """An error from the worker ``conn``, as the watchdog would report it: its death is a
        worker crash (the server is fine, the next change restarts the worker) — unless a
        change replaced it meanwhile (header change): the document changed under the request.
        Anything else, and every error once the client is closed, unchanged."""
        if self.closed or not isinstance(error, (ServerDied, ServerClosed)):
            return error
        if self._replaced(uri, conn):
            return ContentModified(
                "request", -32801, f"{uri} changed: its Lean file worker was replaced"
            )
        if not conn.heard:  # gone before it said anything: it could not start
            return self._not_started(error, conn.stderr_tail(), conn.returncode)
        return self._gone(uri, error, conn)

    def needs_new(self, uri: str, text: str, unchanged: int = 0) -> bool:
        """Must the document's (already updated) ``text`` go to a new worker — its worker is
        gone, or the change touched the header? ``unchanged``: the change kept the text before
        this offset (a proof step's change begins far after the header: no parse of the
        header on every step)."""
        worker = self._by_uri.get(uri)
        if worker is None or not worker.transport.alive:
            return True
        if unchanged >= worker.header_read_to:
            return False
        header, worker.header_read_to = header_region(text)
        return header != worker.header

    async def settled(self, uri: str, timeout: float, method: str) -> None:
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

    async def open(self, uri: str, text: str, version: int, dependency_build_mode: str) -> None:
        """Document ``uri`` at ``text`` and ``version`` in a new worker, the old one stopped.
        The worker is the document's only once it has been sent ``initialize`` and
        ``didOpen``: interrupted before (cancelled, or it could not start), it is stopped, and
        the document has none (the next change starts one).

        Callers settle first (``settled``) and then apply their change and call this with no
        wait between: so a start never overlaps another of the same document, and whatever
        comes for the document meanwhile waits for it and is about this text or a later
        one."""
        if self._tg is None:
            raise ServerClosed("the Lean client is closed")
        text_document = {"uri": uri, "languageId": "lean4", "version": version, "text": text}
        header, header_read_to = header_region(text)
        assert uri not in self._starting, "a start overlapped another (callers settle first)"
        started = self._starting[uri] = anyio.Event()
        worker: FileWorker | None = None
        try:
            self.stop(uri)
            worker = await self._tg.start(self._run, uri)
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
        worker.header, worker.header_read_to = header, header_read_to
        self._by_uri[uri] = worker

    def stop(self, uri: str) -> None:
        """Stop ``uri``'s worker, if it has one (a worker serves one document)."""
        worker = self._by_uri.pop(uri, None)
        if worker is not None:
            worker.stop.set()

    async def _run(self, uri: str, *, task_status: TaskStatus[FileWorker]) -> None:
        async with LspTransport.spawn(
            self._argv,
            cwd=self._command.cwd,
            env=self._command.env,
            on_notification=self._on_notification,
            shutdown_timeout=self._timeouts.shutdown,
            write_timeout=self._timeouts.request,
            polite=False,
        ) as transport:
            worker = FileWorker(transport)
            task_status.started(worker)
            await worker.stop.wait()

    def _replaced(self, uri: str, conn: LspTransport) -> bool:
        """Did a change give ``uri`` a new worker since ``conn`` was its connection?"""
        worker = self._by_uri.get(uri)
        return worker is None or worker.transport is not conn

    def _gone(
        self, uri: str, cause: LeanrigError | None, transport: LspTransport | None
    ) -> WorkerCrashed:
        """What a request about ``uri`` meets when its worker is gone: what the watchdog
        answers then (the next change starts a new worker), with the worker's exit code and
        last words."""
        why = f": {cause.message}" if cause is not None else ""
        error = WorkerCrashed("request", -32902, f"the Lean file worker for {uri} stopped{why}")
        if transport is not None:
            error.stderr_tail = transport.stderr_tail()
            error.returncode = transport.returncode
        return error

    async def _start_failed(self, exc: ServerError, worker: FileWorker | None) -> ServerStartFailed:
        """A worker that could not start, or died before it read its document: why, from its
        exit code and stderr (waited for, within the shutdown deadline)."""
        cause: ServerError = exc
        if worker is not None:
            with anyio.move_on_after(self._timeouts.shutdown):
                await worker.transport.exited.wait()
            cause = worker.transport.failure or exc
        return self._not_started(cause, cause.stderr_tail, cause.returncode)

    def _not_started(
        self, cause: LeanrigError, stderr_tail: str, returncode: int | None
    ) -> ServerStartFailed:
        """A file worker that could not start: why, its stderr and exit code."""
        return ServerStartFailed(
            f"Lean file worker {self._command.program} did not start: {cause.message}",
            stderr_tail=stderr_tail,
            returncode=returncode,
        )
