"""Wiring for `leanrig lsp --supervised`: an ``EditorProxy`` on stdio, and the result line however
the editor leaves. stdout is the LSP channel: nothing else may write to it."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import structlog
from anyio.abc import ByteReceiveStream

from lsp_bridge import LeanrigError, decode_body, find_lean, read_frames
from repl_pool import LeanEnvironment, SandboxPolicy, sandbox_wrapper, uses_namespaces

from ..servers import FdReceive, FdSend, claimed_stdio, freeze_heap
from ..sessions import Ledger
from ..tasks import Suite, SuiteError, Task, library_dir, load_suite
from ..verdict import Verifier
from .edit_workspace import SHIM_VAR
from .human_attempt import Ending, HumanAttempt
from .proxy import EditorProxy, ProxyTimeouts
from .rundir import NEXT, attempt_lock, attempt_state, check_run_dir, ensure_run_info
from .supervised_lean import frame

log = structlog.get_logger("leanrig.editor")


@dataclass(frozen=True, slots=True)
class LspOptions:
    suite: Path
    task: str
    workspace: Path
    run_dir: Path | None = None  # None: WORKSPACE/run
    time_limit: float | None = None
    sandbox: bool = True
    lean: str | None = None
    timeouts: ProxyTimeouts = field(default_factory=ProxyTimeouts)

    def resolved_run_dir(self) -> Path:
        return (self.run_dir or self.workspace / "run").resolve()


def task_file(workspace: Path, file: str) -> Path:
    return (workspace / file).resolve()


def _lean_env(library: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    shim = env.pop(SHIM_VAR, None)
    if shim:
        keep = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != Path(shim)]
        env["PATH"] = os.pathsep.join(keep)
    if library is not None:
        env["LEAN_PATH"] = str(library)
    return env


async def _out_of_time(attempt: HumanAttempt, verifier: Verifier, seconds: float) -> None:
    attempt.expire()
    task, body = attempt.task, attempt.body
    if not attempt.judged(body):
        requested = time.time()
        with anyio.move_on_after(seconds):
            verdict = await verifier.verify(task, task.with_body(body))
            attempt.checked(verdict, body, requested=requested)
    attempt.close()


async def run_lsp(
    options: LspOptions,
    *,
    editor_in: ByteReceiveStream | None = None,
    editor_out: Callable[[bytes], Awaitable[None]] | None = None,
) -> dict[str, Any] | None:
    """Serve one editor on stdio until it leaves; its ``results.jsonl`` line (None: never came)."""
    if editor_in is None or editor_out is None:
        # Claimed before any process starts, so no child inherits the wire.
        with claimed_stdio() as (editor_fd, out_fd):
            return await run_lsp(
                options,
                editor_in=editor_in or FdReceive(editor_fd),
                editor_out=editor_out or FdSend(out_fd, options.timeouts.write),
            )
    try:
        suite = load_suite(options.suite)
        task = suite.task(options.task)
        run_dir = options.resolved_run_dir()
        check_run_dir(run_dir, suite, options.time_limit)  # before any write
        # An editor's restart may overlap the last server's closing verdict.
        async with attempt_lock(run_dir, task.id):
            return await _serve(options, suite, task, run_dir, editor_in, editor_out)
    except SuiteError as exc:
        await _refuse_editor(editor_in, editor_out, exc)
        raise


REFUSE_WAIT_SECONDS = 10.0  # for the editor's `initialize`, to answer it with the refusal


async def _refuse_editor(
    editor_in: ByteReceiveStream,
    editor_out: Callable[[bytes], Awaitable[None]],
    refusal: SuiteError,
) -> None:
    """Answer the editor's `initialize` with the refusal: editors show that, not the exit code."""
    with anyio.move_on_after(REFUSE_WAIT_SECONDS):
        try:
            async for body in read_frames(editor_in):
                message = decode_body(body)
                if message.get("method") == "initialize" and "id" in message:
                    text = f"leanrig: {refusal}"
                    error = {"code": -32603, "message": text, "data": {"retry": False}}
                    reply = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
                    await editor_out(frame(reply))
                    return
        except (LeanrigError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return


async def _serve(
    options: LspOptions,
    suite: Suite,
    task: Task,
    run_dir: Path,
    editor_in: ByteReceiveStream,
    editor_out: Callable[[bytes], Awaitable[None]],
) -> dict[str, Any] | None:
    state = attempt_state(run_dir, task, options.time_limit)
    install = find_lean(suite.root, explicit=options.lean)
    if suite.spec.lean == "full" and install.mode != "toolchain":
        raise SuiteError(
            f"suite {suite.name} needs a full Lean toolchain (Init), but {install.lean} is the "
            "prelude-only bootstrap"
        )
    library = library_dir(suite, install)
    workspace = options.workspace.resolve()
    path = task_file(workspace, task.spec.file)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(task.text, encoding="utf-8")
    scratch = run_dir / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    # Outside Lean's writable scratch: a document's `#eval` must not reach a verdict's files.
    verify_root = run_dir / "verify"
    verify_root.mkdir(parents=True, exist_ok=True)
    policy = SandboxPolicy(writable=(scratch,), use_bwrap=None if options.sandbox else False)
    if options.sandbox and not uses_namespaces(policy):
        log.warning("sandbox.no_bwrap", detail="Lean processes run with rlimits only")
    environment = LeanEnvironment(
        install,
        workspace,
        env=_lean_env(library),
        wrapper=sandbox_wrapper(policy) if options.sandbox else (),
    )
    verifier = Verifier(
        suite,
        install,
        library=library,
        work_root=verify_root,
        sandbox=policy if options.sandbox else SandboxPolicy(use_bwrap=False),
    )
    sandbox = ("bwrap" if uses_namespaces(policy) else "rlimits") if options.sandbox else "none"
    ensure_run_info(run_dir, suite, install.version, options.time_limit, sandbox)
    ledger = Ledger(run_dir / "ledger.jsonl")
    attempt = HumanAttempt(
        task, ledger, run_dir / "results.jsonl", time_limit=options.time_limit, state=state
    )
    if state is not None and attempt.out_of_time():
        try:
            await _out_of_time(attempt, verifier, options.timeouts.verdict)
        finally:
            ledger.close()
        limit = f"task {task.id}: the time limit ({options.time_limit:g} s) ran out while the "
        if not attempt.judged(attempt.body):
            raise SuiteError(
                limit + "editor was closed, and the verdict on the attempt's last proof did not "
                "finish",
                hint="start it again to retry that verdict",
            )
        verdict = "accepted (after the limit)" if attempt.accepted else "not accepted"
        raise SuiteError(
            limit + f"editor was closed; the attempt's last proof got its verdict: {verdict}",
            hint=f"the attempt is over (its line is in {run_dir / 'results.jsonl'}); {NEXT}",
        )
    proxy = EditorProxy(
        task=task,
        task_path=path,
        environment=environment,
        verifier=verifier,
        attempt=attempt,
        send_editor=EditorOut(editor_out),
        timeouts=options.timeouts,
    )

    async def final_verdict() -> None:
        """Judge the last valid body once, as an agent's final one; the attempt stays resumable."""
        if not attempt.opened or attempt.closed or attempt.accepted:
            return
        attempt.expire()
        requested = time.time()
        proxy.record_done()
        text = proxy.lean_text
        if attempt.judged(proxy.scope.final_body(text)):
            return
        # An editor may kill its server soon after `exit`: then the state stays, without a line.
        with anyio.move_on_after(options.timeouts.verdict):
            verdict = await verifier.verify(task, proxy.scope.submission(text))
            attempt.checked(verdict, proxy.scope.final_body(text), requested=requested)

    freeze_heap()
    ended: Ending = "error"
    try:
        await proxy.run(editor_in)
        ended = "shutdown" if proxy.editor_said_goodbye else "cut off"
        await final_verdict()
        return attempt.close(ended)
    except anyio.get_cancelled_exc_class():
        # A stop signal (some editors SIGTERM their server): the verdict still runs, bounded.
        ended = "signal"
        with anyio.CancelScope(shield=True):
            await final_verdict()
        raise
    finally:
        attempt.close(ended)
        ledger.close()


class EditorOut:
    """The editor's side of the wire; once the editor is gone, writes are dropped."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send
        self.gone = False

    async def __call__(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            await self._send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.gone = True
            log.info("editor.gone")
