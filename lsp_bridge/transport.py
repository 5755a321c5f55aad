"""One Lean language-server process and the JSON-RPC conversation with it.

Kills the whole process group (no orphan ``lean --worker``) on close, cancellation and protocol
errors. Must not know what Lean is: documents, diagnostics and goals live in ``client.py``."""

from __future__ import annotations

import itertools
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from subprocess import PIPE
from typing import Any

import anyio
import structlog
from anyio.abc import Process, TaskGroup

from .errors import (
    LeanrigError,
    ProtocolError,
    RequestTimeout,
    ServerClosed,
    ServerDied,
    ServerError,
    response_error,
)
from .exception_groups import single_errors
from .framing import decode_body, encode_message, read_frames, unread_notification
from .pending_requests import Conditional, Parse, PendingRequest, conditional_needed
from .proctree import spawn_marked
from .server_process import ServerProcess
from .trace import TRACE_EVENT

log = structlog.get_logger("leanrig.lsp")

NotificationHandler = Callable[[str, Any], None]


class LspTransport:
    """A running LSP server process. Create with ``LspTransport.spawn(...)`` (a context manager)."""

    def __init__(
        self,
        process: Process,
        argv: Sequence[str],
        on_notification: NotificationHandler,
        shutdown_timeout: float,
        token: str,
        write_timeout: float = 30.0,
        polite: bool = True,
    ) -> None:
        self._process = process
        self._server = ServerProcess(process, token)
        self._polite = polite
        self._write_timeout = write_timeout
        self.argv = tuple(argv)
        self._on_notification = on_notification
        self._shutdown_timeout = shutdown_timeout
        self._ids = itertools.count(1)
        self._pending: dict[int, PendingRequest] = {}
        # Exchanges waiting with an ``early`` predicate: asked again after every notification.
        self._watchers: set[Callable[[], None]] = set()
        # fast_acquire: an uncontended write does not yield to the loop first.
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._failure: ServerError | None = None
        self._closing = False
        self._reading = True
        self.exited = anyio.Event()
        self.heard = False  # any message read from the process yet

    @classmethod
    @asynccontextmanager
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        on_notification: NotificationHandler,
        shutdown_timeout: float = 3.0,
        write_timeout: float = 30.0,
        polite: bool = True,
    ) -> AsyncIterator[LspTransport]:
        """Spawn ``argv``; ``polite=False`` skips ``shutdown``/``exit`` (for a file worker)."""
        process, token = await spawn_marked(argv, cwd=cwd, env=env, stdin=PIPE)
        transport = cls(
            process, argv, on_notification, shutdown_timeout, token, write_timeout, polite
        )
        log.debug("lsp.spawned", pid=process.pid, argv=list(argv))
        try:
            with single_errors():
                async with anyio.create_task_group() as tg:
                    transport._start_loops(tg)
                    try:
                        yield transport
                    except BaseException:
                        # The owner is going away: a handshake could wait on a mute server.
                        transport._polite = False
                        raise
                    finally:
                        await transport.aclose()
                        tg.cancel_scope.cancel()
        finally:
            await transport._server.kill_async()
            with anyio.CancelScope(shield=True), anyio.move_on_after(shutdown_timeout):
                await process.aclose()

    def _start_loops(self, tg: TaskGroup) -> None:
        tg.start_soon(self._read_loop)
        tg.start_soon(self._server.collect_stderr)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    @property
    def alive(self) -> bool:
        return self._failure is None and not self._closing and self._reading

    @property
    def failure(self) -> ServerError | None:
        return self._failure

    @property
    def pending_count(self) -> int:
        """Requests still waiting for an answer (none between calls: nothing leaks)."""
        return len(self._pending)

    def stderr_tail(self) -> str:
        return self._server.stderr_tail()

    async def request(
        self, method: str, params: Any, *, timeout: float, tag: str | None = None
    ) -> Any:
        """Send a request and wait at most ``timeout`` seconds for its answer (see ``exchange``)."""
        (answer,) = await self.exchange([], [(method, params, None)], timeout=timeout, tag=tag)
        if isinstance(answer, LeanrigError):
            raise answer
        return answer

    async def notify(self, method: str, params: Any) -> None:
        self._check_usable()
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def post(self, messages: Sequence[dict[str, Any]]) -> None:
        """Write ``messages`` in one write, expecting no answer (a file worker's ``initialize``)."""
        self._check_usable()
        await self._write(b"".join(encode_message(m) for m in messages))

    async def exchange(
        self,
        notifications: Sequence[tuple[str, Any]],
        requests: Sequence[tuple[str, Any, Parse | None]],
        *,
        timeout: float,
        tag: str | None = None,
        on_error: Callable[[LeanrigError], None] | None = None,
        conditional: Conditional | None = None,
        early: Callable[[], bool] | None = None,
    ) -> list[Any]:
        """Send ``notifications`` then all requests in one write; return answers (or errors).

        ``conditional``'s are waited for only if it says so (else None); ``early()`` stands in for
        the first answer; ``timeout`` covers all; unanswered requests get ``$/cancelRequest``."""
        self._check_usable()
        # One wake-up per exchange: the caller's coroutine chain resumes once, not per answer.
        ready = anyio.Event()
        asked: list[tuple[int, PendingRequest]] = []
        required = len(requests)
        waiting = required  # how many of ``asked`` are waited for

        def first_in() -> bool:
            return required == 0 or asked[0][1].finished or (early is not None and early())

        def others(upto: int) -> list[tuple[int, PendingRequest]]:
            return asked[1:upto] if required else asked[:upto]

        def check() -> None:
            nonlocal waiting
            # While the first request is out (most of a step) this is all that runs per message.
            if ready.is_set() or not first_in():
                return
            if not all(p.finished for _, p in others(waiting)):
                return
            if (
                conditional is not None
                and not conditional.waited
                and conditional_needed(conditional)
            ):
                conditional.waited = True
                waiting = len(asked)
                if not all(p.finished for _, p in others(waiting)):
                    return
            ready.set()

        batch = [*requests, *(conditional.requests if conditional is not None else ())]
        try:
            frames = [
                encode_message({"jsonrpc": "2.0", "method": method, "params": params})
                for method, params in notifications
            ]
            for method, params, parse in batch:
                request_id = next(self._ids)
                frames.append(
                    encode_message(
                        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                    )
                )
                pending = PendingRequest(method, tag, parse, on_error, wake=check)
                self._pending[request_id] = pending
                asked.append((request_id, pending))
            # Writes have their own deadline (a half-written frame breaks the stream).
            deadline = anyio.current_time() + timeout
            if early is not None:
                self._watchers.add(check)
            await self._write(b"".join(frames))
            check()
            with anyio.move_on_at(deadline):
                await ready.wait()
            late = [p for _, p in others(waiting) if not p.finished]
            if not first_in():
                late.insert(0, asked[0][1])
            if late and not ready.is_set():
                await self._send_cancels([rid for rid, p in asked if not p.finished])
                raise RequestTimeout(late[0].method, timeout)
        except anyio.get_cancelled_exc_class():
            await self._send_cancels([rid for rid, p in asked if not p.finished])
            raise
        finally:
            self._watchers.discard(check)
            for request_id, _ in asked:
                self._pending.pop(request_id, None)
        answers = [p.error if p.error is not None else p.result for _, p in asked[:required]]
        if conditional is not None:
            answers += [
                (p.error if p.error is not None else p.result) if conditional.waited else None
                for _, p in asked[required:]
            ]
        return answers

    async def aclose(self) -> None:
        """Polite shutdown within the deadline, then kill the process group. Idempotent."""
        if self._closing:
            return
        self._closing = True
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self._shutdown_timeout):
                # Polite only while the reader runs: else the answer to it is never read.
                if self._polite and self._failure is None and self._reading:
                    try:
                        await self._request_unchecked("shutdown", None)
                        await self._send({"jsonrpc": "2.0", "method": "exit", "params": None})
                    except LeanrigError:
                        pass
                try:
                    await self._process.stdin.aclose() if self._process.stdin else None
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                if self._polite:
                    await self._process.wait()
            await self._server.kill_async()
            with anyio.move_on_after(self._shutdown_timeout):
                await self._process.wait()
        self._fail_all(ServerClosed("server closed", stderr_tail=self.stderr_tail()))
        log.debug("lsp.closed", pid=self.pid, returncode=self._process.returncode)

    def fail_tagged(self, tag: str, error: LeanrigError) -> None:
        """End every pending request carrying ``tag`` with ``error`` (the answer is dropped)."""
        for pending in list(self._pending.values()):
            if pending.tag == tag:
                pending.resolve(error=error)

    def kill(self) -> None:
        """Kill the whole process group now (e.g. a hung server past its deadline)."""
        self._server.kill()

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closing or not self._reading:
            raise ServerClosed("server closed")

    async def _request_unchecked(self, method: str, params: Any) -> Any:
        request_id = next(self._ids)
        answered = anyio.Event()
        pending = PendingRequest(method, wake=answered.set)
        self._pending[request_id] = pending
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            await answered.wait()
        finally:
            self._pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def _send(self, message: dict[str, Any], *, await_exit: bool = True) -> None:
        await self._write(encode_message(message), await_exit=await_exit)

    async def _write(self, data: bytes, *, await_exit: bool = True) -> None:
        stdin = self._process.stdin
        if stdin is None:
            raise ServerClosed("server has no stdin")
        try:
            # A half-written frame breaks the stream, so a timeout is fatal.
            with anyio.move_on_after(self._write_timeout) as scope:
                async with self._write_lock:
                    sys.audit(TRACE_EVENT, "write to Lean")
                    await stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            if self._failure is None and not self._closing and await_exit:
                # The process is going: the read loop reports why, with its stderr.
                with anyio.move_on_after(self._shutdown_timeout):
                    await self.exited.wait()
            raise self._failure or ServerDied(
                "Lean server stopped reading its input", stderr_tail=self.stderr_tail()
            ) from exc
        if scope.cancelled_caught:
            if self._failure is None:
                self._failure = ServerDied(
                    f"Lean server did not read its input for {self._write_timeout:g} s",
                    stderr_tail=self.stderr_tail(),
                )
                self._server.kill()
            raise self._failure

    async def _send_cancels(self, request_ids: Sequence[int]) -> None:
        """``$/cancelRequest`` for each, in one write; shielded and bounded."""
        if not request_ids:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
            try:
                cancels = [
                    {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}}
                    for request_id in request_ids
                ]
                await self._write(b"".join(encode_message(m) for m in cancels))
            except LeanrigError:
                pass

    async def _read_loop(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        failure: ServerError | None = None
        cancelled = False
        try:
            async with aclosing(read_frames(stdout)) as frames:
                async for body in frames:
                    self.heard = True
                    if unread_notification(body):
                        continue
                    message = decode_body(body)
                    if "id" in message and "method" in message:
                        await self._answer_server_request(
                            message["id"], message["method"], message.get("params")
                        )
                    else:
                        self._dispatch(message)  # without awaiting: see framing.read_frames
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        except ProtocolError as exc:
            failure = ServerDied(f"protocol error from Lean server: {exc.message}")
            failure.__cause__ = exc
            self._server.kill()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        finally:
            self._reading = False
            if cancelled:
                # The owner is closing and reaps the process: no exit of its own to explain.
                self._fail_all(ServerClosed("server closed"))
                self.exited.set()
            else:
                await self._after_output_ended(failure)

    async def _after_output_ended(self, failure: ServerError | None) -> None:
        """The output ended (exit or protocol error): record why, kill the rest, end requests."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
            await self._process.wait()
        if failure is None and not self._closing:
            failure = await self._server.exit_failure()
        if failure is not None and self._failure is None:
            self._failure = failure
            await self._server.kill_async()  # orphaned workers must not keep elaborating
            log.warning(
                "lsp.died",
                pid=self.pid,
                returncode=self._process.returncode,
                error=failure.message,
                argv=list(self.argv),
                stderr=failure.stderr_tail[-2000:],
            )
        self._fail_all(self._failure or ServerClosed("server closed"))
        self.exited.set()

    def _dispatch(self, message: dict[str, Any]) -> None:
        """A notification or an answer (requests from the server are answered by the loop)."""
        if "method" in message:
            method = message["method"]
            try:
                self._on_notification(method, message.get("params"))
            except Exception:  # a handler bug must not kill the connection
                log.exception("lsp.notification_handler_failed", method=method)
            if self._watchers:
                for watcher in tuple(self._watchers):
                    try:
                        watcher()
                    except Exception:
                        log.exception("lsp.exchange_check_failed", method=method)
            return
        request_id = message.get("id")
        pending = self._pending.get(request_id) if isinstance(request_id, int) else None
        if pending is None:
            return
        sys.audit(TRACE_EVENT, "Lean answers", pending.method)
        error = message.get("error")
        if error is not None:
            err = response_error(pending.method, error if isinstance(error, dict) else {})
            pending.resolve(error=err)
        else:
            pending.resolve(result=message.get("result"))

    async def _answer_server_request(self, request_id: Any, method: str, params: Any) -> None:
        result: Any = None
        if method == "workspace/configuration" and isinstance(params, dict):
            result = [None for _ in params.get("items", [])]
        try:
            # From the read loop itself: it cannot wait for its own end.
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "result": result}, await_exit=False
            )
        except LeanrigError:
            pass

    def _fail_all(self, error: LeanrigError) -> None:
        for pending in list(self._pending.values()):
            pending.resolve(error=error)
