"""Killing a Lean server together with every process it started.

Lean's watchdog starts each ``lean --worker`` with ``setsid``, so a worker is in its own session
and process group: killing the server's group does not reach it, and when the server dies the
workers are re-parented away from it. We therefore mark the server's environment with a unique
token (inherited by every descendant) and, on teardown, kill every process carrying it.
Linux only (``/proc``). Never kills a process that lacks the token.

Cost: while the leader is alive every process carrying its token is its descendant, found by
walking ``/proc/<pid>/task/<tid>/children`` (a few small reads). Only when the leader is gone
(exited, reaped, or unknown) can a marked process be anywhere: that needs a scan of every
process's environment, which ``kill_tree_async`` runs in a worker thread, bounded in time,
so the event loop never waits on ``/proc``.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from subprocess import PIPE

import anyio
import anyio.lowlevel
from anyio.abc import Process

from .errors import ServerDied

TOKEN_VAR = "LEANRIG_PROC_TOKEN"
SCAN_TIMEOUT = 5.0  # seconds a full /proc scan may take before kill_tree_async gives up on it


def new_token() -> str:
    return uuid.uuid4().hex


async def spawn_marked(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None, stdin: int | None
) -> tuple[Process, str]:
    """Start ``argv`` in its own session, its environment marked with a fresh kill token.

    Returns the process and the token (for ``kill_tree``). A program that cannot be started
    is a typed ``ServerDied`` naming it, not a bare ``OSError``.
    """
    token = new_token()
    full_env = dict(os.environ if env is None else env)
    full_env[TOKEN_VAR] = token
    # Shielded: cancelled inside, asyncio SIGKILLs the new pid alone, and a sandbox's inner
    # process forked before it set its parent-death signal (bwrap's --die-with-parent) lived
    # on with its Lean, orphaned (measured: 7 of 71 spawns cancelled at random points). A
    # spawn is a fork and an exec, done in milliseconds; a cancellation waits for it, then
    # the whole tree, known by now, is killed.
    with anyio.CancelScope(shield=True):
        try:
            process = await anyio.open_process(
                list(argv), stdin=stdin, stdout=PIPE, stderr=PIPE, cwd=cwd, env=full_env,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise ServerDied(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    try:
        await anyio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        await kill_tree_async(token, process.pid)
        await kill_tree_async(token)  # (and a scan: a child that left the group meanwhile)
        with anyio.CancelScope(shield=True), anyio.move_on_after(SCAN_TIMEOUT):
            await process.aclose()
        raise
    return process, token


# A process in the middle of execve shows an empty environment for a moment (the kernel has
# given it the new address space but not yet copied the environment in). A parent learns of a
# successful exec in that moment (close-on-exec pipes close first), so a process just started —
# a Lean worker the watchdog starts while its tree is being killed — reads as token-less.
# Measured: 23 of 200 reads right after `Popen` returned, 150 of 200 on a busy machine.
EXEC_SETTLE_SECONDS = 0.05
PF_KTHREAD = 0x00200000


def _stat_fields(pid: int) -> list[bytes]:
    """/proc/<pid>/stat from the state field on ([0] = state, [1] = ppid, ... [6] = flags)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return []
    return stat[stat.rfind(b")") + 2 :].split()


def _may_still_exec(pid: int) -> bool:
    """An empty environment that may yet fill: not a kernel thread (always empty), not a zombie
    or a dying process (its memory is gone)."""
    fields = _stat_fields(pid)
    if len(fields) < 7 or fields[0] in (b"Z", b"X", b"x"):
        return False
    try:
        return not int(fields[6]) & PF_KTHREAD
    except ValueError:
        return False


def read_environ(pid: int) -> bytes | None:
    """``pid``'s environment block (None: gone, or not ours to read). A process caught inside
    execve is given up to ``EXEC_SETTLE_SECONDS`` to finish it."""
    deadline = 0.0
    while True:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            return None
        if environ or not _may_still_exec(pid):
            return environ
        now = time.monotonic()
        if not deadline:
            deadline = now + EXEC_SETTLE_SECONDS
        elif now >= deadline:
            return environ
        time.sleep(0.001)


def token_of(pid: int) -> str | None:
    """The kill token in ``pid``'s environment (None: no token, gone, or not ours to read)."""
    prefix = f"{TOKEN_VAR}=".encode()
    environ = read_environ(pid)
    if environ is None:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("ascii", "replace")
    return None


def _has_token(pid: int, token: str) -> bool:
    return token_of(pid) == token


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from every thread of it), without scanning /proc."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                found.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (its own tree only; re-parented orphans are not)."""
    found: list[int] = []
    stack = [pid]
    seen = {pid}
    while stack:
        for child in children(stack.pop()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                stack.append(child)
    return found


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (a zombie's children were already re-parented)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] not in (b"Z", b"X")


def pids_with_token(token: str) -> list[int]:
    """Every process carrying ``token``: a full scan of /proc (blocking; see the module doc)."""
    found: list[int] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid != me and _has_token(pid, token):
            found.append(pid)
    return found


def _kill(pids: Iterable[int], token: str) -> list[int]:
    killed = []
    for pid in pids:
        if not _has_token(pid, token):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed


def _kill_leader_tree(token: str, leader: int | None) -> tuple[list[int], bool]:
    """Kill ``leader``'s group and its marked descendants; True if that reached every marked
    process (the leader was still running and carried the token, so none can be orphaned)."""
    if leader is None:
        return [], False
    complete = _running(leader) and _has_token(leader, token)
    tree = descendants(leader) if complete else []  # before killing: then they re-parent
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return _kill(tree, token), complete


def kill_tree(token: str, leader: int | None = None) -> list[int]:
    """SIGKILL the process group of ``leader`` and every process carrying ``token``.

    Cheap while ``leader`` is running (its tree is walked); otherwise a full /proc scan on the
    calling thread: from async code prefer ``kill_tree_async``.
    """
    killed, complete = _kill_leader_tree(token, leader)
    if not complete:
        killed += _kill(pids_with_token(token), token)
    return killed


async def kill_tree_async(
    token: str, leader: int | None = None, *, timeout: float = SCAN_TIMEOUT
) -> list[int]:
    """``kill_tree`` for async callers: the leader's tree is killed at once; a full scan, if
    needed, runs in a worker thread, at most ``timeout`` seconds, shielded from cancellation
    (teardown must finish)."""
    killed, complete = _kill_leader_tree(token, leader)
    if complete:
        return killed
    with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
        pids = await anyio.to_thread.run_sync(pids_with_token, token, abandon_on_cancel=True)
        killed += _kill(pids, token)
    return killed
