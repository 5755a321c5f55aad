"""`leanrig lsp`: a raw-frame LSP proxy between a human's editor and a sandboxed Lean server.

Routes frames untouched except the task file's sync, ``initialize``, ``leanrig.checkProof`` and
undeclared refreshes. No Lean process outlives the proxy. Raw frames: see agent_tools/README.md."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
import orjson
import structlog
from anyio.abc import ByteReceiveStream, TaskGroup

from lsp_bridge import ProtocolError, decode_body, read_frames
from repl_pool import LeanEnvironment

from ..tasks import Task
from ..verdict import Verifier
from .attempt_clock import AttemptClock
from .human_attempt import HumanAttempt
from .supervised_lean import ID_PREFIX, INTERNAL_ERROR, SupervisedLean, frame
from .task_document import EditorDocument, TaskDocument
from .text_scope import TaskScope, apply_changes

log = structlog.get_logger("leanrig.editor")

CHECK_COMMAND = "leanrig.checkProof"


@dataclass(frozen=True, slots=True)
class ProxyTimeouts:
    spawn: float = 60.0  # Lean restarted and answering `initialize`
    write: float = 30.0  # one frame written to either side
    revert: float = 2.0  # the editor's document back in scope after an applied revert
    verdict: float = 600.0  # one checkProof
    shutdown: float = 3.0


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
        attempt: HumanAttempt,
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
        self._tg: TaskGroup | None = None
        self._client_requests: dict[Any, str] = {}  # editor request id -> method (in Lean)
        self._initialize: dict[str, Any] | None = None
        self._initialized_sent = False
        self._docs: dict[str, EditorDocument] = {}
        self._is_task: dict[str, bool] = {}
        self._exit = False
        ids = itertools.count(1)  # leanrig's own request ids, to both sides
        t = self.timeouts
        self._lean = SupervisedLean(
            environment,
            ids=ids,
            spawn_timeout=t.spawn,
            write_timeout=t.write,
            shutdown_timeout=t.shutdown,
            restart_limit=restart_limit,
            on_frame=self._from_lean,
            reopen=self._reinitialize,
            fail_owed=self._fail_pending,
            restarted=attempt.lean_restarted,
            show=self._show,
        )
        self._task_doc = TaskDocument(
            task,
            self.scope,
            attempt,
            self._lean,
            docs=self._docs,
            ids=ids,
            revert_timeout=t.revert,
            to_editor=self._to_editor_json,
            show=self._show,
            start_soon=self._start_soon,
        )
        self._clock = AttemptClock(
            task,
            verifier,
            attempt,
            self._task_doc,
            verdict_timeout=t.verdict,
            to_editor=self._to_editor_json,
            show=self._show,
        )

    @property
    def lean_text(self) -> str:
        return self._task_doc.lean_text

    @property
    def editor_said_goodbye(self) -> bool:
        return self._exit or self._lean.shutdown_asked

    @property
    def restarts(self) -> int:
        return self._lean.restarts

    def record_done(self) -> None:
        self._task_doc.record_done()

    async def check(self, *, requested_by_editor: bool) -> dict[str, Any]:
        """The verdict on the last valid body, shown to the editor too."""
        return await self._clock.check(requested_by_editor=requested_by_editor)

    async def run(self, editor_in: ByteReceiveStream) -> None:
        """Serve the editor until it exits or disconnects; Lean is gone when this returns."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await tg.start(self._lean.run)
                tg.start_soon(self._clock.time_limit)
                try:
                    await self._editor_loop(editor_in)
                finally:
                    self._lean.closing = True
                    tg.cancel_scope.cancel()
        finally:
            self._lean.closing = True

    def _start_soon(self, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        assert self._tg is not None, "the proxy is not running"
        self._tg.start_soon(run)

    async def _editor_loop(self, editor_in: ByteReceiveStream) -> None:
        try:
            async with aclosing(read_frames(editor_in)) as frames:
                async for body in frames:
                    await self._from_editor(body, decode_body(body))
                    if self._exit or self._lean.failed is not None:
                        return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        except ProtocolError as exc:
            log.warning("editor.protocol_error", error=exc.message)
            return
        log.info("editor.disconnected")

    async def _to_editor(self, body: bytes) -> None:
        # No timer per frame: the writer bounds a blocked write itself.
        async with self._editor_lock:
            await self._send_editor_raw(frame(body))

    async def _to_editor_json(self, message: dict[str, Any]) -> None:
        await self._to_editor(orjson.dumps(message))

    async def _show(self, message: str, kind: int = 3) -> None:
        await self._to_editor_json(
            {
                "jsonrpc": "2.0",
                "method": "window/showMessage",
                "params": {"type": kind, "message": message},
            }
        )

    async def _reinitialize(self) -> None:
        """Send a fresh Lean the editor's initialize and every open document again."""
        if self._initialize is None:
            return
        await self._lean.request_now("initialize", self._initialize.get("params"))
        if self._initialized_sent:
            await self._lean.write_now({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        for doc in self._docs.values():
            text, version = doc.text, doc.version
            if self._is_task_uri(doc.uri):
                text, version = self._task_doc.reopened(doc)
            await self._lean.write_now(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {
                        "textDocument": {
                            "uri": doc.uri,
                            "languageId": "lean4",
                            "version": version,
                            "text": text,
                        }
                    },
                }
            )

    async def _fail_pending(self, why: str) -> None:
        pending, self._client_requests = self._client_requests, {}
        for rid, method in pending.items():
            await self._to_editor_json(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": INTERNAL_ERROR, "message": f"leanrig: {method}: {why}"},
                }
            )

    async def _from_editor(self, body: bytes, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            rid = message.get("id")
            if isinstance(rid, str) and rid.startswith(ID_PREFIX):
                self._task_doc.editor_answered(rid, message)
                return
            await self._lean.send(body)
            return
        params = message.get("params")
        if "id" in message:
            rid = message["id"]
            if method == "workspace/executeCommand" and _command(params) == CHECK_COMMAND:
                self._start_soon(functools.partial(self._clock.check_command, rid))
                return
            if method == "initialize":
                self._initialize = message
                self._clock.connected(params)
            elif method == "shutdown":
                self._lean.shutdown_asked = True
            elif method == "textDocument/waitForDiagnostics":
                body = self._waitable(body, params)
            self._client_requests[rid] = method
            await self._lean.send(body)
            return
        if method in _TEXT_SYNC and isinstance(params, dict):
            await self._text_sync(method, body, params)
            return
        if method == "initialized":
            self._initialized_sent = True
        elif method == "exit":
            self._exit = True
        await self._lean.send(body)

    def _waitable(self, body: bytes, params: Any) -> bytes:
        """Retarget a ``waitForDiagnostics`` for a version Lean never got to the one it has.

        Else Lean would answer only at a later version: the request would hang."""
        if not isinstance(params, dict) or not self._is_task_uri(str(params.get("uri", ""))):
            return body
        doc = self._docs.get(str(params.get("uri", "")))
        version, lean = params.get("version"), self._task_doc.lean_version
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
            doc = EditorDocument(
                uri, str(doc_params.get("text", "")), int(doc_params.get("version") or 0)
            )
            self._docs[uri] = doc
            if self._is_task_uri(uri):
                if not self.attempt.opened:  # no `initialize` came first
                    self._clock.connected(None)
                await self._task_doc.opened(doc, params, body, received)
            else:
                await self._lean.send(body)
        elif method == "textDocument/didChange":
            changed = self._docs.get(uri)
            if changed is None:
                await self._lean.send(body)
                return
            before = changed.text
            changed.text = apply_changes(changed.text, params.get("contentChanges") or ())
            changed.version = int(doc_params.get("version") or changed.version)
            if self._is_task_uri(uri):
                await self._task_doc.changed(changed, before, body, received)
            else:
                await self._lean.send(body)
        elif method == "textDocument/didClose":
            self._docs.pop(uri, None)
            await self._lean.send(body)
        else:  # didSave: never a way around scoping
            saved = self._docs.get(uri)
            if (
                saved is not None
                and self._is_task_uri(uri)
                and saved.text != self._task_doc.lean_text
            ):
                log.info("editor.save_not_forwarded", version=saved.version)
                return
            await self._lean.send(body)

    def _editor_refreshes(self, method: str) -> bool:
        """False for a ``workspace/…/refresh`` request the editor did not declare support for."""
        capability = _REFRESH_CAPABILITY.get(method)
        if capability is None:
            return True
        init = self._initialize or {}
        capabilities = (init.get("params") or {}).get("capabilities") or {}
        workspace = capabilities.get("workspace") if isinstance(capabilities, dict) else None
        declared = workspace.get(capability) if isinstance(workspace, dict) else None
        return isinstance(declared, dict) and declared.get("refreshSupport") is True

    def _is_task_uri(self, uri: str) -> bool:
        known = self._is_task.get(uri)
        if known is None:
            path = uri_path(uri)
            known = self._is_task[uri] = path is not None and (
                path == self.task_path or path.resolve() == self.task_path
            )
        return known

    async def _from_lean(self, body: bytes, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method is None:
            rid = message.get("id")
            self._client_requests.pop(rid, None)
            if self._initialize is not None and rid == self._initialize.get("id"):
                await self._to_editor_json(_with_command(message))
                return
            await self._to_editor(body)
            return
        params = message.get("params")
        if "id" in message and not self._editor_refreshes(method):
            # Lean asks every editor for refreshes; some warn at each undeclared one.
            await self._lean.send_json({"jsonrpc": "2.0", "id": message["id"], "result": None})
            return
        task_uri = self._task_doc.uri
        if (
            method == "textDocument/publishDiagnostics"
            and isinstance(params, dict)
            and params.get("uri") == task_uri
            and await self._task_doc.diagnostics_from_lean(message, params)
        ):
            return
        await self._to_editor(body)
        if (
            method == "$/lean/fileProgress"
            and isinstance(params, dict)
            and (params.get("textDocument") or {}).get("uri") == task_uri
        ):
            await self._task_doc.progress_from_lean(params)


# Refresh request -> the ``workspace`` client capability declaring ``refreshSupport`` (LSP 3.17).
_REFRESH_CAPABILITY = {
    "workspace/inlayHint/refresh": "inlayHint",
    "workspace/semanticTokens/refresh": "semanticTokens",
    "workspace/codeLens/refresh": "codeLens",
    "workspace/inlineValue/refresh": "inlineValue",
    "workspace/diagnostic/refresh": "diagnostics",
    "workspace/foldingRange/refresh": "foldingRange",
}

_TEXT_SYNC = frozenset(
    {
        "textDocument/didOpen",
        "textDocument/didChange",
        "textDocument/didClose",
        "textDocument/didSave",
    }
)


def _command(params: Any) -> str | None:
    return params.get("command") if isinstance(params, dict) else None


def _with_command(message: dict[str, Any]) -> dict[str, Any]:
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
