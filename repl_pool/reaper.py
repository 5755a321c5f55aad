"""`ProcessReaper`: no process tagged for an owner outlives it, however the owner ends.

A Ray worker (an actor's process) may be stopped, crash, or be SIGKILLed with its node; Ray
then kills only its direct children, and nothing at all after a SIGKILL, while Lean's workers
and an agent's tools are grandchildren in sessions of their own. So every process an owner
starts carries ``<var>=<tag>`` in its environment (inherited by everything it starts), and a
tiny reaper process — its own session, stdin a pipe whose write end only the owner holds —
kills every process with that tag when the pipe reaches EOF: on a clean `close`, a crash or a
SIGKILL of the owner alike. The reaper is not the owner's child (it forks away at once): Ray
kills a leaving worker's direct children, and a reaper among them died before it could sweep
(a tagged grandchild outlived a driver that left).

Used by the pool's node actor (`ray_actor.LeanNode`) and by an attempt placed on a cluster
node (agent_tools.runs). It must not know what the tagged processes are.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from typing import IO, Final

START_DEADLINE: Final = 10.0

_SCRIPT: Final = r"""
import os, signal, sys
if os.fork():
    os._exit(0)
sys.stdout.write(f"{os.getpid()}\n")
sys.stdout.flush()
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
        self._pid: int | None = None  # the reaper's (a grandchild that forked away)
        self._done: IO[bytes] | None = None  # its stdout: EOF once it has swept
        self._pipe: int | None = None

    def start(self, timeout: float = START_DEADLINE) -> None:
        read_end, write_end = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != self.var}  # (it spares itself)
        try:
            launcher = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SCRIPT, self.var, self.tag], stdin=read_end,
                env=env, stdout=subprocess.PIPE, start_new_session=True, close_fds=True,
            )  # fmt: skip
        finally:
            os.close(read_end)
        os.set_inheritable(write_end, False)
        self._pipe = write_end
        assert launcher.stdout is not None
        self._done = launcher.stdout
        launcher.wait(timeout)  # (it exits once it has forked)
        ready, _, _ = select.select([self._done], [], [], timeout)
        line = self._done.readline() if ready else b""
        if not line.strip().isdigit():
            self.close()
            raise OSError(f"the process reaper did not start within {timeout:g} s")
        self._pid = int(line)

    def close(self) -> None:
        """EOF to the reaper: it sweeps and exits (idempotent)."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None

    def wait(self, timeout: float) -> None:
        """Until the reaper has swept (``close`` first); killed if it takes longer."""
        if self._done is None:
            return
        ready, _, _ = select.select([self._done], [], [], timeout)
        # Not at EOF (it has not exited) within the time: killed.
        if (not ready or self._done.read(1)) and self._pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)
        self._done.close()
        self._done = None

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
