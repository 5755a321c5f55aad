"""One agent invocation: start the agent in its own session, enforce the wall-clock limit, and
end with **every** process of the attempt gone.

MCP clients start their servers in new sessions (and Lean's watchdog starts its workers with
``setsid``), so killing the agent's process group misses them; when a parent dies first its
children are re-parented away from the agent's tree. Two nets catch them all:

1. the agent's live process tree, walked with psutil (children of children, any session), and
2. every process whose environment carries this attempt's token (``LEANRIG_ATTEMPT_TOKEN``,
   set for the agent and in the MCP config's ``env``, inherited by the server and its Lean
   processes) — orphans included.

The kill freezes each round's processes (SIGSTOP: no more forks, no re-parenting races), then
SIGKILLs them, and repeats until a round finds nothing alive (zombies count as gone). The
invocation's time runs from the agent's start until that point.

The agent runs in the prefix agent_sandbox.py builds, where bwrap works: a shell inside the
sandbox says it is up before it becomes the agent, so a sandbox that could not be set up is
told apart from an agent that failed.
"""

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

LOG_CAP_BYTES: Final = 10 * 2**20  # an agent's stdout + stderr kept in agent.log; rest dropped
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
    # The sandbox could not be set up (a mount it could not make): the agent never ran. The
    # runner's own failure, not the agent's (bwrap exits 1 then, as an agent may).
    sandbox_error: str | None = None

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
    """Every process whose environment has ``var=token`` (a scan of /proc)."""
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
    """Kill ``root``'s tree and every process carrying the token, until none is alive.
    Blocking (/proc reads, polling for exits): run it in a worker thread. Returns (the pids
    killed, whether all are gone)."""
    killed: set[int] = set()
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        live = attempt_processes(root, token, var)
        if not live:
            return frozenset(killed), True
        for p in live:  # freeze first: a frozen process neither forks nor exits mid-walk
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
        # No event tells that a non-child has exited: poll, with a growing pause.
        pause = 0.002
        while time.monotonic() < end and any(_alive(p) for p in live):
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    return frozenset(killed), not attempt_processes(root, token, var)


async def _drain(stream: ByteReceiveStream, log_path: Path, cap: int) -> None:
    """The agent's output into ``log_path``, at most ``cap`` bytes; the rest is read and
    dropped (the agent must never block on a full pipe). A log that cannot be written (a disk
    the agent filled) stops being written, and nothing else stops: that crashed the run, and
    `--resume` gave the agent another try (a red-team sweep)."""
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
    """Run one agent to its end, to ``time_limit`` seconds or until ``abort`` is set, then make
    sure its tree and every process carrying ``token`` are gone. ``sandboxed``: ``argv`` is the
    agent's bwrap prefix (ending in ``--``), then the agent's command; a shell inside the
    sandbox says the sandbox is up (a byte on a pipe) before it becomes the agent, so a sandbox
    that could not be set up is told apart from an agent that failed — which an agent cannot
    fake: bwrap's own status says the child started before it mounts anything, and the
    agent's output is the agent's to write."""
    started = time.perf_counter()
    status_r, status_w = os.pipe() if sandboxed else (-1, -1)
    if sandboxed:
        os.set_blocking(status_r, False)
        cut = list(argv).index("--") + 1
        # (`>&N` takes one digit in some shells: the pipe is reopened through /proc.)
        up = f'printf up > /proc/self/fd/{status_w} && exec "$@"'
        argv = [*argv[:cut], "/bin/sh", "-c", up, "leanrig-agent", *argv[cut:]]
    # Shielded (lsp_bridge.proctree.spawn_marked says why): a cancellation waits for the
    # start and then meets the agent's whole tree in _run_invocation.
    with anyio.CancelScope(shield=True):
        try:
            process = await anyio.open_process(
                list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(status_w,) if sandboxed else (),
            )  # fmt: skip
        except OSError as exc:
            _close(status_r, status_w)
            why = f"cannot start {argv[0]}: {exc.strerror or exc}"
            return Invocation(None, False, time.perf_counter() - started, 0.0, start_error=why)
        finally:
            _close(status_w)  # (the child has its copy)
    try:
        invocation = await _run_invocation(
            process, started, time_limit=time_limit, token=token, token_var=token_var,
            log_path=log_path, log_cap=log_cap, abort=abort,
        )  # fmt: skip
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
    """Did the shell inside the sandbox say it was up (before it became the agent)?"""
    try:
        return os.read(status, 2) == b"up"
    except OSError:  # (nothing written: would block)
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
            # The run itself stops (a signal): the agent's tree and whatever carries its token
            # go now; leaving `async with process` would kill its first process alone.
            root = process.pid if process.returncode is None else None  # (a reaped pid: reused)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(kill_attempt, root, token, token_var, KILL_DEADLINE)
            raise
        timed_out = limit.cancelled_caught
        aborted = not timed_out and process.returncode is None
        t_kill = time.perf_counter()
        # The agent's tree (at the limit) or whatever it left behind (after its exit).
        # Shielded: a stop that lands here must not skip it (a review), and it is bounded.
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
        # Every writer of the pipe is gone; read what is left, bounded.
        drain_scope.deadline = anyio.current_time() + DRAIN_AFTER_EXIT
    if killed or timed_out:
        log.info("run.killed", pid=process.pid, timed_out=timed_out, killed=len(killed),
                 kill_ms=round(kill_s * 1000, 1), gone=gone)  # fmt: skip
    return Invocation(exit_code, timed_out, invocation_s, kill_s, killed, tree_gone=gone,
                      aborted=aborted)  # fmt: skip


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
