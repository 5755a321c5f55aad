"""`leanrig lsp`: a raw-frame LSP proxy between a human's editor and a sandboxed Lean server.

Responsibilities (and nothing else): forward every frame between the editor and Lean with its
JSON body untouched, except the few it must inspect or change:

- ``initialize`` (editor → Lean): remembered (for restarts) and its ``editDelay`` recorded; its
  answer gains ``executeCommandProvider`` for ``leanrig.checkProof``;
- the task file's ``didOpen``/``didChange``/``didSave``: scoped (``scoping.py``); an edit
  outside the proof body is not forwarded and the editor gets a versioned
  ``workspace/applyEdit`` that restores the last valid text, checked against the document it
  sends back; Lean keeps the last valid text;
- the task file's ``publishDiagnostics`` (Lean → editor): leanrig's own diagnostics merged in;
  its ``$/lean/fileProgress``: read (not changed) for the ledger;
- ``workspace/executeCommand leanrig.checkProof``: answered by leanrig (the verdict).

Requests leanrig injects carry string ids ``leanrig:N`` (Lean's own server→client ids are
numbers or names such as ``register_lean_watcher``; editors use numbers), so no id collides.
If Lean dies, pending editor requests get an error, Lean is restarted with the editor's
``initialize`` and every open document is re-opened. No Lean process outlives the proxy: Lean
runs in the proxy's task group under the repl_pool sandbox wrapper with a kill token.

Why raw frames and not pygls: see agent_tools/README.md (editor decision).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
import orjson
import psutil
import structlog
from anyio.abc import ByteReceiveStream, Process, TaskStatus

from lsp_bridge import (
    LeanrigError,
    LineIndex,
    ProtocolError,
    decode_body,
    kill_tree,
    read_frames,
    spawn_marked,
)
from repl_pool import LeanEnvironment

from ..tasks import Task
from ..verdict import Verdict, Verifier
from .attempt import Attempt
from .scoping import (
    OUTSIDE_MESSAGE,
    TaskScope,
    apply_changes,
    changed_span,
    diagnostic,
    replace_edit,
)
from .scoping import lsp_range as _lsp_range

log = structlog.get_logger("leanrig.editor")

CHECK_COMMAND = "leanrig.checkProof"
ID_PREFIX = "leanrig:"
# The time-limit timer's longest sleep between looks at the wall clock.
TIME_LIMIT_POLL = 1.0
TIME_UP_MESSAGE = "leanrig: the time limit is over; edits are no longer sent to Lean"
INTERNAL_ERROR = -32603
STDERR_TAIL = 16 * 1024


@dataclass(frozen=True, slots=True)
class ProxyTimeouts:
    spawn: float = 60.0  # Lean restarted and answering `initialize`
    write: float = 30.0  # one frame written to either side
    revert: float = 2.0  # the editor's document back in scope after an applied revert
    verdict: float = 600.0  # one checkProof (the verifier has its own per-stage limits)
    shutdown: float = 3.0


@dataclass(slots=True)
class _Doc:
    uri: str
    text: str
    version: int


@dataclass(slots=True)
class _Lean:
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


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def uri_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


class EditorProxy:
    """One editor connection. ``await proxy.run(editor_in)`` until the editor leaves."""

    def __init__(
        self,
        *,
        task: Task,
        task_path: Path,
        environment: LeanEnvironment,
        verifier: Verifier,
        attempt: Attempt,
        send_editor: Callable[[bytes], Awaitable[None]],
        timeouts: ProxyTimeouts | None = None,
        restart_limit: int = 5,
    ) -> None:
        self.task = task
        self.task_path = task_path.resolve()
        self.environment = environment
        self.verifier = verifier
        self.attempt = attempt
        self.scope = TaskScope(task)
        self.timeouts = timeouts or ProxyTimeouts()
        self.restart_limit = restart_limit
        self._send_editor_raw = send_editor
        self._editor_lock = anyio.Lock(fast_acquire=True)
        self._ids = itertools.count(1)
        self._lean: _Lean | None = None
        self._lean_ready = anyio.Event()
        self._injected: dict[str, _Injected] = {}
        self._client_requests: dict[Any, str] = {}  # editor request id -> method (in Lean)
        self._initialize: dict[str, Any] | None = None  # the editor's initialize request
        self._initialized_sent = False
        self._docs: dict[str, _Doc] = {}
        self._is_task: dict[str, bool] = {}
        self._closing = False
        self._shutdown = False  # the editor sent `shutdown`: Lean exiting is expected
        self._exit = False
        self._failed: str | None = None
        # The task file as Lean has it (the last text in scope) and leanrig's own diagnostics.
        self._task_uri: str | None = None
        self._lean_text: str = task.text
        # The editor's last text inside the task's scope (sent to Lean, or a held body), and
        # what a revert restores: an edit outside the body is undone, not the held typing.
        self._scoped_text: str = task.text
        self._revert_target: str = task.text
        self._lean_version: int | None = None
        self._lean_diags: list[dict[str, Any]] = []
        self._lean_diag_version: int | None = None
        # (version, fatal, when, errors): finished by Lean, its ledger line not yet written
        self._done: tuple[int, bool, float, int] | None = None
        self._stop_shown: int | None = None  # the version whose worker stop was shown
        self._extra_diags: dict[str, dict[str, Any]] = {}  # kind -> diagnostic
        self._scope_changed = anyio.Event()
        self._revert_id: str | None = None
        self._revert_tries = 0
        self._opened = anyio.Event()
        self._accepted_sent = False
        self.restarts = 0
        self._checks_running = 0
        self._checks_done = anyio.Event()

    @property
    def lean_text(self) -> str:
        """The task file as Lean has it: the last editor text that was in scope."""
        return self._lean_text

    # -- running -----------------------------------------------------------------------------

    async def run(self, editor_in: ByteReceiveStream) -> None:
        """Serve the editor until it exits or disconnects; Lean is gone when this returns."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await tg.start(self._lean_supervisor)
                tg.start_soon(self._time_limit)
                try:
                    await self._editor_loop(editor_in)
                finally:
                    self._closing = True
                    tg.cancel_scope.cancel()
        finally:
            self._closing = True

    async def _editor_loop(self, editor_in: ByteReceiveStream) -> None:
        try:
            async with aclosing(read_frames(editor_in)) as frames:
                async for body in frames:
                    await self._from_editor(body, decode_body(body))
                    if self._exit or self._failed is not None:
                        return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        except ProtocolError as exc:
            log.warning("editor.protocol_error", error=exc.message)
            return
        log.info("editor.disconnected")

    # -- writing -----------------------------------------------------------------------------

    async def _to_editor(self, body: bytes) -> None:
        # Hot path: no timer per frame. The writer (``FdSend``) bounds a blocked write itself.
        async with self._editor_lock:
            await self._send_editor_raw(frame(body))

    async def _to_editor_json(self, message: dict[str, Any]) -> None:
        await self._to_editor(orjson.dumps(message))

    async def _to_lean(self, body: bytes) -> None:
        """Write one frame to Lean (waiting while Lean restarts); a dead Lean drops it."""
        if not self._lean_ready.is_set():
            with anyio.fail_after(self.timeouts.spawn):
                await self._lean_ready.wait()
        lean = self._lean
        if lean is None or lean.process.stdin is None:
            return
        try:
            with anyio.fail_after(self.timeouts.write):
                async with lean.lock:
                    await lean.process.stdin.send(frame(body))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            log.warning("lean.write_failed")  # the reader sees the death and restarts Lean
        except TimeoutError:
            log.warning("lean.not_reading")
            kill_tree(lean.token, lean.process.pid)

    async def _to_lean_json(self, message: dict[str, Any]) -> None:
        await self._to_lean(orjson.dumps(message))

    async def _request_lean(self, method: str, params: Any, timeout: float) -> dict[str, Any]:
        """A request leanrig itself sends to Lean; returns the whole response message."""
        rid = f"{ID_PREFIX}{next(self._ids)}"
        pending = self._injected[rid] = _Injected()
        try:
            await self._to_lean_json({"jsonrpc": "2.0", "id": rid, "method": method,
                                      "params": params})  # fmt: skip
            with anyio.fail_after(timeout):
                await pending.done.wait()
        finally:
            self._injected.pop(rid, None)
        assert pending.message is not None
        return pending.message

    async def _show(self, message: str, kind: int = 3) -> None:
        await self._to_editor_json({"jsonrpc": "2.0", "method": "window/showMessage",
                                    "params": {"type": kind, "message": message}})  # fmt: skip

    # -- Lean's lifecycle --------------------------------------------------------------------

    @asynccontextmanager
    async def _spawn(self) -> AsyncIterator[_Lean]:
        command = self.environment.server_command()
        process, token = await spawn_marked(
            command.full_argv(), cwd=command.cwd, env=command.env, stdin=PIPE
        )
        lean = _Lean(process, token)
        log.info("lean.spawned", pid=process.pid)
        try:
            yield lean
        finally:
            kill_tree(token, process.pid)
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeouts.shutdown):
                await process.aclose()

    async def _lean_supervisor(self, *, task_status: TaskStatus[None]) -> None:
        started = False
        while not self._closing:
            code: int | None = None
            try:
                async with self._spawn() as lean, anyio.create_task_group() as tg:
                    tg.start_soon(self._stderr_loop, lean)
                    reader_done = anyio.Event()
                    tg.start_soon(self._lean_reader, lean, reader_done)
                    self._lean = lean
                    if started:
                        await self._reinitialize()
                    self._lean_ready.set()
                    if not started:
                        started = True
                        task_status.started()
                    await reader_done.wait()
                    tg.cancel_scope.cancel()
                code = lean.process.returncode
                if self._closing or self._shutdown:
                    return  # the editor asked Lean to stop
                log.warning("lean.died", returncode=code, stderr=lean.stderr_tail())
            except LeanrigError as exc:
                if not started:
                    raise
                log.warning("lean.restart_failed", error=exc.message)
            except TimeoutError:
                log.warning("lean.restart_timeout")
            if self._closing:
                return
            # Lean died under the editor: answer what it owed, start a new one.
            self._lean_ready = anyio.Event()
            self._lean = None
            await self._fail_pending(f"the Lean server exited (code {code}); leanrig restarts it")
            self.restarts += 1
            self.attempt.lean_restarted()
            if self.restarts > self.restart_limit:
                self._failed = f"Lean died {self.restarts} times; giving up"
                self._lean_ready.set()  # writers stop waiting: frames are dropped
                await self._show(f"leanrig: {self._failed}", 1)
                return
            await self._show(
                f"leanrig: the Lean server exited (code {code}); restarting it and re-opening "
                "your files",
                2,
            )

    async def _reinitialize(self) -> None:
        """A fresh Lean gets the editor's initialize and every open document again."""
        if self._initialize is None:
            return
        await self._request_lean_unready("initialize", self._initialize.get("params"))
        if self._initialized_sent:
            await self._write_lean_now({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        for doc in self._docs.values():
            text = self._lean_text if self._is_task_uri(doc.uri) else doc.text
            version = doc.version
            if self._is_task_uri(doc.uri):
                version = self._lean_version if self._lean_version is not None else doc.version
                self._forwarded(version, time.perf_counter())
            await self._write_lean_now({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                                        "params": {"textDocument": {"uri": doc.uri,
                                                   "languageId": "lean4", "version": version,
                                                   "text": text}}})  # fmt: skip

    async def _write_lean_now(self, message: dict[str, Any]) -> None:
        lean = self._lean
        assert lean is not None
        assert lean.process.stdin is not None
        with anyio.fail_after(self.timeouts.write):
            async with lean.lock:
                await lean.process.stdin.send(frame(orjson.dumps(message)))

    async def _request_lean_unready(self, method: str, params: Any) -> dict[str, Any]:
        rid = f"{ID_PREFIX}{next(self._ids)}"
        pending = self._injected[rid] = _Injected()
        try:
            await self._write_lean_now({"jsonrpc": "2.0", "id": rid, "method": method,
                                        "params": params})  # fmt: skip
            with anyio.fail_after(self.timeouts.spawn):
                await pending.done.wait()
        finally:
            self._injected.pop(rid, None)
        assert pending.message is not None
        return pending.message

    async def _fail_pending(self, why: str) -> None:
        pending, self._client_requests = self._client_requests, {}
        for rid, method in pending.items():
            await self._to_editor_json({"jsonrpc": "2.0", "id": rid, "error": {
                "code": INTERNAL_ERROR, "message": f"leanrig: {method}: {why}"}})  # fmt: skip
        for injected in self._injected.values():
            injected.message = {"error": {"code": INTERNAL_ERROR, "message": why}}
            injected.done.set()

    async def _stderr_loop(self, lean: _Lean) -> None:
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

    async def _lean_reader(self, lean: _Lean, done: anyio.Event) -> None:
        assert lean.process.stdout is not None
        try:
            async with aclosing(read_frames(lean.process.stdout)) as frames:
                async for body in frames:
                    await self._from_lean(body, decode_body(body))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        except ProtocolError as exc:
            log.warning("lean.protocol_error", error=exc.message)
        finally:
            kill_tree(lean.token, lean.process.pid)
            done.set()

    # -- editor → Lean -----------------------------------------------------------------------

    async def _from_editor(self, body: bytes, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:  # a response to a server→client request
            rid = message.get("id")
            if isinstance(rid, str) and rid.startswith(ID_PREFIX):
                self._on_editor_response(rid, message)
                return
            await self._to_lean(body)
            return
        params = message.get("params")
        if "id" in message:
            rid = message["id"]
            if method == "workspace/executeCommand" and _command(params) == CHECK_COMMAND:
                self._tg.start_soon(self._check_command, rid)
                return
            if method == "initialize":
                self._initialize = message
                self._start_attempt(params)
            elif method == "shutdown":
                self._shutdown = True
            elif method == "textDocument/waitForDiagnostics":
                body = self._waitable(body, params)
            self._client_requests[rid] = method
            await self._to_lean(body)
            return
        if method in _TEXT_SYNC and isinstance(params, dict):
            await self._text_sync(method, body, params)
            return
        if method == "initialized":
            self._initialized_sent = True
        elif method == "exit":
            self._exit = True
        await self._to_lean(body)

    def _waitable(self, body: bytes, params: Any) -> bytes:
        """A ``waitForDiagnostics`` for a task-file version Lean never got (a held body: Lean
        still has its last valid version) asks for the version Lean has: Lean would answer
        only when a later version arrives, so the request would hang until the human makes
        the body valid again."""
        if not isinstance(params, dict) or not self._is_task_uri(str(params.get("uri", ""))):
            return body
        doc = self._docs.get(str(params.get("uri", "")))
        version, lean = params.get("version"), self._lean_version
        # Only a version the editor has sent: one it has not is Lean's to wait for.
        if not isinstance(version, int) or lean is None or doc is None:
            return body
        if not lean < version <= doc.version:
            return body
        message = orjson.loads(body)
        message["params"] = {**params, "version": lean}
        return orjson.dumps(message)

    async def _text_sync(self, method: str, body: bytes, params: dict[str, Any]) -> None:
        doc_params = params.get("textDocument") or {}
        uri = str(doc_params.get("uri", ""))
        received = time.perf_counter()
        if method == "textDocument/didOpen":
            doc = _Doc(uri, str(doc_params.get("text", "")), int(doc_params.get("version") or 0))
            self._docs[uri] = doc
            if self._is_task_uri(uri):
                await self._task_open(doc, params, body, received)
            else:
                await self._to_lean(body)
        elif method == "textDocument/didChange":
            changed = self._docs.get(uri)
            if changed is None:
                await self._to_lean(body)
                return
            before = changed.text
            changed.text = apply_changes(changed.text, params.get("contentChanges") or ())
            changed.version = int(doc_params.get("version") or changed.version)
            if self._is_task_uri(uri):
                await self._task_change(changed, before, body, received)
            else:
                await self._to_lean(body)
        elif method == "textDocument/didClose":
            self._docs.pop(uri, None)
            await self._to_lean(body)
        else:  # didSave: never a way around scoping
            saved = self._docs.get(uri)
            if saved is not None and self._is_task_uri(uri) and saved.text != self._lean_text:
                log.info("editor.save_not_forwarded", version=saved.version)
                return
            await self._to_lean(body)

    def _is_task_uri(self, uri: str) -> bool:
        known = self._is_task.get(uri)
        if known is None:
            path = uri_path(uri)
            known = self._is_task[uri] = path is not None and (
                path == self.task_path or path.resolve() == self.task_path
            )
        return known

    def _start_attempt(self, params: Any) -> None:
        """The editor connected (``initialize``): the attempt's clock starts, or goes on."""
        init = params if isinstance(params, dict) else {}
        options = init.get("initializationOptions") or {}
        delay = options.get("editDelay") if isinstance(options, dict) else None
        client = init.get("clientInfo")
        self.attempt.open(
            client if isinstance(client, dict) else {}, delay if isinstance(delay, int) else None
        )
        self._opened.set()

    async def _task_open(
        self, doc: _Doc, params: dict[str, Any], body: bytes, received: float
    ) -> None:
        self._task_uri = doc.uri
        if not self.attempt.opened:  # no `initialize` first: the clock starts here
            self._start_attempt(None)
        decision = self.scope.decide(doc.text)
        self.attempt.task_opened(
            self.scope.final_body(doc.text) if decision.outcome == "ok" else None
        )
        refused = self.attempt.expire() and doc.text != self._lean_text
        if decision.outcome in ("ok", "held") and not refused:
            self._scoped_text = doc.text
        if decision.outcome == "ok" and not refused:
            self._lean_text, self._lean_version = doc.text, doc.version
            self._forwarded(doc.version, received)
            await self._to_lean(body)
            return
        # Lean gets the last valid text under the editor's version; the editor is told.
        opened = {**params, "textDocument": {**params["textDocument"], "text": self._lean_text}}
        self._lean_version = doc.version
        self._forwarded(doc.version, received)
        await self._to_lean_json({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                                  "params": opened})  # fmt: skip
        await self._refuse(doc, decision.outcome, decision.reason, refused)

    async def _task_change(self, doc: _Doc, before: str, body: bytes, received: float) -> None:
        decision = self.scope.decide(doc.text)
        refused = self.attempt.expire() and doc.text != self._lean_text
        if decision.outcome in ("ok", "held") and not refused:
            self._scoped_text = doc.text
        self._scope_changed.set()
        self._scope_changed = anyio.Event()
        if decision.outcome != "ok" or refused:
            await self._refuse(doc, decision.outcome, decision.reason, refused)
            return
        previous = self._lean_text
        # The editor back at the text Lean has (a revert's echo, a held body undone): Lean
        # still gets the version (editors and the infoview wait on versions), but the ledger
        # records no new version of the proof.
        echo = doc.text == previous
        if before == previous:
            await self._to_lean(body)  # in step with Lean: the editor's frame as it is
        else:  # Lean holds an older text: one change from it to the editor's
            start, end_old, end_new = changed_span(previous, doc.text)
            change = {"range": _lsp_range(LineIndex(previous), start, end_old),
                      "text": doc.text[start:end_new]}  # fmt: skip
            await self._to_lean_json({"jsonrpc": "2.0", "method": "textDocument/didChange",
                                      "params": {"textDocument": {"uri": doc.uri,
                                                 "version": doc.version},
                                                 "contentChanges": [change]}})  # fmt: skip
        if not echo:
            self._forwarded(doc.version, received)
        self._lean_text, self._lean_version = doc.text, doc.version
        changed = self._extra_diags.pop("held", None) is not None
        if not echo:  # a real edit (not the echo of a revert) clears the notice
            changed = self._extra_diags.pop("outside", None) is not None or changed
            self._revert_id = None
        if changed:
            await self._publish_merged()

    async def _refuse(self, doc: _Doc, outcome: str, reason: str | None, time_up: bool) -> None:
        """Keep Lean on its text; revert the editor (outside edits) or explain (held bodies)."""
        if outcome == "held" and not time_up:
            self.attempt.rejected(doc.version, reason or "held")
            rng = self.scope.body_range(doc.text)
            self._extra_diags["held"] = diagnostic(
                f"{reason}. Lean still checks your last valid proof (version "
                f"{self._lean_version}).",
                rng,
                code="held",
            )
            await self._publish_merged()
            return
        message = TIME_UP_MESSAGE if time_up else OUTSIDE_MESSAGE
        self.attempt.rejected(doc.version, "time limit" if time_up else "outside the proof body")
        # Time up: back to what Lean has (nothing typed since counts); else the last text in
        # scope, a held body included.
        target = self._revert_target = self._lean_text if time_up else self._scoped_text
        start, end_target, _ = changed_span(target, doc.text)
        self._extra_diags["outside"] = diagnostic(
            message, _lsp_range(LineIndex(target), start, max(end_target, start))
        )
        self._revert_tries = 0
        await self._publish_merged()
        await self._send_revert(doc)

    async def _send_revert(self, doc: _Doc) -> None:
        rid = f"{ID_PREFIX}{next(self._ids)}"
        self._revert_id = rid
        self._revert_tries += 1
        edit = replace_edit(doc.text, self._revert_target)
        await self._to_editor_json({"jsonrpc": "2.0", "id": rid, "method": "workspace/applyEdit",
                                    "params": {"label": "leanrig: only the proof body may change",
                                               "edit": {"documentChanges": [{"textDocument": {
                                                   "uri": doc.uri, "version": doc.version},
                                                   "edits": [edit]}]}}})  # fmt: skip

    def _on_editor_response(self, rid: str, message: dict[str, Any]) -> None:
        if rid != self._revert_id:
            return  # an older revert, superseded by a newer edit
        result = message.get("result")
        applied = isinstance(result, dict) and bool(result.get("applied"))
        self._tg.start_soon(self._check_revert, rid, applied)

    async def _check_revert(self, rid: str, applied: bool) -> None:
        """Check the document the editor sends back; retry a skipped revert, then say so."""
        doc = self._docs.get(self._task_uri or "")
        if doc is None:
            return
        target = self._revert_target
        if applied and doc.text != target:
            with anyio.move_on_after(self.timeouts.revert):
                while doc.text != target and self._revert_id == rid:
                    await self._scope_changed.wait()
        if self._revert_id != rid or doc.text == target:
            return
        if self._revert_tries < 3:
            await self._send_revert(doc)
            return
        self._extra_diags["outside"] = diagnostic(
            "leanrig: your editor did not undo the edit outside the proof body; Lean keeps the "
            f"last valid text (version {self._lean_version}). Undo the edit to continue.",
            self._extra_diags.get("outside", {}).get("range")
            or self.scope.body_range(self._lean_text),
        )
        await self._publish_merged()

    async def _publish_merged(self) -> None:
        if self._task_uri is None:
            return
        params: dict[str, Any] = {
            "uri": self._task_uri,
            "diagnostics": [*self._lean_diags, *self._extra_diags.values()],
        }
        version = self._lean_diag_version
        if version is None:
            version = self._lean_version
        if version is not None:
            params["version"] = version
        await self._to_editor_json(
            {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": params}
        )

    # -- Lean → editor -----------------------------------------------------------------------

    async def _from_lean(self, body: bytes, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            rid = message.get("id")
            if isinstance(rid, str) and rid.startswith(ID_PREFIX):
                injected = self._injected.get(rid)
                if injected is not None:
                    injected.message = message
                    injected.done.set()
                return
            self._client_requests.pop(rid, None)
            if self._initialize is not None and rid == self._initialize.get("id"):
                await self._to_editor_json(_with_command(message))
                return
            await self._to_editor(body)
            return
        params = message.get("params")
        if (
            method == "textDocument/publishDiagnostics"
            and isinstance(params, dict)
            and params.get("uri") == self._task_uri
        ):
            self._track_diagnostics(params)
            if self._extra_diags and not params.get("isIncremental"):
                merged = {**params, "diagnostics": [*(params.get("diagnostics") or ()),
                                                    *self._extra_diags.values()]}  # fmt: skip
                await self._to_editor_json({**message, "params": merged})
                return
        await self._to_editor(body)
        if (
            method == "$/lean/fileProgress"
            and isinstance(params, dict)
            and (params.get("textDocument") or {}).get("uri") == self._task_uri
        ):
            stopped = self._track_progress(params)
            if stopped is not None and stopped != self._stop_shown and not self._worker_alive():
                # Lean's watchdog says only this (a fatal progress over the file) when the
                # task file's worker dies, and starts a new one at the next change. (A header
                # Lean cannot import says the same, its worker alive: Lean's own diagnostics
                # explain that.)
                self._stop_shown = stopped
                self.attempt.worker_stopped(stopped)
                await self._show(
                    "leanrig: Lean stopped processing the task file (its worker crashed or was "
                    "killed); your next edit starts it again",
                    2,
                )

    def _track_diagnostics(self, params: dict[str, Any]) -> None:
        version = params.get("version")
        diags = list(params.get("diagnostics") or ())
        if params.get("isIncremental") and version == self._lean_diag_version:
            self._lean_diags.extend(diags)
        else:
            self._lean_diags = diags
            self._lean_diag_version = version if isinstance(version, int) else None
        if self._done is not None and self._done[0] == version:
            self._done = (version, self._done[1], self._done[2], self._lean_errors(version))
            self.record_done()  # the version's last report, just after its "done"

    def _forwarded(self, version: int, received: float) -> None:
        self.record_done()  # a finished version is recorded before the next supersedes it
        self.attempt.forwarded(version, received)

    def record_done(self) -> None:
        """Record the version Lean finished (its ledger line), with its errors as last
        reported: Lean sends a version's "done" progress just *before* its last diagnostics,
        so the count is taken when those arrive (or when the next version or the verdict
        comes first); the Lean time ends at the "done"."""
        if self._done is None:
            return
        version, fatal, at, errors = self._done
        self._done = None
        # Hashed as a submission has it (no blank lines after it), as check_proof's and the
        # result's are: one body, one sha in the ledger and results.jsonl.
        body = (self.scope.body_of(self._lean_text) or "").rstrip()
        self.attempt.elaborated(version, errors=errors, fatal=fatal, body=body, at=at)

    def _worker_alive(self) -> bool:
        """Is a Lean file worker for the task file running (``lean --worker URI`` under the
        server)? True when it cannot be told (then nothing is said)."""
        lean = self._lean
        if lean is None or self._task_uri is None:
            return True
        try:
            tree = psutil.Process(lean.process.pid).children(recursive=True)
            return any(
                "--worker" in argv and self._task_uri in argv
                for argv in (p.cmdline() for p in tree if p.is_running())
            )
        except psutil.Error:
            return True

    def _track_progress(self, params: dict[str, Any]) -> int | None:
        """Time the version Lean says it finished; the version if Lean says it stopped
        processing it for good (a fatal progress), else None."""
        processing = params.get("processing") or []
        version = (params.get("textDocument") or {}).get("version")
        fatal = any(isinstance(p, dict) and p.get("kind") == 2 for p in processing)
        if (processing and not fatal) or not isinstance(version, int):
            return None
        if self._done is not None and self._done[0] == version:
            # Lean may say "done" twice for a version: the first one times it
            return version if fatal else None
        self.record_done()
        self._done = (version, fatal, time.perf_counter(), self._lean_errors(version))
        return version if fatal else None

    def _lean_errors(self, version: int) -> int:
        """Errors Lean has reported so far for ``version`` of the task file."""
        if self._lean_diag_version != version:
            return 0
        return sum(1 for d in self._lean_diags if d.get("severity") == 1)

    # -- the verdict and the clock ------------------------------------------------------------

    async def _check_command(self, rid: Any) -> None:
        try:
            result = await self.check(requested_by_editor=True)
        except Exception as exc:  # the editor must get an answer, whatever failed
            log.exception("editor.check_failed")
            error = {"code": INTERNAL_ERROR, "message": f"leanrig.checkProof failed: {exc}"}
            await self._to_editor_json({"jsonrpc": "2.0", "id": rid, "error": error})
            return
        await self._to_editor_json({"jsonrpc": "2.0", "id": rid, "result": result})

    async def check(self, *, requested_by_editor: bool) -> dict[str, Any]:
        """The verdict on the text Lean has (the last valid body); shown to the editor too."""
        requested = time.time()  # the attempt's clock (attempt.py)
        self.attempt.expire()  # a request after the limit is one, whether the timer saw it or not
        self.record_done()
        text = self._lean_text
        self._checks_running += 1
        try:
            with anyio.fail_after(self.timeouts.verdict):
                verdict: Verdict = await self.verifier.verify(
                    self.task, self.scope.submission(text)
                )
        finally:
            self._checks_running -= 1
            if not self._checks_running:
                self._checks_done.set()
                self._checks_done = anyio.Event()
        self.attempt.checked(verdict, self.scope.final_body(text), requested=requested)
        result = {**verdict.to_json(), "version": self._lean_version,
                  "attempt_s": round(self.attempt.wall_s(), 3),
                  "timed_out": self.attempt.timed_out}  # fmt: skip
        if self.attempt.accepted or self.attempt.timed_out:
            self.attempt.write_result()  # the attempt's line as it stands (a later one replaces it)
        if verdict.accepted:
            await self._show(
                f"leanrig: ACCEPTED — {self.task.id} proved in {self.attempt.wall_s():.1f} s", 3
            )
        else:
            reasons = "; ".join(verdict.reasons) or "rejected"
            await self._show(f"leanrig: not accepted: {reasons}", 1 if requested_by_editor else 2)
        return result

    async def _time_limit(self) -> None:
        await self._opened.wait()
        deadline = self.attempt.deadline()
        if deadline is None:
            return
        # The wall clock, polled: a monotonic sleep stops while the machine is suspended, and
        # the attempt's clock does not (a closed laptop is time spent).
        while True:  # (a sleep polling a clock, not a wait for an event)
            left = deadline - time.time()
            if left <= 0:
                break
            await anyio.sleep(min(left, TIME_LIMIT_POLL))
        if self.attempt.over:
            return
        self.attempt.expire()
        while self._checks_running:  # asked for in time: it may still stop the clock there
            await self._checks_done.wait()
        if self.attempt.accepted:
            return
        if self.attempt.judged(self.scope.final_body(self._lean_text)):
            self.attempt.write_result()  # the last body's verdict is in: no second one
            return
        await self._show("leanrig: the time limit is over; checking your last valid proof", 2)
        try:
            await self.check(requested_by_editor=False)
        except Exception:
            log.exception("editor.final_check_failed")


_TEXT_SYNC = frozenset(
    {"textDocument/didOpen", "textDocument/didChange", "textDocument/didClose",
     "textDocument/didSave"}
)  # fmt: skip


def _command(params: Any) -> str | None:
    return params.get("command") if isinstance(params, dict) else None


def _with_command(message: dict[str, Any]) -> dict[str, Any]:
    """The initialize answer, with ``leanrig.checkProof`` added to the executable commands."""
    result = message.get("result")
    if not isinstance(result, dict):
        return message
    capabilities = dict(result.get("capabilities") or {})
    provider = dict(capabilities.get("executeCommandProvider") or {})
    commands = list(provider.get("commands") or [])
    if CHECK_COMMAND not in commands:
        commands.append(CHECK_COMMAND)
    provider["commands"] = commands
    capabilities["executeCommandProvider"] = provider
    return {**message, "result": {**result, "capabilities": capabilities}}
