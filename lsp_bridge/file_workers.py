"""Direct file workers: one ``lean --worker`` per open document, doing the watchdog's little part.

Must not track reports or decide when to start a worker: the client does."""

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
    """``text`` up to the end of its module header, and how far the parse read (``read_to``)."""
    header = parse_header(text)
    return text[: header.end], header.read_to


@dataclass(slots=True)
class FileWorker:
    """One document's ``lean --worker`` and the module header it was opened with."""

    transport: LspTransport
    stop: anyio.Event = field(default_factory=anyio.Event)
    header: str = ""
    header_read_to: int = 0  # a change starting at or after this offset keeps the header


class FileWorkers:
    """The file workers of one client. Create with ``FileWorkers.start``."""

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
        """No worker yet; every one is killed when the context ends."""
        async with anyio.create_task_group() as tg:
            workers = cls(argv, command, timeouts, init_params, on_notification, tg)
            try:
                yield workers
            finally:
                workers.close()
                tg.cancel_scope.cancel()  # each worker's task kills and reaps it, shielded

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
        self._init_params = init_params
        self._on_notification = on_notification
        self._tg: TaskGroup | None = tg
        self._by_uri: dict[str, FileWorker] = {}
        self._starting: dict[str, anyio.Event] = {}
        self.closed = False

    direct = True

    @property
    def alive(self) -> bool:
        return not self.closed

    def close(self) -> None:
        """No worker starts from now on."""
        self.closed = True
        self._tg = None

    def pids(self) -> tuple[int, ...]:
        """The live workers' process ids, oldest first."""
        return tuple(w.transport.pid for w in self._by_uri.values() if w.transport.alive)

    def kill(self) -> None:
        for worker in self._by_uri.values():
            if worker.transport.alive:  # a dead one's orphans would cost a /proc scan
                worker.transport.kill()

    def connection_of(self, uri: str) -> LspTransport | None:
        """``uri``'s worker's connection, alive or not (None: no worker)."""
        worker = self._by_uri.get(uri)
        return worker.transport if worker is not None else None

    def conn(self, uri: str) -> LspTransport:
        """``uri``'s live worker; raises what the watchdog would if it is gone."""
        worker = self._by_uri.get(uri)
        if worker is None:
            raise self._gone(uri, None, None)
        if not worker.transport.alive:
            cause = worker.transport.failure or ServerDied("its output ended")
            raise self.error(uri, cause, worker.transport)
        return worker.transport

    def error(self, uri: str, error: LeanrigError, conn: LspTransport) -> LeanrigError:
        """An error from worker ``conn`` as the watchdog would report it (crash, or replaced)."""
        if self.closed or not isinstance(error, (ServerDied, ServerClosed)):
            return error
        if self._replaced(uri, conn):
            return ContentModified(
                "request", -32801, f"{uri} changed: its Lean file worker was replaced"
            )
        if not conn.heard:
            return self._not_started(error, conn.stderr_tail(), conn.returncode)
        return self._gone(uri, error, conn)

    def needs_new(self, uri: str, text: str, unchanged: int = 0) -> bool:
        """Must ``text`` go to a new worker? ``unchanged``: the change kept the text before it."""
        worker = self._by_uri.get(uri)
        if worker is None or not worker.transport.alive:
            return True
        if unchanged >= worker.header_read_to:
            return False
        header, worker.header_read_to = header_region(text)
        return header != worker.header

    async def settled(self, uri: str, timeout: float, method: str) -> None:
        """Wait at most ``timeout`` s for ``uri``'s worker start, else raise ``RequestTimeout``."""
        deadline = anyio.current_time() + timeout
        # Woken, another waiter may have begun the next start: wait for that one too.
        while (starting := self._starting.get(uri)) is not None:
            with anyio.move_on_at(deadline):
                await starting.wait()
            if anyio.current_time() >= deadline and uri in self._starting:
                raise RequestTimeout(method, timeout)

    async def open(self, uri: str, text: str, version: int, dependency_build_mode: str) -> None:
        """Open ``uri`` in a new worker, stopping the old one; call right after ``settled``."""
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
                    {
                        "jsonrpc": "2.0",
                        "id": 0,
                        "method": "initialize",
                        "params": self._init_params,
                    },
                    {
                        "jsonrpc": "2.0",
                        "method": "textDocument/didOpen",
                        "params": {
                            "textDocument": text_document,
                            "dependencyBuildMode": dependency_build_mode,
                        },
                    },
                ]
            )
        except ServerError as exc:
            error = await self._start_failed(exc, worker)  # before stopping: its exit says why
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
        worker = self._by_uri.get(uri)
        return worker is None or worker.transport is not conn

    def _gone(
        self, uri: str, cause: LeanrigError | None, transport: LspTransport | None
    ) -> WorkerCrashed:
        """What the watchdog answers about ``uri`` when its worker is gone, with its stderr."""
        why = f": {cause.message}" if cause is not None else ""
        error = WorkerCrashed("request", -32902, f"the Lean file worker for {uri} stopped{why}")
        if transport is not None:
            error.stderr_tail = transport.stderr_tail()
            error.returncode = transport.returncode
        return error

    async def _start_failed(self, exc: ServerError, worker: FileWorker | None) -> ServerStartFailed:
        """Why a worker could not start or read its document (waits for its exit, bounded)."""
        cause: ServerError = exc
        if worker is not None:
            with anyio.move_on_after(self._timeouts.shutdown):
                await worker.transport.exited.wait()
            cause = worker.transport.failure or exc
        return self._not_started(cause, cause.stderr_tail, cause.returncode)

    def _not_started(
        self, cause: LeanrigError, stderr_tail: str, returncode: int | None
    ) -> ServerStartFailed:
        return ServerStartFailed(
            f"Lean file worker {self._command.program} did not start: {cause.message}",
            stderr_tail=stderr_tail,
            returncode=returncode,
        )
