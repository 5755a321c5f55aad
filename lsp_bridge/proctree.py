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

TOKEN_VAR = "LEANRIG_PROC_TOKEN"


def new_token() -> str:
    return uuid.uuid4().hex


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
