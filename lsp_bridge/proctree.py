"""Killing a Lean server together with every process it started.

Lean's watchdog starts each ``lean --worker`` with ``setsid``, so a worker is in its own session
and process group: killing the server's group does not reach it, and when the server dies the
workers are re-parented away from it. We therefore mark the server's environment with a unique
token (inherited by every descendant) and, on teardown, kill every process carrying it.
Linux only (``/proc``). Never kills a process that lacks the token.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from subprocess import PIPE

import anyio
from anyio.abc import Process

from .errors import ServerDied

TOKEN_VAR = "LEANRIG_PROC_TOKEN"


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
    try:
        process = await anyio.open_process(
            list(argv), stdin=stdin, stdout=PIPE, stderr=PIPE, cwd=cwd, env=full_env,
            start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise ServerDied(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    return process, token


def pids_with_token(token: str) -> list[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    found: list[int] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(pid)
    return found


def kill_tree(token: str, leader: int | None = None) -> list[int]:
    """SIGKILL the process group of ``leader`` and every process carrying ``token``."""
    if leader is not None:
        try:
            os.killpg(leader, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    killed = []
    for pid in pids_with_token(token):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return killed
