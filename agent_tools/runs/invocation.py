"""One agent invocation: its own session, a wall-clock limit, and an end with every process gone.

MCP servers and Lean workers leave the agent's session: the kill also takes the attempt's token."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import anyio.abc
import psutil
import structlog
from anyio import AsyncFile
from anyio.abc import ByteReceiveStream

log = structlog.get_logger("leanrig.run")

LOG_CAP_BYTES: Final = 10 * 2**20  # of the agent's output kept in agent.log; the rest dropped
KILL_DEADLINE: Final = 30.0  # seconds the kill may take before the runner gives up (reported)
DRAIN_AFTER_EXIT: Final = 5.0  # seconds to read what is left in the agent's output pipe


@dataclass(frozen=True, slots=True)
class Invocation:
    exit_code: int | None  # None: never started, or the kill took its status
    timed_out: bool
    invocation_s: float  # the agent's start until its whole tree is gone
    kill_s: float  # from the decision to kill until every process is gone (0: none left)
    killed_pids: frozenset[int] = frozenset()  # what the runner killed (tree and leftovers)
    start_error: str | None = None
    tree_gone: bool = True
    aborted: bool = False  # the runner ended it early (its service failed)
    sandbox_error: str | None = None  # the sandbox failed and the agent never ran

    @property
    def killed(self) -> int:
        return len(self.killed_pids)


def _alive(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _tree(root: int) -> list[psutil.Process]:
    try:
        proc = psutil.Process(root)
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def marked(token: str, var: str) -> list[psutil.Process]:
    """Every process whose environment has ``var=token``."""
    me = os.getpid()
    found = []
    for p in psutil.process_iter():
        if p.pid == me:
            continue
        try:
            if p.environ().get(var) == token:
                found.append(p)
        except psutil.Error:
            continue
    return found


def attempt_processes(root: int | None, token: str, var: str) -> list[psutil.Process]:
    """The attempt's live processes: ``root``'s tree plus everything carrying the token."""
    procs = {p.pid: p for p in (_tree(root) if root is not None else [])}
    for p in marked(token, var):
        procs.setdefault(p.pid, p)
    return [p for p in procs.values() if _alive(p)]


def kill_attempt(
    root: int | None, token: str, var: str, deadline: float
) -> tuple[frozenset[int], bool]:
    """Kill ``root``'s tree and the token's processes (blocking); returns (pids, all gone)."""
    killed: set[int] = set()
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        live = attempt_processes(root, token, var)
        if not live:
            return frozenset(killed), True
        for p in live:  # a frozen process neither forks nor exits mid-walk
            try:
                p.suspend()
            except psutil.Error:
                pass
        for p in live:
            try:
                p.kill()
                killed.add(p.pid)
            except psutil.Error:
                pass
        # No event tells that a non-child has exited.
        pause = 0.002
        while time.monotonic() < end and any(_alive(p) for p in live):
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    return frozenset(killed), not attempt_processes(root, token, var)


async def _drain(stream: ByteReceiveStream, log_path: Path, cap: int) -> None:
    """The agent's output into ``log_path``, up to ``cap`` bytes; write errors never end the run."""
    written = 0
    out: AsyncFile[bytes] | None = None
    try:
        out = await anyio.open_file(log_path, "ab")
    except OSError as exc:
        log.warning("run.agent_log_unwritable", path=str(log_path), error=str(exc))
    try:
        async for chunk in stream:
            if out is None or written >= cap:
                continue
            part = chunk[: cap - written]
            try:
                await out.write(part)
                written += len(part)
                if written >= cap:
                    await out.write(b"\n[leanrig: output truncated]\n")
            except OSError as exc:
                log.warning("run.agent_log_unwritable", path=str(log_path), error=str(exc))
                written = cap
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        if out is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(OSError):
                await out.aclose()


async def invoke(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    token: str,
    token_var: str,
    log_path: Path,
    log_cap: int = LOG_CAP_BYTES,
    abort: anyio.Event | None = None,
    sandboxed: bool = False,
) -> Invocation:
    """Run one agent until it exits, ``time_limit`` seconds pass or ``abort`` is set; then kill all.

    ``sandboxed``: ``argv`` is a bwrap prefix ending in ``--``, then the agent's command."""
    started = time.perf_counter()
    status_r, status_w = os.pipe() if sandboxed else (-1, -1)
    if sandboxed:
        os.set_blocking(status_r, False)
        cut = list(argv).index("--") + 1
        # A shell inside says the sandbox is up; `>&N` takes one digit in some shells.
        up = f'printf up > /proc/self/fd/{status_w} && exec "$@"'
        argv = [*argv[:cut], "/bin/sh", "-c", up, "leanrig-agent", *argv[cut:]]
    # Shielded so that a cancellation meets the agent's whole tree in _run_invocation.
    with anyio.CancelScope(shield=True):
        try:
            process = await anyio.open_process(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(status_w,) if sandboxed else (),
            )
        except OSError as exc:
            _close(status_r, status_w)
            why = f"cannot start {argv[0]}: {exc.strerror or exc}"
            return Invocation(None, False, time.perf_counter() - started, 0.0, start_error=why)
        finally:
            _close(status_w)
    try:
        invocation = await _run_invocation(
            process,
            started,
            time_limit=time_limit,
            token=token,
            token_var=token_var,
            log_path=log_path,
            log_cap=log_cap,
            abort=abort,
        )
        if sandboxed and not _agent_started(status_r):
            why = _first_line(log_path)
            log.warning("run.sandbox_failed", detail=why)
            return dataclasses.replace(
                invocation, sandbox_error=f"the agent's sandbox could not be set up: {why}"
            )
        return invocation
    finally:
        _close(status_r)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _agent_started(status: int) -> bool:
    try:
        return os.read(status, 2) == b"up"
    except OSError:  # nothing written
        return False


def _first_line(log_path: Path) -> str:
    try:
        with log_path.open("rb") as f:
            head = f.read(400)
    except OSError:
        return "(no output)"
    return (
        head.decode("utf-8", "replace").strip().splitlines()[0] if head.strip() else "(no output)"
    )


async def _run_invocation(
    process: anyio.abc.Process,
    started: float,
    *,
    time_limit: float,
    token: str,
    token_var: str,
    log_path: Path,
    log_cap: int,
    abort: anyio.Event | None,
) -> Invocation:
    timed_out = False
    kill_s = 0.0
    killed: frozenset[int] = frozenset()
    gone = True
    async with process, anyio.create_task_group() as tg:
        assert process.stdout is not None
        drain_scope = anyio.CancelScope()

        async def drain() -> None:
            assert process.stdout is not None
            with drain_scope:
                await _drain(process.stdout, log_path, log_cap)

        tg.start_soon(drain)
        try:
            with anyio.move_on_after(time_limit) as limit:
                async with anyio.create_task_group() as race:
                    if abort is not None:
                        race.start_soon(_cancel_on, abort, race.cancel_scope)
                    await process.wait()
                    race.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # Leaving `async with process` would kill the agent's first process alone.
            root = process.pid if process.returncode is None else None  # a reaped pid is reused
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(kill_attempt, root, token, token_var, KILL_DEADLINE)
            raise
        timed_out = limit.cancelled_caught
        aborted = not timed_out and process.returncode is None
        t_kill = time.perf_counter()
        # Shielded (and bounded): a stop landing here must not skip the kill.
        root = process.pid if timed_out or aborted else None
        with anyio.CancelScope(shield=True):
            killed, gone = await anyio.to_thread.run_sync(
                kill_attempt, root, token, token_var, KILL_DEADLINE
            )
        with anyio.fail_after(KILL_DEADLINE):
            exit_code = await process.wait()
        invocation_s = time.perf_counter() - started
        if killed:
            kill_s = invocation_s - (t_kill - started)
        drain_scope.deadline = anyio.current_time() + DRAIN_AFTER_EXIT
    if killed or timed_out:
        log.info(
            "run.killed",
            pid=process.pid,
            timed_out=timed_out,
            killed=len(killed),
            kill_ms=round(kill_s * 1000, 1),
            gone=gone,
        )
    return Invocation(
        exit_code, timed_out, invocation_s, kill_s, killed, tree_gone=gone, aborted=aborted
    )


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
