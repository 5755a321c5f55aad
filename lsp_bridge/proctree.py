"""Killing a Lean server together with every process it started, found by an inherited env token.

Workers run in their own sessions (``setsid``), so the server's process group does not reach
them. Linux only (``/proc``). Never kills a process that lacks the token."""

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
SCAN_TIMEOUT = 5.0  # seconds a full /proc scan may take in kill_tree_async


def new_token() -> str:
    return uuid.uuid4().hex


async def spawn_marked(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None, stdin: int | None
) -> tuple[Process, str]:
    """Start ``argv`` in its own session, marked with a fresh kill token; ``ServerDied`` if not."""
    token = new_token()
    full_env = dict(os.environ if env is None else env)
    full_env[TOKEN_VAR] = token
    # Shielded: a cancelled spawn kills the new pid alone and can orphan its children.
    with anyio.CancelScope(shield=True):
        try:
            process = await anyio.open_process(
                list(argv),
                stdin=stdin,
                stdout=PIPE,
                stderr=PIPE,
                cwd=cwd,
                env=full_env,
                start_new_session=True,
            )
        except OSError as exc:
            raise ServerDied(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    try:
        await anyio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        await kill_tree_async(token, process.pid)
        await kill_tree_async(token)  # a scan: a child may have left the group meanwhile
        with anyio.CancelScope(shield=True), anyio.move_on_after(SCAN_TIMEOUT):
            await process.aclose()
        raise
    return process, token


# A process inside execve briefly shows an empty environment: give it this long to fill.
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
    """An empty environment that may yet fill: not a kernel thread, zombie or dying process."""
    fields = _stat_fields(pid)
    if len(fields) < 7 or fields[0] in (b"Z", b"X", b"x"):
        return False
    try:
        return not int(fields[6]) & PF_KTHREAD
    except ValueError:
        return False


def read_environ(pid: int) -> bytes | None:
    """``pid``'s environment block (None: gone, or not ours to read); waits out an execve."""
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
    """Direct children of ``pid`` (of every thread), without scanning /proc."""
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
    """Every process carrying ``token``: a full, blocking scan of /proc."""
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
    """Kill ``leader``'s group and marked descendants; True if none can have been orphaned."""
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
    """SIGKILL ``leader``'s group and every process with ``token`` (may block on a /proc scan)."""
    killed, complete = _kill_leader_tree(token, leader)
    if not complete:
        killed += _kill(pids_with_token(token), token)
    return killed


async def kill_tree_async(
    token: str, leader: int | None = None, *, timeout: float = SCAN_TIMEOUT
) -> list[int]:
    """``kill_tree`` with any full scan in a thread, shielded, at most ``timeout`` seconds."""
    killed, complete = _kill_leader_tree(token, leader)
    if complete:
        return killed
    with anyio.CancelScope(shield=True), anyio.move_on_after(timeout):
        pids = await anyio.to_thread.run_sync(pids_with_token, token, abandon_on_cancel=True)
        killed += _kill(pids, token)
    return killed
