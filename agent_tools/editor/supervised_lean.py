"""The sandboxed ``lean --server`` of one editor connection, restarted when it dies, up to a limit.

leanrig's own requests use string ids ``leanrig:N``. Must not route or change frames. No Lean
process outlives ``run``."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from subprocess import PIPE
from typing import Any

import anyio
import orjson
import psutil
import structlog
from anyio.abc import Process, TaskStatus

from lsp_bridge import (
    LeanrigError,
    ProtocolError,
    decode_body,
    kill_tree,
    read_frames,
    spawn_marked,
)
from repl_pool import LeanEnvironment

log = structlog.get_logger("leanrig.editor")

ID_PREFIX = "leanrig:"
INTERNAL_ERROR = -32603
STDERR_TAIL = 16 * 1024


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


@dataclass(slots=True)
class _Process:
    process: Process
    token: str
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    stderr: deque[bytes] = field(default_factory=deque)

    def stderr_tail(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")[-2000:]


@dataclass(slots=True)
class _Injected:
    done: anyio.Event = field(default_factory=anyio.Event)
    message: dict[str, Any] | None = None


class SupervisedLean:
    """The Lean of one editor connection; ``run`` it in the connection's task group.

    ``on_frame`` gets each frame but answers to leanrig's requests; ``reopen`` re-sends the
    editor's session to a restarted Lean; ``fail_owed(why)`` errors the requests under way."""

    def __init__(
        self,
        environment: LeanEnvironment,
        *,
        ids: Iterator[int],
        spawn_timeout: float,
        write_timeout: float,
        shutdown_timeout: float,
        restart_limit: int,
        on_frame: Callable[[bytes, dict[str, Any]], Awaitable[None]],
        reopen: Callable[[], Awaitable[None]],
        fail_owed: Callable[[str], Awaitable[None]],
        restarted: Callable[[], None],
        show: Callable[[str, int], Awaitable[None]],
    ) -> None:
        self._environment = environment
        self._ids = ids  # shared with the owner's requests to the editor
        self._spawn_timeout = spawn_timeout
        self._write_timeout = write_timeout
        self._shutdown_timeout = shutdown_timeout
        self._restart_limit = restart_limit
        self._on_frame = on_frame
        self._reopen = reopen
        self._fail_owed = fail_owed
        self._restarted = restarted
        self._show = show
        self._lean: _Process | None = None
        self._ready = anyio.Event()
        self._injected: dict[str, _Injected] = {}
        self.restarts = 0
        self.failed: str | None = None  # why it gave up restarting
        self.closing = False  # the connection ends: Lean's exit is no death
        self.shutdown_asked = False

    async def send(self, body: bytes) -> None:
        """Write one frame to Lean (waiting while Lean restarts); a dead Lean drops it."""
        if not self._ready.is_set():
            with anyio.fail_after(self._spawn_timeout):
                await self._ready.wait()
        lean = self._lean
        if lean is None or lean.process.stdin is None:
            return
        try:
            with anyio.fail_after(self._write_timeout):
                async with lean.lock:
                    await lean.process.stdin.send(frame(body))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            log.warning("lean.write_failed")  # the reader sees the death
        except TimeoutError:
            log.warning("lean.not_reading")
            kill_tree(lean.token, lean.process.pid)

    async def send_json(self, message: dict[str, Any]) -> None:
        await self.send(orjson.dumps(message))

    async def request(self, method: str, params: Any, timeout: float) -> dict[str, Any]:
        """Send leanrig's own request to Lean; returns the whole response message."""
        rid = f"{ID_PREFIX}{next(self._ids)}"
        pending = self._injected[rid] = _Injected()
        try:
            await self.send_json({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            with anyio.fail_after(timeout):
                await pending.done.wait()
        finally:
            self._injected.pop(rid, None)
        assert pending.message is not None
        return pending.message

    async def write_now(self, message: dict[str, Any]) -> None:
        """Write to a Lean being re-opened (not ready for ``send`` yet)."""
        lean = self._lean
        assert lean is not None
        assert lean.process.stdin is not None
        with anyio.fail_after(self._write_timeout):
            async with lean.lock:
                await lean.process.stdin.send(frame(orjson.dumps(message)))

    async def request_now(self, method: str, params: Any) -> dict[str, Any]:
        """``request`` to a Lean being re-opened, within the spawn deadline."""
        rid = f"{ID_PREFIX}{next(self._ids)}"
        pending = self._injected[rid] = _Injected()
        try:
            await self.write_now({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            with anyio.fail_after(self._spawn_timeout):
                await pending.done.wait()
        finally:
            self._injected.pop(rid, None)
        assert pending.message is not None
        return pending.message

    def answered(self, rid: str, message: dict[str, Any]) -> None:
        injected = self._injected.get(rid)
        if injected is not None:
            injected.message = message
            injected.done.set()

    def worker_alive(self, uri: str) -> bool:
        """Is a Lean file worker for ``uri`` running? True when it cannot be told."""
        lean = self._lean
        if lean is None:
            return True
        try:
            tree = psutil.Process(lean.process.pid).children(recursive=True)
            return any(
                "--worker" in argv and uri in argv
                for argv in (p.cmdline() for p in tree if p.is_running())
            )
        except psutil.Error:
            return True

    @asynccontextmanager
    async def _spawn(self) -> AsyncIterator[_Process]:
        command = self._environment.server_command()
        process, token = await spawn_marked(
            command.full_argv(), cwd=command.cwd, env=command.env, stdin=PIPE
        )
        lean = _Process(process, token)
        log.info("lean.spawned", pid=process.pid)
        try:
            yield lean
        finally:
            kill_tree(token, process.pid)
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._shutdown_timeout):
                await process.aclose()

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        """Run Lean, restarting it when it dies, until closing or past the restart limit.

        The first start's failure is raised."""
        started = False
        while not self.closing:
            code: int | None = None
            try:
                async with self._spawn() as lean, anyio.create_task_group() as tg:
                    tg.start_soon(self._stderr_loop, lean)
                    reader_done = anyio.Event()
                    tg.start_soon(self._reader, lean, reader_done)
                    self._lean = lean
                    if started:
                        await self._reopen()
                    self._ready.set()
                    if not started:
                        started = True
                        task_status.started()
                    await reader_done.wait()
                    tg.cancel_scope.cancel()
                code = lean.process.returncode
                if self.closing or self.shutdown_asked:
                    return
                log.warning("lean.died", returncode=code, stderr=lean.stderr_tail())
            except LeanrigError as exc:
                if not started:
                    raise
                log.warning("lean.restart_failed", error=exc.message)
            except TimeoutError:
                log.warning("lean.restart_timeout")
            if self.closing:
                return
            self._ready = anyio.Event()
            self._lean = None
            why = f"the Lean server exited (code {code}); leanrig restarts it"
            await self._fail_owed(why)
            for injected in self._injected.values():
                injected.message = {"error": {"code": INTERNAL_ERROR, "message": why}}
                injected.done.set()
            self.restarts += 1
            self._restarted()
            if self.restarts > self._restart_limit:
                self.failed = f"Lean died {self.restarts} times; giving up"
                self._ready.set()  # writers stop waiting; frames are dropped
                await self._show(f"leanrig: {self.failed}", 1)
                return
            await self._show(
                f"leanrig: the Lean server exited (code {code}); restarting it and re-opening "
                "your files",
                2,
            )

    async def _stderr_loop(self, lean: _Process) -> None:
        if lean.process.stderr is None:
            return
        size = 0
        try:
            async for chunk in lean.process.stderr:
                lean.stderr.append(chunk)
                size += len(chunk)
                while size > STDERR_TAIL and len(lean.stderr) > 1:
                    size -= len(lean.stderr.popleft())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async def _reader(self, lean: _Process, done: anyio.Event) -> None:
        assert lean.process.stdout is not None
        try:
            async with aclosing(read_frames(lean.process.stdout)) as frames:
                async for body in frames:
                    message = decode_body(body)
                    rid = message.get("id")
                    mine = isinstance(rid, str) and rid.startswith(ID_PREFIX)
                    if mine and message.get("method") is None:
                        self.answered(str(rid), message)
                        continue
                    await self._on_frame(body, message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        except ProtocolError as exc:
            log.warning("lean.protocol_error", error=exc.message)
        finally:
            kill_tree(lean.token, lean.process.pid)
            done.set()
