"""`ProcessReaper`: no process tagged for an owner outlives it, however the owner ends.

A Ray worker (an actor's process) may be stopped, crash, or be SIGKILLed with its node; Ray
then kills only its direct children, and nothing at all after a SIGKILL, while Lean's workers
and an agent's tools are grandchildren in sessions of their own. So every process an owner
starts carries ``<var>=<tag>`` in its environment (inherited by everything it starts), and a
tiny reaper process — its own session, stdin a pipe whose write end only the owner holds —
kills every process with that tag when the pipe reaches EOF: on a clean `close`, a crash or a
SIGKILL of the owner alike.

Used by the pool's node actor (`ray_actor.LeanNode`) and by an attempt placed on a cluster
node (agent_tools.runs). It must not know what the tagged processes are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Final

_SCRIPT: Final = r"""
import os, signal, sys
needle = (sys.argv[1] + "=" + sys.argv[2]).encode()
sys.stdin.buffer.read()  # EOF: the owner is gone (closed, crashed or killed)
for _ in range(2):
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                marked = needle in fh.read().split(b"\0")
            if marked:
                os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass
"""


class ProcessReaper:
    """Started by ``start()``; ``close()`` (or the owner's death) makes it kill every process
    whose environment has ``var=tag``, then exit."""

    def __init__(self, var: str, tag: str) -> None:
        self.var = var
        self.tag = tag
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None

    def start(self) -> None:
        read_end, write_end = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != self.var}  # (it spares itself)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SCRIPT, self.var, self.tag], stdin=read_end,
                env=env, stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True,
            )  # fmt: skip
        finally:
            os.close(read_end)
        os.set_inheritable(write_end, False)
        self._pipe = write_end

    def close(self) -> None:
        """EOF to the reaper: it sweeps and exits (idempotent)."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None

    def wait(self, timeout: float) -> None:
        """Until the reaper has swept (``close`` first); killed if it takes longer."""
        if self._process is None:
            return
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()

    def tagged(self) -> list[int]:
        """Every live process carrying the tag (tests check that they die with the owner)."""
        return tagged_processes(self.var, self.tag)


def tagged_processes(var: str, tag: str) -> list[int]:
    needle = f"{var}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


__all__ = ["ProcessReaper", "tagged_processes"]
